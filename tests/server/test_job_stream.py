"""JobStream, the hand-off of a job's events from the engine thread to the event loop
(app/server/gateway.py): in order, a burst in one call on the loop, a silence reported."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from app.engine.types import Delta, Event, Finished, Started
from app.server.gateway import JobStream


def test_a_burst_of_events_crosses_to_the_loop_in_order_in_one_call() -> None:
    async def main() -> tuple[list[Event], int]:
        loop = asyncio.get_running_loop()
        calls = 0
        schedule = loop.call_soon_threadsafe

        def counted(callback: Any, *args: Any) -> Any:
            nonlocal calls
            calls += 1
            return schedule(callback, *args)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign,assignment]
        stream = JobStream(loop, lambda: None, lambda _s: None)
        events: list[Event] = [Started("j"), *(Delta("j", str(i), 1) for i in range(200))]
        events.append(Finished("j", "stop"))

        def engine() -> None:  # the loop is blocked meanwhile (join below): one burst
            for event in events:
                stream.sink(event)

        thread = threading.Thread(target=engine)
        thread.start()
        thread.join()
        received = [event async for event in stream]
        return received, calls

    received, calls = asyncio.run(main())
    assert [getattr(e, "text", type(e).__name__) for e in received] == [
        "Started",
        *(str(i) for i in range(200)),
        "Finished",
    ]
    assert calls == 1


def test_next_within_reports_a_silence_then_the_next_event() -> None:
    async def main() -> tuple[Event | None, Event | None]:
        loop = asyncio.get_running_loop()
        stream = JobStream(loop, lambda: None, lambda _s: None)
        silence = await stream.next_within(0.01)
        threading.Thread(target=stream.sink, args=(Delta("j", "hi", 1),)).start()
        return silence, await stream.next_within(600)

    silence, event = asyncio.run(main())
    assert silence is None
    assert isinstance(event, Delta) and event.text == "hi"
