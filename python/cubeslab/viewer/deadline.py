"""uvicorn's HTTP protocol with a deadline for each request's headers. uvicorn closes a keep-alive
connection that stays idle, but waits for ever for a request whose headers arrive slowly or never, so a
few slow clients could hold every connection it serves."""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_SECONDS = 5.0
"""Time a client has, from connecting or from the last response, to send a request's headers."""


class HeaderDeadline(H11Protocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def _arm(self) -> None:
        previous = getattr(self, "_deadline", None)
        if previous is not None:
            previous.cancel()
        self._deadline = self.loop.call_later(HEADER_SECONDS, self._expire)

    def _expire(self) -> None:
        # A request in progress (its headers complete) is the application's; anything else has had its time.
        in_progress = self.cycle is not None and not self.cycle.response_complete
        if not in_progress and not self.transport.is_closing():
            self.transport.close()
