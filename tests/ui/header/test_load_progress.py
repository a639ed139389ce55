"""Loading a model shows how far it is: the picker's pill counts up to 100%."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow

ENGINE_WORKER = "idle_worker"  # a worker of its own with no model: this test loads one


def test_the_picker_shows_the_load_percentage(
    qtbot: QtBot, make_window: Callable[[], MainWindow], gemma_path: Path
) -> None:
    window = make_window()
    window.services.settings.set("load.use_mmap", False)  # read the weights: many steps
    window.services.settings.set("load.n_ctx", 512)
    picker = window.header.picker
    shown: list[str] = []
    engine = window.services.engine
    engine.load_progress.connect(lambda _f: shown.append(picker.detail_label.text()))
    with qtbot.waitSignal(engine.model_loaded, timeout=120_000):
        window.load_model_into_chat(str(gemma_path))
    percents = [int(t.rstrip("%")) for t in shown if re.fullmatch(r"\d+%", t)]
    assert len(percents) >= 3 and percents == sorted(percents) and percents[-1] == 100
    assert picker.detail_label.text() == "512 ctx"  # loaded: the context in use
