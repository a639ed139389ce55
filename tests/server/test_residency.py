"""Several models at once, through the real engine and the real test model: the memory budget
unloads the least recently used idle model loaded just in time, never a busy one (the load is
refused with model_too_large instead), and an idle model's time-to-live runs out on a fake
clock (its clock restarts when an answer ends; a running answer keeps it).

The same file under two or three names (hard links, so they are different files to the
gateway) counts as two or three models."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.engine.residency import Residency, memory_of
from app.engine.types import (
    ChatMessage,
    ChatRequest,
    Delta,
    Event,
    Failed,
    Finished,
    LoadParams,
    ModelTooLargeError,
    SamplingParams,
    UnloadRequest,
)
from app.engine.worker import EngineWorker, Job
from app.server.catalog import StaticCatalog, entry_for_file
from app.server.gateway import Gateway
from tests.helpers.model_copies import model_copies

PARAMS = LoadParams(n_ctx=512, n_parallel=1)
IDS = ("gemma-a", "gemma-b", "gemma-c")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RecordingResidency(Residency):
    """Sets an event for each model unloaded, so a test waits for it (never a sleep)."""

    def __init__(self, worker: EngineWorker, **kwargs: object) -> None:
        kwargs.setdefault("timer", False)  # expire_due() is called by the test
        super().__init__(worker, **kwargs)  # type: ignore[arg-type]
        self.unloaded: dict[str, threading.Event] = {i: threading.Event() for i in IDS}

    def unload(self, model_id: str, sink: Callable[[Event], None] | None = None) -> Job:
        def done(event: Event) -> None:
            if isinstance(event, Finished | Failed):
                self.unloaded[model_id].set()

        return super().unload(model_id, done)


@pytest.fixture(scope="module")
def files(gemma_path: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return model_copies(gemma_path, tmp_path_factory.mktemp("several"), IDS)


@pytest.fixture
def clean(worker: EngineWorker) -> Iterator[EngineWorker]:
    yield worker
    worker.run(UnloadRequest(None), 120)


def _gateway(
    worker: EngineWorker, files: list[Path], residency: Residency, ttl: float | None = 3600
) -> Gateway:
    catalog = StaticCatalog([entry_for_file(f, i) for f, i in zip(files, IDS, strict=True)])
    return Gateway(worker, catalog, PARAMS, residency=residency, model_ttl=ttl)


def _on_a_fake_clock(
    worker: EngineWorker, files: list[Path], ttl: float | None = 3600
) -> tuple[FakeClock, RecordingResidency, Gateway]:
    """A gateway whose residency keeps time by a clock the test moves."""
    clock = FakeClock()
    residency = RecordingResidency(worker, clock=clock)
    return clock, residency, _gateway(worker, files, residency, ttl=ttl)


def _loaded(worker: EngineWorker) -> set[str]:
    return {m.model_id for m in worker.loaded_models()}


def _answer(model_id: str, text: str = "Hi", max_tokens: int = 2) -> ChatRequest:
    return ChatRequest(
        [ChatMessage(role="user", content=text)],
        SamplingParams(max_tokens=max_tokens, temperature=0.0),
        model=model_id,
    )


def _long_answer(model_id: str) -> ChatRequest:
    return _answer(model_id, "Count from one to a thousand in words.", 400)


def _started(worker: EngineWorker, model_id: str) -> tuple[Job, threading.Event]:
    """An answer running on ``model_id``: returns once its first text arrived."""
    first = threading.Event()

    def sink(event: Event) -> None:
        if isinstance(event, Delta | Finished | Failed):
            first.set()

    job = worker.submit(_long_answer(model_id), sink)
    assert first.wait(300)
    assert not job.done
    return job, first


def test_a_second_model_beyond_the_budget_unloads_the_first(
    clean: EngineWorker, files: list[Path]
) -> None:
    worker = clean
    residency = RecordingResidency(worker)
    gateway = _gateway(worker, files, residency)
    a = asyncio.run(gateway.resolve("gemma-a"))
    room_for_one = memory_of(a) * 3 // 2
    residency.budget_bytes = room_for_one
    b = asyncio.run(gateway.resolve("gemma-b"))
    assert residency.unloaded["gemma-a"].wait(120)
    assert _loaded(worker) == {b.model_id}
    # with room for both, a third unloads the least recently *used*, not the first loaded
    residency.budget_bytes = memory_of(b) * 5 // 2
    asyncio.run(gateway.resolve("gemma-a"))
    assert _loaded(worker) == {"gemma-a", "gemma-b"}
    worker.run(_answer("gemma-b"), 300)
    residency.touch("gemma-b")  # gemma-b used last (the gateway touches what it submits)
    asyncio.run(gateway.resolve("gemma-c"))
    assert residency.unloaded["gemma-a"].wait(120)
    assert _loaded(worker) == {"gemma-b", "gemma-c"}


def test_a_busy_model_is_never_unloaded_for_another_the_load_is_refused(
    clean: EngineWorker, files: list[Path]
) -> None:
    worker = clean
    residency = RecordingResidency(worker)
    gateway = _gateway(worker, files, residency)
    a = asyncio.run(gateway.resolve("gemma-a"))
    residency.budget_bytes = memory_of(a) * 3 // 2
    job, _ = _started(worker, "gemma-a")
    try:
        with pytest.raises(ModelTooLargeError) as refused:
            asyncio.run(gateway.resolve("gemma-b"))
        assert "gemma-a" in str(refused.value) and "answering" in str(refused.value)
        assert _loaded(worker) == {"gemma-a"}
        assert not residency.unloaded["gemma-a"].is_set()
    finally:
        job.cancel()
    final = job.wait(300)
    assert isinstance(final, Finished)
    # idle again: now it makes room
    asyncio.run(gateway.resolve("gemma-b"))
    assert residency.unloaded["gemma-a"].wait(120)
    assert _loaded(worker) == {"gemma-b"}


def test_an_idle_model_is_unloaded_when_its_ttl_runs_out_on_a_fake_clock(
    clean: EngineWorker, files: list[Path]
) -> None:
    worker = clean
    clock, residency, gateway = _on_a_fake_clock(worker, files, ttl=60)
    asyncio.run(gateway.resolve("gemma-a"))
    (entry,) = residency.snapshot()
    assert entry.ttl == 60 and entry.expires_at is not None and entry.jit
    clock.now += 59
    assert residency.expire_due() == []
    # an answer in progress is never unloaded, however long it runs
    job, _ = _started(worker, "gemma-a")
    clock.now += 3600
    assert residency.expire_due() == []
    job.cancel()
    job.wait(300)
    residency.touch("gemma-a")  # what the gateway does when an answer it sent ends
    clock.now += 59
    assert residency.expire_due() == []
    clock.now += 2
    assert residency.expire_due() == ["gemma-a"]
    assert residency.unloaded["gemma-a"].wait(120)
    assert _loaded(worker) == set()


def test_the_timer_thread_unloads_without_anyone_asking(
    clean: EngineWorker, files: list[Path]
) -> None:
    worker, clock = clean, FakeClock()
    residency = RecordingResidency(worker, clock=clock, timer=True)
    gateway = _gateway(worker, files, residency, ttl=300)
    asyncio.run(gateway.resolve("gemma-a"))
    asyncio.run(gateway.resolve("gemma-b", ttl=-1))  # a request's ttl: kept for good
    clock.now += 301
    residency.wake()
    assert residency.unloaded["gemma-a"].wait(120)
    assert _loaded(worker) == {"gemma-b"}
    (kept,) = residency.snapshot()
    assert kept.ttl is None and kept.expires_at is None
    residency.close()


def test_a_ttl_of_zero_unloads_once_the_answer_ends(clean: EngineWorker, files: list[Path]) -> None:
    worker = clean
    _clock, residency, gateway = _on_a_fake_clock(worker, files)

    async def answer() -> None:
        model = await gateway.resolve("gemma-a", ttl=0)
        # resolved but not submitted yet: held, so the timer leaves it
        assert residency.expire_due() == []
        stream = gateway.submit(_answer(model.model_id))
        async for _ in stream:
            pass

    asyncio.run(answer())
    assert residency.expire_due() == ["gemma-a"]  # at once: no time passed
    assert residency.unloaded["gemma-a"].wait(120)


def test_a_model_the_person_loaded_is_never_unloaded_by_the_budget_or_a_ttl(
    clean: EngineWorker, files: list[Path]
) -> None:
    worker = clean
    clock, residency, gateway = _on_a_fake_clock(worker, files)
    loaded = gateway.load(str(files[0]), "gemma-a", PARAMS).wait(300)  # as --model does
    residency.budget_bytes = memory_of(loaded) * 3 // 2
    asyncio.run(gateway.resolve("gemma-a", ttl=0))  # a request's ttl: not for this one
    clock.now += 10_000
    assert residency.expire_due() == []
    with pytest.raises(ModelTooLargeError, match="gemma-a"):
        asyncio.run(gateway.resolve("gemma-b"))
    assert _loaded(worker) == {"gemma-a"}


def test_a_model_whose_request_went_away_mid_load_still_gets_its_ttl(
    clean: EngineWorker, files: list[Path]
) -> None:
    worker = clean
    clock, residency, gateway = _on_a_fake_clock(worker, files, ttl=60)

    async def leave_while_loading() -> None:
        request = asyncio.create_task(gateway.resolve("gemma-a"))
        while not worker.busy:  # the load job is running
            await asyncio.sleep(0.01)
        request.cancel()  # the client disconnected
        with pytest.raises(asyncio.CancelledError):
            await request

    asyncio.run(leave_while_loading())
    worker.run(_answer("gemma-a"), 300)  # queued behind the load: it is loaded once this ends
    (loaded,) = residency.snapshot()
    assert loaded.model.model_id == "gemma-a" and loaded.ttl == 60 and loaded.jit
    clock.now += 61
    assert residency.expire_due() == ["gemma-a"]


def test_a_model_file_that_cannot_be_read_leaves_the_load_to_say_why(tmp_path: Path) -> None:
    """The budget reads the file's header; a missing or broken file is the load's to report
    (a scripted model, or a model deleted since the catalog listed it), not the budget's."""
    residency = Residency(EngineWorker(), budget_bytes=1, timer=False)
    try:
        room = residency.make_room(str(tmp_path / "gone.gguf"), LoadParams(), "gone")
        assert room.evicted == () and room.needed_bytes == 0
    finally:
        residency.worker.shutdown()
