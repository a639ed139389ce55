"""The status bar's loaded models and the Server page's "Unload unused models after", on the
real window over the fake worker: the button counts the loaded models, its popup lists each
with its memory, context and until when it stays loaded, Unload unloads that one model (the
other stays), and the field saves ``server.model_ttl``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel
from pytestqt.qtbot import QtBot

from app.engine.residency import Resident
from app.engine.types import LoadedModel, LoadParams
from app.ui.engine_session import api_model_id
from app.ui.loaded_models import until_text
from app.ui.main_window import MainWindow
from app.ui.server.model_ttl_field import ModelTtlField
from tests.helpers.fake_app import WAIT_MS, fake_services, load_fake, model_file, show_window
from tests.helpers.parallel_fake import ParallelFakeWorker


@pytest.fixture
def two_models(tmp_path: Path) -> Iterator[tuple[ParallelFakeWorker, str, str]]:
    worker = ParallelFakeWorker()
    first = model_file(tmp_path, "first-Q4_K_M.gguf")
    second = model_file(tmp_path, "second-Q8_0.gguf")
    load_fake(worker, first)
    load_fake(worker, second)
    yield worker, api_model_id(first), api_model_id(second)
    worker.shutdown()


@pytest.fixture
def window(
    qtbot: QtBot, ember_app: QApplication, two_models: tuple[ParallelFakeWorker, str, str]
) -> Iterator[MainWindow]:
    services = fake_services(two_models[0], 50)
    window = show_window(qtbot, services)
    yield window
    window.close()
    services.close()


def _texts(widget: object) -> list[str]:
    assert hasattr(widget, "findChildren")
    return [label.text() for label in widget.findChildren(QLabel)]


def test_the_popup_lists_each_model_and_unloads_the_one_asked(
    qtbot: QtBot, window: MainWindow, two_models: tuple[ParallelFakeWorker, str, str]
) -> None:
    worker, first, second = two_models
    button = window.status.loaded_models
    assert button is not None
    qtbot.waitUntil(lambda: button.isVisible() and button.text() == "2 models", timeout=WAIT_MS)
    window.services.residency.track(second, ttl=600, jit=True)  # as the API's gateway does
    button.open_popup()
    popup = button.popup
    qtbot.waitUntil(lambda: any("in 10 min" in t for t in _texts(popup)), timeout=WAIT_MS)
    texts = _texts(popup)
    assert "first-Q4_K_M" in texts and "second-Q8_0" in texts
    assert "stays loaded" in texts  # the one the app loaded: no time-to-live
    assert any(t.endswith("32,768-token context") for t in texts)
    assert set(popup.unload_buttons) == {first, second}

    qtbot.mouseClick(popup.unload_buttons[first], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: button.text() == "1 model", timeout=WAIT_MS)
    assert [m.model_id for m in worker.loaded_models()] == [second]
    assert set(popup.unload_buttons) == {second}


def test_until_says_when_and_how_long() -> None:
    loaded = LoadedModel("m", "/m.gguf", 512, 512, 1, LoadParams(), None, False, 0.0)
    now = time.mktime((2026, 12, 5, 14, 0, 0, 0, 0, -1))

    def resident(ttl: float | None, expires: float | None) -> Resident:
        return Resident(loaded, 1, False, ttl, expires, True)

    assert until_text(resident(None, None), now) == "stays loaded"
    assert until_text(resident(3600, now + 3600), now) == "until 15:00 (in 60 min)"
    assert until_text(resident(60, now + 20), now) == "until 14:00 (in under a minute)"
    assert until_text(resident(0, now), now) == "unloads when its answers end"


def test_the_server_page_field_saves_the_time_to_live(qtbot: QtBot, window: MainWindow) -> None:
    field = ModelTtlField(window.server)
    qtbot.addWidget(field)
    settings = window.services.settings
    assert field.minutes.value() == 60  # LM Studio's 60 minutes for models loaded on request
    field.minutes.setValue(5)
    assert settings.get("server.model_ttl") == 300.0
    field.minutes.setValue(-1)
    assert field.minutes.text() == "Never" and settings.get("server.model_ttl") == -1.0
    assert window.server.model_ttl() is None
    settings.set("server.model_ttl", float("nan"))  # a hand-edited file: the default
    field.load()
    assert field.minutes.value() == 60
