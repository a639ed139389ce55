"""Full garbage collections wait while answers stream (a full collection over a long session's
objects is a stall of tens of milliseconds in the middle of an answer)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.config import Settings
from app.engine.types import ChatRequest, SamplingParams
from app.ui.app import FullCollectionsWhenIdle
from app.ui.engine_session import EngineSession
from tests.ui.fake_app import WAIT_MS, load_fake, model_file
from tests.ui.parallel_fake import ParallelFakeWorker


@pytest.fixture
def engine(tmp_path: Path, ember_app: QApplication) -> Iterator[EngineSession]:
    worker = ParallelFakeWorker(tokens_per_second=200)
    load_fake(worker, model_file(tmp_path, "fake-model.gguf"))
    thresholds = gc.get_threshold()
    yield EngineSession(Settings(), worker)
    worker.shutdown()
    gc.set_threshold(*thresholds)


def test_full_collections_wait_for_the_answers_to_end(qtbot: QtBot, engine: EngineSession) -> None:
    pacing = FullCollectionsWhenIdle()
    engine.answers_changed.connect(pacing.on_answers_changed)
    before = gc.get_threshold()
    request = ChatRequest([{"role": "user", "content": "go"}], SamplingParams(max_tokens=10**6))
    first, second = engine.chat(request), engine.chat(request)
    qtbot.waitUntil(lambda: engine.running_answers == 2, timeout=WAIT_MS)
    held = gc.get_threshold()
    assert held[:2] == before[:2] and held[2] >= 1 << 30  # young generations still collected

    full: list[int] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and info["generation"] == 2:
            full.append(info["collected"])

    gc.callbacks.append(on_gc)
    try:
        with qtbot.waitSignal(first.done, timeout=WAIT_MS):
            first.cancel()
        assert gc.get_threshold() == held  # one answer still streams
        with qtbot.waitSignal(second.done, timeout=WAIT_MS):
            second.cancel()
        assert gc.get_threshold() == before
        qtbot.waitUntil(lambda: bool(full), timeout=WAIT_MS)  # the held one, now
    finally:
        gc.callbacks.remove(on_gc)
