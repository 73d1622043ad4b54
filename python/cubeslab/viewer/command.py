"""The ``cubeslab view`` command (registered by :mod:`cubeslab.cli`)."""

from __future__ import annotations

import secrets
import socket
import webbrowser
from typing import Annotated

import typer

from . import LOOPBACK, url_host

DEFAULT_PORT = 8000


def view_command(
    stores: Annotated[list[str], typer.Argument(help="Stores to show (folders)")],
    port: Annotated[int, typer.Option(help="Port to listen on")] = DEFAULT_PORT,
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
    url = f"http://{url_host(host)}:{port}/" + (f"?token={token}" if token else "")
    typer.echo(f"cubeslab view: {url}  (Ctrl-C stops it)", err=True)
    if open_browser:
        webbrowser.open(url)
    # Idle clients, and clients whose request's headers take over 5 s, are dropped; at most 64
    # connections are served at once.
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", timeout_keep_alive=5, limit_concurrency=64,
        http=HeaderDeadline,
    )  # fmt: skip
    uvicorn.Server(config).run(sockets=[listening])


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
