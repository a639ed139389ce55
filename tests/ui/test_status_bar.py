"""The status bar in a narrow window (issue 11, item 12) and the "Parallel answers" setting
(issue 10, item 7)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QPoint, QRect
from PySide6.QtWidgets import QApplication, QMainWindow, QSpinBox
from pytestqt.qtbot import QtBot

from app.config import Settings
from app.engine.load_settings import load_params
from app.engine.types import ChatMessage, ChatRequest, SamplingParams
from app.ui.engine_session import EngineSession
from app.ui.settings.settings_dialog import SettingsDialog
from app.ui.status_bar import StatusBar
from tests.helpers.fake_app import load_fake, model_file
from tests.helpers.parallel_fake import ParallelFakeWorker

LONG_NAME = "Meta-Llama-3.1-70B-Instruct-abliterated-uncensored-imatrix-Q4_K_M.gguf"


@pytest.fixture
def engine(tmp_path: Path, ember_app: QApplication) -> Iterator[EngineSession]:
    worker = ParallelFakeWorker()
    load_fake(worker, model_file(tmp_path, LONG_NAME))
    session = EngineSession(Settings(), worker)
    yield session
    worker.shutdown()


def _whole_inside(outer: QRect, inner: QRect) -> bool:
    return outer.contains(inner.topLeft()) and outer.contains(inner.bottomRight())


@pytest.mark.parametrize("width", [1100, 560, 420])
def test_the_api_switch_is_never_clipped(qtbot: QtBot, engine: EngineSession, width: int) -> None:
    window = QMainWindow()
    qtbot.addWidget(window)
    bar = StatusBar(engine, window)
    window.setStatusBar(bar)
    window.resize(width, 300)
    window.show()
    qtbot.waitExposed(window)
    assert LONG_NAME.removesuffix(".gguf") in bar.state_label.text()  # the whole text is kept
    switch = bar.server_toggle.switch
    label = bar.server_toggle.label

    def fits() -> None:
        for widget in (switch, label):
            assert widget.isVisible()
            top_left = widget.mapTo(bar, QPoint(0, 0))
            assert _whole_inside(bar.rect(), QRect(top_left, widget.size())), width

    qtbot.waitUntil(fits)
    for _ in range(3):  # let the layouts settle: a label's width reaches the window last
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        QApplication.processEvents()
    # Its text does not hold the window wider than asked (Qt would widen it to this).
    assert window.minimumSizeHint().width() <= width
    assert bar.width() == width
    qtbot.waitUntil(fits)
    assert bar.memory_label.isVisible() == (width >= 620)
    if width < 600:
        assert bar.state_label.toolTip() == bar.state_label.text()  # cut short: the tip says it


def test_parallel_answers_is_a_model_loading_setting(qtbot: QtBot, ember_app: QApplication) -> None:
    settings = Settings()
    dialog = SettingsDialog(settings, None)
    qtbot.addWidget(dialog)
    dialog.show_page("Model loading")
    spin = dialog.findChild(QSpinBox, "load_parallel")
    assert spin is dialog.parallel and spin.value() == settings.get("load.parallel")
    assert spin.minimum() == 1 and spin.specialValueText() == "1 (one at a time)"
    spin.setValue(1)
    assert settings.get("load.parallel") == 1
    assert load_params(settings).n_parallel == 1
    spin.setValue(6)
    assert Settings().get("load.parallel") == 6  # saved at once


def test_the_status_bar_counts_api_clients_answers(
    qtbot: QtBot, tmp_path: Path, ember_app: QApplication
) -> None:
    worker = ParallelFakeWorker(tokens_per_second=2)  # slow: the answer runs while we look
    load_fake(worker, model_file(tmp_path, "small.gguf"))
    session = EngineSession(Settings(), worker)
    bar = StatusBar(session)
    qtbot.addWidget(bar)
    try:
        # what the API server does: submit to the engine's worker, not through the app
        job = worker.submit(
            ChatRequest([ChatMessage(role="user", content="hi")], SamplingParams(max_tokens=500))
        )
        qtbot.waitUntil(lambda: "1 answer running (1 for an API client)" in bar.state_label.text())
        job.cancel()
        qtbot.waitUntil(lambda: bar.state_label.text().startswith("Idle"))
    finally:
        worker.shutdown()


@pytest.mark.parametrize(
    "case",
    [
        ("cache_ram", "cache_ram_mb", 1024, "1024 MiB", 1_048_576),  # Conversations in RAM
        ("draft_max", "draft_max", 16, "16 tokens", 32),  # Speculation
    ],
    ids=["conversations-in-ram", "speculation"],
)
def test_model_loading_settings_that_can_be_off(
    qtbot: QtBot, ember_app: QApplication, case: tuple[str, str, int, str, int]
) -> None:
    attr, field, default, shown, maximum = case
    settings = Settings()
    dialog = SettingsDialog(settings, None)
    qtbot.addWidget(dialog)
    dialog.show_page("Model loading")
    spin = dialog.findChild(QSpinBox, f"load_{field}")
    assert spin is getattr(dialog, attr) and spin.value() == default
    assert getattr(load_params(settings), field) == default
    assert spin.maximum() == maximum and spin.text() == shown
    spin.setValue(0)
    assert spin.text() == "Off" and getattr(load_params(Settings()), field) == 0
