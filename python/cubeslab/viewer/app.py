"""The viewer's web server: the page, and a small API over the stores named on the command line.

Security, since anything that reaches the port reaches the server: stores are served by an opaque id,
never by a path from the client; the Host header must be one the server was started for (against DNS
rebinding); a server on another interface than loopback asks for its token (in the URL it prints) on
every request but those for the page's own script and style; requests are capped in size; no CORS
headers are sent.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import CubeslabError
from . import LOOPBACK, url_host
from .planes import PlaneSource

STATIC = Path(__file__).parent / "static"
TOKEN_HEADER = "x-cubeslab-token"


class NoSuchStore(LookupError):
    """An id no store named on the command line has."""


class TokenCheck:
    """Every request must carry the token, as ``?token=`` or the ``X-Cubeslab-Token`` header, but those
    for the page's own script and style: the browser asks for them without it (``<script src>``), and
    they are the package's published files, nothing of a store (the token stays out of their URLs, and
    so out of the browser's cache)."""

    def __init__(self, app: ASGIApp, token: str):
        self.app, self.token = app, token
        self.public = {f"/static/{path.name}" for path in STATIC.iterdir() if path.suffix in (".js", ".css")}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in self.public:
            request = Request(scope)
            given = request.headers.get(TOKEN_HEADER) or request.query_params.get("token") or ""
            if not secrets.compare_digest(given, self.token):
                await JSONResponse({"error": "this server asks for its token"}, status_code=403)(
                    scope, receive, send
                )
                return
        await self.app(scope, receive, send)


def make_app(stores: list[str], *, host: str = "127.0.0.1", port: int = 8000, token: str | None = None):
    """The ASGI app serving ``stores``; ``token`` is required on every request when given."""
    sources = {secrets.token_hex(4): PlaneSource(path) for path in stores}

    def source(request: Request) -> PlaneSource:
        found = sources.get(request.path_params["store"])
        if found is None:
            raise NoSuchStore(f"no store {request.path_params['store'][:40]!r}")
        return found

    def integer(request: Request, name: str, default: int | None = None) -> int:
        text = request.query_params.get(name)
        if text is None:
            if default is None:
                raise ValueError(f"{name} is required")
            return default
        if not re.fullmatch(r"-?[0-9]{1,12}", text):
            raise ValueError(f"{name}={text[:20]!r} is not an integer")
        return int(text)

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def listing(request: Request) -> Response:
        return JSONResponse([{"id": key, "name": Path(s.path).name} for key, s in sources.items()])

    async def describe(request: Request) -> Response:
        return JSONResponse(source(request).description)

    async def plane(request: Request) -> Response:
        found = source(request)
        axis, index = integer(request, "axis"), integer(request, "index")
        rows, cols = (n for d, n in enumerate(found.array.shape) if d != axis) if 0 <= axis < 3 else (0, 0)
        r0, r1 = integer(request, "r0", 0), integer(request, "r1", rows)
        region = (r0, r1, integer(request, "c0", 0), integer(request, "c1", cols))
        size = (integer(request, "h"), integer(request, "w"))
        started = time.perf_counter()
        values, where = found.plane(axis, index, region, size)
        # The server's share of a plane's time, which the browser's Resource Timing reports beside its own.
        elapsed = f"read;dur={(time.perf_counter() - started) * 1e3:.2f}"
        headers = {"x-plane": json.dumps(where), "cache-control": "no-store", "server-timing": elapsed}
        return Response(
            values.astype("<f4").tobytes(), media_type="application/octet-stream", headers=headers
        )

    def floats(values, headers: dict | None = None) -> Response:
        headers = {"cache-control": "no-store", **(headers or {})}
        return Response(
            values.astype("<f4").tobytes(), media_type="application/octet-stream", headers=headers
        )

    async def ion_image(request: Request) -> Response:
        text = request.query_params.get("mz", "")
        try:
            mz = float(text)
        except ValueError:
            raise ValueError(f"mz={text[:20]!r} is not a number") from None
        image = source(request).ion_image(mz, request.query_params.get("tol", "10ppm")[:20])
        return floats(image, {"x-plane": json.dumps({"shape": list(image.shape)})})

    async def spectrum(request: Request) -> Response:
        return floats(source(request).spectrum(integer(request, "x"), integer(request, "y")))

    async def sample(request: Request) -> Response:
        at = (integer(request, "i"), integer(request, "j"), integer(request, "k"))
        return JSONResponse(source(request).sample(at))

    async def refused(request: Request, error: Exception) -> Response:
        status = 404 if isinstance(error, NoSuchStore) else 400
        return JSONResponse({"error": str(error)}, status_code=status)

    allowed = sorted({host, *LOOPBACK} - {"0.0.0.0", "::"}) if host in LOOPBACK else ["*"]
    if host not in LOOPBACK and host not in ("0.0.0.0", "::"):
        allowed = [host, *LOOPBACK]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=[url_host(h) for h in allowed])]
    if token is not None:
        middleware.append(Middleware(TokenCheck, token=token))
    routes = [
        Route("/", index),
        Route("/api/stores", listing),
        Route("/api/stores/{store}", describe),
        Route("/api/stores/{store}/plane", plane),
        Route("/api/stores/{store}/sample", sample),
        Route("/api/stores/{store}/ion-image", ion_image),
        Route("/api/stores/{store}/spectrum", spectrum),
        Mount("/static", StaticFiles(directory=STATIC)),
    ]
    handlers = {NoSuchStore: refused, ValueError: refused, CubeslabError: refused}
    return Starlette(routes=routes, middleware=middleware, exception_handlers=handlers)  # type: ignore[arg-type]
