"""Server-sent events that stop the engine the moment the client goes away.

Starlette's StreamingResponse only notices a disconnect when the ASGI server says so in a way
that depends on the spec version; here a watcher task reads ``http.disconnect`` from the
receive channel for the whole life of the response and cancels the job at once, whether
tokens are flowing or the prompt is still being read.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


async def _watch(receive: Receive, on_disconnect: Callable[[], None]) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            on_disconnect()
            return


@contextlib.asynccontextmanager
async def disconnect_watch(
    receive: Receive, on_disconnect: Callable[[], None]
) -> AsyncIterator[None]:
    """Call ``on_disconnect`` if the client disconnects while the block runs. Use only after
    the request body was read, and not while a response owns the receive channel."""
    task = asyncio.create_task(_watch(receive, on_disconnect))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class EventStreamResponse(Response):
    """A response streaming ``chunks`` (already framed SSE bytes)."""

    def __init__(  # Response.__init__ would render a body; there is none up front
        self, chunks: AsyncIterator[bytes], on_disconnect: Callable[[], None]
    ) -> None:
        self.chunks = chunks
        self.on_disconnect = on_disconnect
        self.status_code = 200
        self.background = None
        self.raw_headers = list(SSE_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watcher = asyncio.create_task(_watch(receive, self.on_disconnect))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for chunk in self.chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # ASGI 2.4 servers raise when the client is gone
            self.on_disconnect()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            aclose: Any = getattr(self.chunks, "aclose", None)
            if aclose is not None:
                await aclose()
        if self.background is not None:
            await self.background()
