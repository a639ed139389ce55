"""Job's event contract under concurrency: exactly one final event, nothing after it, sinks
called one at a time, and no deadlock when a sink finishes or cancels its own job."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from app.engine.types import CompletionRequest, Delta, Event, Failed, Finished, Started
from app.engine.worker import Job


class RecordingSink:
    """Records events in delivery order; slow on deltas to widen any race window."""

    def __init__(self, delay: float = 0.0005) -> None:
        self.events: list[Event] = []
        self.overlaps = 0
        self._inside = 0
        self._lock = threading.Lock()
        self._delay = delay

    def __call__(self, event: Event) -> None:
        with self._lock:
            self._inside += 1
            if self._inside > 1:
                self.overlaps += 1
        if isinstance(event, Delta):
            time.sleep(self._delay)  # a delta on its way while the final event goes out
        with self._lock:
            self.events.append(event)
            self._inside -= 1


@contextmanager
def deltas_pouring_in(job: Job, threads: int) -> Iterator[None]:
    """While the block runs, ``threads`` threads emit deltas to ``job`` as fast as they can."""
    stop = threading.Event()

    def hammer() -> None:
        while not stop.is_set():
            job.emit(Delta(job.id, "t", 1))

    emitters = [threading.Thread(target=hammer, daemon=True) for _ in range(threads)]
    for t in emitters:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in emitters:
            t.join(5)


def test_nothing_is_delivered_after_the_final_event_under_concurrent_emits() -> None:
    for _round in range(20):
        sink = RecordingSink()
        job = Job(CompletionRequest("x"), sink)
        with deltas_pouring_in(job, threads=4):
            time.sleep(0.005)
            final = Finished(job.id, "cancelled")
            finisher = threading.Thread(target=job.finish, args=(final,), daemon=True)
            finisher.start()
            finisher.join(5)
            assert isinstance(job.wait(5), Finished)
            time.sleep(0.005)  # emits keep coming after the final event: all must be dropped
        finals = [e for e in sink.events if isinstance(e, Finished | Failed)]
        assert len(finals) == 1
        assert sink.events[-1] is finals[0], "an event was delivered after the final one"
        assert sink.overlaps == 0, "the sink was called by two threads at once"
        assert not job.finish(Failed(job.id, RuntimeError("late")))  # type: ignore[arg-type]


def test_final_event_from_another_thread_does_not_wait_for_a_slow_sink() -> None:
    """A sink busy with a delta waits for a thread that finishes the job (a user pressing Stop
    whose cancel sends the final event): finish must not block on the delivery in progress,
    and the final event still comes after the delta, once the sink returns."""
    events: list[Event] = []
    finished_in_time: list[bool] = []

    def sink(event: Event) -> None:
        if isinstance(event, Delta):
            other = threading.Thread(target=job.finish, args=(Finished(job.id, "cancelled"),))
            other.start()
            other.join(2)
            finished_in_time.append(not other.is_alive())
            assert not job.done  # delivered after this delta, not during it
        events.append(event)

    job = Job(CompletionRequest("x"), sink)
    job.emit(Started(job.id))
    job.emit(Delta(job.id, "a", 1))
    job.emit(Delta(job.id, "b", 1))  # after the final event: dropped
    assert finished_in_time == [True]
    assert job.done
    assert [type(e) for e in events] == [Started, Delta, Finished]
    assert job.final is events[-1]


def test_a_sink_may_finish_its_own_job() -> None:
    events: list[Event] = []

    def sink(event: Event) -> None:
        events.append(event)
        if isinstance(event, Delta):
            assert job.finish(Finished(job.id, "stop"))  # re-entrant: no deadlock
            assert events[-1] is event  # the final event waits for this call to return
            job.emit(Delta(job.id, "late", 1))

    job = Job(CompletionRequest("x"), sink)
    job.emit(Delta(job.id, "a", 1))
    assert job.done
    assert [type(e) for e in events] == [Delta, Finished]


def test_events_iterator_ends_with_the_single_final_event() -> None:
    """Also: a final event sent while another thread hands back its delivery turn is never
    stranded (the job would never be done)."""
    for _round in range(30):
        job = Job(CompletionRequest("x"))
        with deltas_pouring_in(job, threads=3):
            time.sleep(0.002)
            job.finish(Finished(job.id, "cancelled"))
            assert isinstance(job.wait(2), Finished)
            time.sleep(0.002)
        events = list(job.events(timeout=2))
        assert isinstance(events[-1], Finished)
        assert job._events is not None and job._events.empty()  # nothing queued after it
