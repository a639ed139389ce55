"""Waiting on an engine job from a route, shared by the OpenAI and Ollama APIs: the first
events before a stream's headers go out, the next event or a keep-alive tick, a whole answer,
and the 400 of a bad constraint before anything is queued."""

from __future__ import annotations

import asyncio

from fastapi import Request

from app.engine.types import Delta, Event, Failed, FinalEvent, Finished, Started
from app.server import convert
from app.server.errors import APIError, from_engine_error
from app.server.gateway import JobStream
from app.server.streaming import disconnect_watch

HEADER_DEADLINE = 1.0  # seconds after a job starts before a stream's headers go out anyway
QUEUE_DEADLINE = 10.0  # ... or after waiting this long in the queue
KEEPALIVE_AFTER = 10.0  # a silent stream gets an SSE comment, so clients do not time out
KEEPALIVE = b": waiting for the engine\n\n"


async def check_constraint(constraint: convert.Constraint) -> None:
    """A 400 for a bad or oversized grammar or schema before a model is loaded or a job
    queued; converting it is off the event loop (the engine finds it cached)."""
    grammar, schema, _param = constraint
    if grammar or schema is not None:
        await asyncio.to_thread(convert.check_constraint, constraint)


async def first_events(stream: JobStream, request: Request) -> list[Event]:
    """Events up to the first token (or the end), or until HEADER_DEADLINE after the start
    (QUEUE_DEADLINE while queued); raises the APIError of a job that failed by then."""
    loop = asyncio.get_running_loop()
    events: list[Event] = []
    deadline = loop.time() + QUEUE_DEADLINE
    async with disconnect_watch(request.receive, stream.cancel):
        while True:
            event = await stream.next_within(max(0.0, deadline - loop.time()))
            if event is None:
                return events
            events.append(event)
            if isinstance(event, Started):
                deadline = loop.time() + HEADER_DEADLINE
            elif isinstance(event, Failed):
                raise from_engine_error(event.error)
            elif isinstance(event, Finished) and event.reason == "cancelled":
                raise cancelled()
            elif isinstance(event, Delta | Finished):
                return events


class Tick:
    """No event for KEEPALIVE_AFTER seconds."""


TICK = Tick()


async def next_event(stream: JobStream, early: list[Event]) -> Event | Tick | None:
    """The next event (those already received first), TICK after a silence, None after the
    final event."""
    if early:
        return early.pop(0)
    if stream.final is not None:
        return None
    event = await stream.next_within(KEEPALIVE_AFTER)
    return TICK if event is None else event


async def collect(stream: JobStream, request: Request) -> tuple[list[str], Finished]:
    """Every generated text piece and the final event; raises the APIError of a failure."""
    texts: list[str] = []
    async with disconnect_watch(request.receive, stream.cancel):
        async for event in stream:
            if isinstance(event, Delta):
                texts.append(event.text)
    final: FinalEvent | None = stream.final
    if isinstance(final, Failed):
        raise from_engine_error(final.error)
    assert isinstance(final, Finished)
    if final.reason == "cancelled":
        raise cancelled()
    return texts, final


def cancelled() -> APIError:
    return APIError(
        503,
        "The request was cancelled before it finished: the server is stopping or the client "
        "went away.",
        code="cancelled",
        type="server_error",
    )
