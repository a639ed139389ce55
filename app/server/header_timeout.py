"""uvicorn's HTTP/1.1 protocol with deadlines for reading a request.

uvicorn closes idle keep-alive connections, but not a connection that never completes its
request line and headers, and any byte received cancels its idle timer: 300 half-open
connections stayed open for good. Here each connection must deliver a whole request head
within ``HEADER_TIMEOUT`` seconds of opening (or of its previous response), and then its body
with no silence longer than ``BODY_IDLE_TIMEOUT`` (a body promised by Content-Length and never
sent held its connection, and the server's shutdown, for good); else it is closed.
Runs on the server's event loop thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT = 30.0  # seconds; module-level so tests can shorten it
BODY_IDLE_TIMEOUT = 30.0  # seconds without a byte of a request body that is not complete


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
        if self.cycle is not None and self.conn.their_state is h11.SEND_BODY:
            self._arm(BODY_IDLE_TIMEOUT)  # more of the body is due: again after each piece
        elif self.cycle is not before or self.conn.their_state is h11.DONE:
            self._disarm()  # a request's head (and body) arrived: its cycle began

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request on this connection gets the same deadline

    def _arm(self, seconds: float | None = None) -> None:
        self._disarm()
        delay = HEADER_TIMEOUT if seconds is None else seconds
        self._header_timer = self.loop.call_later(delay, self._on_header_timeout)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _on_header_timeout(self) -> None:
        self._header_timer = None
        waiting = self.cycle is None or self.cycle.response_complete
        reading_body = self.conn.their_state is h11.SEND_BODY
        if reading_body and self.flow.read_paused:  # the silence is ours: the app reads slowly
            self._arm(BODY_IDLE_TIMEOUT)
        elif (waiting or reading_body) and not self.transport.is_closing():
            self.transport.close()  # the app, if reading the body, gets http.disconnect
