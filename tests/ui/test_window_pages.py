"""The navigation rail, the pages it shows, and files the OS asks the app to open."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtGui import QFileOpenEvent
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.ui.app import _FileOpenFilter
from app.ui.main_window import MainWindow
from app.ui.nav_rail import CHATS, MODELS, SERVER


def test_rail_buttons_and_shortcuts_switch_pages(qtbot: QtBot, window: MainWindow) -> None:
    assert window.current_page == CHATS
    qtbot.mouseClick(window.rail.buttons[MODELS], Qt.MouseButton.LeftButton)
    assert window.pages.currentWidget() is window.models_pane
    assert window.rail.buttons[MODELS].isChecked()
    qtbot.keyClick(window, Qt.Key.Key_3, Qt.KeyboardModifier.ControlModifier)
    assert window.current_page == SERVER
    assert window.rail.buttons[SERVER].isChecked() and not window.rail.buttons[MODELS].isChecked()
    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)  # new chat
    assert window.current_page == CHATS


def test_the_page_shown_is_remembered(make_window: Callable[[], MainWindow]) -> None:
    first = make_window()
    first.show_page(SERVER)
    first.close()
    assert make_window().current_page == SERVER


def test_download_badge_shows_a_count(window: MainWindow) -> None:
    badge = window.rail._badges[MODELS]
    window.models_pane.downloads_active.emit(2)
    assert badge.isVisible() and badge.text() == "2"
    window.models_pane.downloads_active.emit(0)
    assert not badge.isVisible()


def test_files_opened_by_the_os_reach_the_window(
    qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """macOS sends "Open With" and Dock drops as QFileOpenEvent, before or after the window
    exists; each .gguf goes to the chat (other files are ignored)."""
    loaded: list[str] = []
    monkeypatch.setattr(window, "load_model_into_chat", loaded.append)
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    opener = _FileOpenFilter(app, listen=True)  # as on macOS
    try:
        early = str(tmp_path / "early.gguf")
        QCoreApplication.sendEvent(app, QFileOpenEvent(early))
        assert opener.pending == [early] and loaded == []
        opener.set_handler(window.open_files)
        assert loaded == [early] and opener.pending == []
        QCoreApplication.sendEvent(app, QFileOpenEvent(str(tmp_path / "notes.txt")))
        later = str(tmp_path / "later.gguf")
        QCoreApplication.sendEvent(app, QFileOpenEvent(later))
        assert loaded == [early, later]
    finally:
        app.removeEventFilter(opener)
        opener.deleteLater()


def test_a_second_launch_raises_the_window_and_loads_its_file(
    window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded: list[str] = []
    monkeypatch.setattr(window, "load_model_into_chat", loaded.append)
    window.show_page(MODELS)
    window.on_instance_message(["--verbose", "/models/a.gguf", "/models/b.gguf"])
    assert loaded == ["/models/a.gguf"]


def test_the_picker_offers_models_from_the_users_own_folders(
    qtbot: QtBot, ember_app: QApplication, tmp_path: Path
) -> None:
    """The picker lists the same library as the Models page, folders the user added included."""
    from app.config import Settings
    from app.library.local import Library
    from app.ui.header.model_list import ModelChoices
    from tests.helpers.gguf_writer import write_gguf

    mine = tmp_path / "mine"
    model = write_gguf(mine / "my-model-Q4_K_M.gguf")
    library = Library(
        tmp_path / "models", extra_dirs=[mine], hf_cache_dir=tmp_path / "hf", lmstudio_dirs=()
    )
    catalog = ModelChoices(Settings(), library)
    catalog.refresh()
    qtbot.waitUntil(lambda: [m.path for m in catalog.models] == [str(model)])
    assert catalog.models[0].detail.startswith("Base model · Q4_K_M · ")  # no chat template


def test_settings_tools_page_and_the_chats_share_the_mcp_servers(window: MainWindow) -> None:
    window.open_settings()
    dialog = window.settings_dialog
    assert dialog is not None
    try:
        assert dialog.tools_page.manager is window.controller.answers.tools.manager
    finally:
        dialog.close()
