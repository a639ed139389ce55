"""Python's cyclic garbage collector runs on the GUI thread only, and its full collections wait
while answers stream (app/ui/collector.py).

A collection on another thread can free Qt objects off their thread; in the suite that was a
segfault (a full collection on the Hub thread freed an earlier window's objects, then a timer
fired into freed memory)."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.config import Settings
from app.engine.types import ChatRequest, SamplingParams
from app.ui.collector import GuiCollector, collect_if_due, generation_due
from app.ui.engine_session import EngineSession
from tests.helpers.fake_app import WAIT_MS, load_fake, model_file
from tests.helpers.parallel_fake import ParallelFakeWorker


class _Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def collections() -> Iterator[list[tuple[str, int]]]:
    """(thread name, generation) of every collection while the test runs."""
    seen: list[tuple[str, int]] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            seen.append((threading.current_thread().name, info["generation"]))

    gc.callbacks.append(on_gc)
    yield seen
    gc.callbacks.remove(on_gc)


@pytest.fixture
def thresholds() -> Iterator[None]:
    """Restores the interpreter's thresholds a test changes."""
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_garbage_made_on_a_worker_thread_is_collected_on_the_gui_thread(
    qtbot: QtBot, ember_app: QApplication, collections: list[tuple[str, int]]
) -> None:
    assert not gc.isenabled()  # the app's collector (installed by ember_app) has taken over
    freed_on: list[str] = []
    made = threading.Event()

    def allocate() -> None:
        # Well past every threshold: an automatic collector would run here, on this thread.
        first = _Cycle()
        weakref.finalize(first, lambda: freed_on.append(threading.current_thread().name))
        del first
        junk = [_Cycle() for _ in range(50 * gc.get_threshold()[0])]
        del junk
        made.set()

    thread = threading.Thread(target=allocate, name="worker")
    thread.start()
    thread.join()
    assert made.is_set()
    assert [name for name, _ in collections if name == "worker"] == []
    qtbot.waitUntil(lambda: bool(freed_on), timeout=WAIT_MS)  # the collector's next check
    assert freed_on == [threading.main_thread().name]
    assert {name for name, _ in collections} == {threading.main_thread().name}


def _collect_in_rounds(rounds: int, *, hold_full: bool = False) -> list[int | None]:
    """Each round allocates past the first threshold, then collects what is due."""
    generations = []
    for _ in range(rounds):
        keep = [_Cycle() for _ in range(150)]
        generations.append(collect_if_due(hold_full=hold_full))
        del keep
    return generations


def test_due_generation_follows_the_interpreters_thresholds(
    ember_app: QApplication, thresholds: None, collections: list[tuple[str, int]]
) -> None:
    gc.collect()
    collections.clear()
    gc.set_threshold(100, 2, 2)
    assert generation_due() is None  # nothing allocated since the full collection
    generations = _collect_in_rounds(13)
    # The interpreter's cadence: a generation is collected once the younger one's collections
    # outnumber its threshold (generation 1 after three of generation 0, 2 after three of 1).
    assert generations == [0, 0, 0, 1] * 3 + [2]
    assert [gen for _, gen in collections] == generations


def test_holding_full_collections_caps_them_at_generation_one(
    ember_app: QApplication, thresholds: None
) -> None:
    gc.collect()
    gc.set_threshold(100, 1, 1)
    assert _collect_in_rounds(9, hold_full=True) == [0, 0, 1] * 3  # a full one was due twice
    keep = [_Cycle() for _ in range(150)]
    assert generation_due(hold_full=True) == 0 and generation_due() == 2
    del keep


@pytest.fixture
def engine(tmp_path: Path, ember_app: QApplication) -> Iterator[EngineSession]:
    worker = ParallelFakeWorker(tokens_per_second=200)
    load_fake(worker, model_file(tmp_path, "fake-model.gguf"))
    yield EngineSession(Settings(), worker)
    worker.shutdown()


def test_full_collections_wait_for_the_answers_to_end(
    qtbot: QtBot, engine: EngineSession, collections: list[tuple[str, int]]
) -> None:
    collector = GuiCollector()
    engine.answers_changed.connect(collector.on_answers_changed)
    request = ChatRequest([{"role": "user", "content": "go"}], SamplingParams(max_tokens=10**6))
    try:
        first, second = engine.chat(request), engine.chat(request)
        qtbot.waitUntil(lambda: engine.running_answers == 2, timeout=WAIT_MS)
        assert collector.holding_full
        with qtbot.waitSignal(first.done, timeout=WAIT_MS):
            first.cancel()
        assert collector.holding_full  # one answer still streams
        collections.clear()
        with qtbot.waitSignal(second.done, timeout=WAIT_MS):
            second.cancel()
        assert not collector.holding_full
        qtbot.waitUntil(lambda: (threading.main_thread().name, 2) in collections, timeout=WAIT_MS)
    finally:
        collector.stop()
    assert not gc.isenabled()  # the app's own collector still holds it (stop gives back only
    # what this one took)
