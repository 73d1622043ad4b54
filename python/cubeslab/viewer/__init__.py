"""``cubeslab view``: a local web viewer of stores. The server (starlette, run by uvicorn: the ``view``
extra) reads planes through the engine and sends them as binary float32; the page (plain HTML, CSS and
JavaScript in ``static/``) draws three linked sections with colour maps, zoom and the labels under the
cursor. Read-only: nothing here writes to a store."""

LOOPBACK = ("127.0.0.1", "localhost", "::1")
"""Hosts only this machine reaches: a server bound to one needs no token."""


def url_host(host: str) -> str:
    """``host`` as a URL and a Host header write it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host
