"""uvicorn's HTTP/1.1 protocol with a deadline for a request's headers.

uvicorn closes idle keep-alive connections, but not a connection that never completes its
request line and headers, and any byte received cancels its idle timer: 300 half-open
connections stayed open for good. Here each connection must deliver a whole request head
within ``HEADER_TIMEOUT`` seconds of opening (or of its previous response), else it is closed.
Runs on the server's event loop thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT = 30.0  # seconds; module-level so tests can shorten it


class HeaderTimeoutProtocol(H11Protocol):
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a request's head arrived: its cycle began
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request on this connection gets the same deadline

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(HEADER_TIMEOUT, self._on_header_timeout)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _on_header_timeout(self) -> None:
        self._header_timer = None
        waiting = self.cycle is None or self.cycle.response_complete
        if waiting and not self.transport.is_closing():
            self.transport.close()
