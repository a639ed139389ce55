"""The bridge: worker events become GUI-thread signals, in order, coalesced to ~30 per second."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.engine.types import ChatRequest, Failed, Finished, SamplingParams
from app.engine.worker import EngineWorker
from app.ui.bridge import DEFAULT_UPDATES_PER_SECOND, EngineBridge
from tests.helpers.fake_model import fake_factory, fake_load_params


@pytest.fixture
def fast_worker() -> Iterator[EngineWorker]:
    worker = EngineWorker(model_factory=fake_factory(tokens_per_second=4000))
    worker.load("fake.gguf", fake_load_params()).result(10)
    yield worker
    worker.shutdown()


def test_tokens_are_coalesced_to_about_30_updates_a_second(
    qtbot: QtBot, qapp: QApplication, fast_worker: EngineWorker
) -> None:
    bridge = EngineBridge(fast_worker)
    stamps: list[float] = []
    texts: list[str] = []
    handle = bridge.submit(
        ChatRequest([{"role": "user", "content": "go"}], SamplingParams(max_tokens=4000))
    )

    def on_delta(text: str, _tokens: int) -> None:
        stamps.append(time.perf_counter())
        texts.append(text)

    handle.delta.connect(on_delta)
    with qtbot.waitSignal(handle.finished, timeout=30_000) as blocker:
        pass
    final = blocker.args[0]
    assert isinstance(final, Finished)
    assert "".join(texts) == final.result  # nothing lost or duplicated by coalescing
    duration = stamps[-1] - stamps[0]
    assert duration > 0.5
    rate = (len(stamps) - 1) / duration
    assert rate <= DEFAULT_UPDATES_PER_SECOND * 1.1, f"{rate:.1f} updates/s"
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert min(gaps[:-1]) >= 0.030  # the last one is the final event's flush
    assert final.usage.completion_tokens == 4000
    assert len(stamps) < 4000 / 10  # many tokens per update


def test_signal_order_and_one_final_signal(
    qtbot: QtBot, qapp: QApplication, fast_worker: EngineWorker
) -> None:
    bridge = EngineBridge(fast_worker)
    request = ChatRequest([{"role": "user", "content": "go"}], SamplingParams(max_tokens=50))
    handle = bridge.submit(request)
    finals: list[object] = []
    handle.done.connect(finals.append)
    with qtbot.waitSignals(
        [handle.started, handle.delta, handle.finished, handle.done],
        order="simple",
        timeout=10_000,
    ):
        pass
    qtbot.wait(50)
    assert len(finals) == 1
    assert bridge.live_jobs == 0


def test_a_rejected_job_fails_through_the_same_signals(qtbot: QtBot, qapp: QApplication) -> None:
    worker = EngineWorker(model_factory=fake_factory())
    worker.shutdown()
    bridge = EngineBridge(worker)
    handle = bridge.submit(ChatRequest([{"role": "user", "content": "go"}]))
    with qtbot.waitSignal(handle.failed, timeout=5000) as blocker:
        pass
    failed = blocker.args[0]
    assert isinstance(failed, Failed)
    assert "shutting down" in str(failed.error)


def test_a_slow_update_leaves_the_gui_time_before_the_next(
    qtbot: QtBot, qapp: QApplication
) -> None:
    """The interval between updates counts from the end of the previous one: when showing an
    update takes long, the GUI still gets 1/30 s for input and painting before the next."""
    from tests.helpers.parallel_fake import ParallelFakeWorker

    worker = ParallelFakeWorker(tokens_per_second=2000)
    worker.load("fake.gguf", fake_load_params()).result(10)
    try:
        bridge = EngineBridge(worker)
        handle = bridge.submit(
            ChatRequest([{"role": "user", "content": "go"}], SamplingParams(max_tokens=1500))
        )
        starts: list[float] = []
        ends: list[float] = []

        def slow_view(_text: str, _tokens: int) -> None:
            starts.append(time.perf_counter())
            time.sleep(0.04)  # a view that takes 40 ms to show an update
            ends.append(time.perf_counter())

        handle.delta.connect(slow_view)
        with qtbot.waitSignal(handle.finished, timeout=30_000):
            pass
    finally:
        worker.shutdown()
    # The last update comes with the final event, at once.
    idle = [start - end for end, start in zip(ends, starts[1:], strict=False)][:-1]
    assert len(idle) >= 5
    assert min(idle) >= 1 / DEFAULT_UPDATES_PER_SECOND * 0.95
