"""The ``cubeslab view`` command (registered by :mod:`cubeslab.cli`)."""

from __future__ import annotations

import secrets
import socket
import webbrowser
from typing import Annotated

import typer

from . import LOOPBACK, url_host

DEFAULT_PORT = 8000
ANY_INTERFACE = ("0.0.0.0", "::")
"""Hosts that stand for every interface of the machine: no browser browses to them."""


def _port(value: int) -> int:
    """``--port``'s callback: a number out of the TCP range is a usage error naming it (the system would
    take 70000 modulo 65536, and refuse -1 with an OverflowError)."""
    if not 0 <= value <= 65535:
        raise typer.BadParameter(f"{value}: give 1..65535, or 0 for any free port")
    return value


def view_command(
    stores: Annotated[list[str], typer.Argument(help="Stores to show (folders)")],
    port: Annotated[
        int, typer.Option(callback=_port, help="Port to listen on (0: any free one)")
    ] = DEFAULT_PORT,
    host: Annotated[
        str, typer.Option(help="Interface to listen on; another than 127.0.0.1 asks for a token")
    ] = "127.0.0.1",
    open_browser: Annotated[bool, typer.Option("--open", help="Open the page in a browser")] = False,
) -> None:
    """Show stores in a web browser: inline, crossline and time slice, linked, with overview levels."""
    from ..errors import InvalidInputError
    from ..locations import local_only

    try:
        import uvicorn

        from .app import make_app
        from .deadline import HeaderDeadline
    except ImportError:
        raise InvalidInputError("the viewer needs its web server: pip install 'cubeslab[view]'") from None

    for store in stores:
        local_only(store, "the viewer")
    token = None if host in LOOPBACK else secrets.token_urlsafe(16)
    listening = _listen(host, port)  # before the URL is printed: a port taken is said as such
    port = listening.getsockname()[1]  # --port 0: the one the system chose
    app = make_app(stores, host=host, port=port, token=token)
    url, where = _url(host, port, token)
    typer.echo(f"cubeslab view: {url}  ({where}Ctrl-C stops it)", err=True)
    if open_browser:
        webbrowser.open(url)
    # Idle clients, and clients whose request's headers take over 5 s, are dropped; at most 64
    # connections are served at once.
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", timeout_keep_alive=5, limit_concurrency=64,
        http=HeaderDeadline,
    )  # fmt: skip
    uvicorn.Server(config).run(sockets=[listening])


def _url(host: str, port: int, token: str | None) -> tuple[str, str]:
    """The page's URL, and a note on where else it is reached. A server on every interface (0.0.0.0,
    ::) is named by this machine's loopback address, since a browser cannot browse to 0.0.0.0."""
    query = f"?token={token}" if token else ""
    if host not in ANY_INTERFACE:
        return f"http://{url_host(host)}:{port}/{query}", ""
    loopback = "::1" if ":" in host else "127.0.0.1"
    elsewhere = f"http://{url_host(socket.gethostname())}:{port}/{query}"
    note = f"on every interface; from another machine by this one's name or address, e.g. {elsewhere}; "
    return f"http://{url_host(loopback)}:{port}/{query}", note


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, or a :class:`CubeslabIOError` naming them."""
    from ..errors import CubeslabIOError

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        listening = socket.socket(family, kind, proto)
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(address)
    except OSError as error:
        reason = error.strerror or str(error)
        raise CubeslabIOError(
            f"{host}:{port}: cannot listen there ({reason}); choose another --port"
        ) from None
    return listening
