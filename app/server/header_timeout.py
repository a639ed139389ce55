"""uvicorn's HTTP/1.1 protocol with deadlines for reading a request.

uvicorn closes idle keep-alive connections, but not a connection that never completes its
request line and headers, and any byte received cancels its idle timer: 300 half-open
connections stayed open for good. Here each connection must deliver a whole request head
within ``HEADER_TIMEOUT`` seconds of opening (or of its previous response), and then its body
at a minimum rate: every ``BODY_WINDOW`` seconds must bring ``MIN_BODY_RATE`` bytes a second
of it (or its end), and the whole body must arrive within ``BODY_WINDOWS`` windows, else the
connection is closed. A body promised by Content-Length and never sent held its connection,
and the server's shutdown, for good; 130 bodies trickling a byte every 5 s held every place of
the request cap (app/server/limits.py) for as long as they liked, and a body sent at just the
minimum rate would have held its bytes of the body budget for hours. A window in which the
app, not the client, was slow (it stopped reading) does not count.
Runs on the server's event loop thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

# module-level so tests can shorten them
HEADER_TIMEOUT = 30.0  # seconds for a request's line and headers
BODY_WINDOW = 30.0  # seconds: the body's rate is checked over each window of this length
MIN_BODY_RATE = 1024  # bytes a second, on average over a window (a slow link sends far more)
BODY_WINDOWS = 10  # windows a whole body may take: 5 minutes (32 MB over a 1 Mbit/s link: 4.5)


class HeaderTimeoutProtocol(H11Protocol):
    _header_timer: asyncio.TimerHandle | None = None
    _received = 0  # bytes received on this connection
    _window_start: int | None = None  # _received when the body's current window began
    _windows = 0  # windows of the current body the client was given

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._received += len(data)
        super().data_received(data)

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not None and self.conn.their_state is h11.SEND_BODY:
            if self._window_start is None:
                self._windows = 0
                self._arm_body_window()  # the body began: its first window
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

    def _arm_body_window(self) -> None:
        self._disarm()
        self._window_start = self._received
        self._header_timer = self.loop.call_later(BODY_WINDOW, self._on_body_window_end)

    def _disarm(self) -> None:
        self._window_start = None
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _on_header_timeout(self) -> None:
        self._header_timer = None
        waiting = self.cycle is None or self.cycle.response_complete
        if waiting and not self.transport.is_closing():
            self.transport.close()

    def _on_body_window_end(self) -> None:
        self._header_timer = None
        if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
            self._window_start = None
            return
        brought = self._received - (self._window_start or 0)
        if self.flow.read_paused:
            self._arm_body_window()  # the silence is ours (the app reads slowly): not counted
            return
        self._windows += 1
        if brought >= MIN_BODY_RATE * BODY_WINDOW and self._windows < BODY_WINDOWS:
            self._arm_body_window()  # enough came, and there is time left
        else:
            self.transport.close()  # the app, if reading the body, gets http.disconnect
