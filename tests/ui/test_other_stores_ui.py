"""Other apps' stores in the app: Settings → Models lists them with a switch each and the
hidden models with "Show again"; My Models hides (never deletes) a model from Ollama's
read-only store and shows Ollama's details; the picker lists it by Ollama's name."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtWidgets import QApplication, QLabel, QPushButton
from pytestqt.qtbot import QtBot

from app.config import Settings
from app.library.local import Library
from app.ui.header.model_list import ModelChoices
from app.ui.models.my_models import MyModelsView
from app.ui.settings.models_page import ModelsPage
from app.ui.task_runner import Lane
from tests.helpers.gguf_writer import gguf_bytes
from tests.helpers.other_stores import canary, make_read_only, make_writable, ollama_model

TIMEOUT = 30_000


def _library(tmp_path: Path) -> Library:
    return Library(tmp_path / "models", hf_cache_dir=tmp_path / "hf", lmstudio_dirs=())


def test_my_models_hides_an_ollama_model_and_the_store_is_untouched(
    qtbot: QtBot, ember_app: QApplication, tmp_path: Path
) -> None:
    store = Path(os.environ["OLLAMA_MODELS"])
    template = "{{ .Prompt }}<img src='x'>"  # another app's text: shown escaped
    ollama_model(store, "gemma3:270m", gguf_bytes(name="G"), template=template)
    make_read_only(store)
    before = canary(store)
    try:
        library = _library(tmp_path)
        choices = ModelChoices(Settings(), library)
        choices.refresh()
        qtbot.waitUntil(lambda: [m.name for m in choices.models] == ["gemma3:270m"])

        view = MyModelsView(library, Settings(), Lane("library", 1))
        qtbot.addWidget(view)
        view.show()
        view.refresh()
        qtbot.waitUntil(lambda: len(view.rows) == 1, timeout=TIMEOUT)
        row = next(iter(view.rows.values()))
        chips = {label.text(): label for label in row.findChildren(QLabel, "Chip")}
        assert "Ollama" in chips
        assert "{{ .Prompt }}&lt;img src=&#x27;x&#x27;&gt;" in chips["Ollama details"].toolTip()
        assert "Hide" in row.delete_button.toolTip()
        row.delete_button.click()  # no question: nothing is deleted
        qtbot.waitUntil(lambda: view.banner.isVisible() and not view.rows, timeout=TIMEOUT)
        assert "never deletes another app's files" in view.banner.text.text()
        assert canary(store) == before
        undo = view.banner.findChildren(QPushButton, "BannerAction")[0]
        assert undo.text() == "Undo"
        undo.click()
        qtbot.waitUntil(lambda: len(view.rows) == 1, timeout=TIMEOUT)
    finally:
        make_writable(store)


def test_settings_lists_the_stores_with_switches_and_the_hidden_models(
    qtbot: QtBot, ember_app: QApplication, tmp_path: Path
) -> None:
    store = Path(os.environ["OLLAMA_MODELS"])
    ollama_model(store, "tiny:latest")
    library = _library(tmp_path)
    [tiny] = library.scan()
    library.delete(tiny.id)  # hidden
    settings = Settings()
    page = ModelsPage(settings, library)
    qtbot.addWidget(page)
    qtbot.waitUntil(lambda: page.survey is not None, timeout=TIMEOUT)
    assert set(page.switches) == {"ollama", "llama.cpp", "jan", "gpt4all"}
    assert page.switches["ollama"].isChecked()  # found: on by default
    assert not page.switches["gpt4all"].isChecked()  # not found: off
    texts = [label.text() for label in page.findChildren(QLabel)]
    assert f"Found: {store}" in texts
    assert any(t.startswith("Not found (looked in ") for t in texts)

    with qtbot.waitSignal(page.sources_changed):
        page.switches["ollama"].setChecked(False)
    assert Settings().get("library.sources") == {"ollama": False}

    [show] = page.show_buttons.values()
    with qtbot.waitSignal(page.sources_changed, timeout=TIMEOUT):
        show.click()
    assert library.hidden_paths() == []
    qtbot.waitUntil(lambda: not page.show_buttons, timeout=TIMEOUT)
