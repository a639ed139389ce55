"""Settings → Providers → Add provider at the dialog's smallest size: labels level with their
fields, and a failed "Test connection" that never pushes the buttons out of reach."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QApplication, QLabel, QScrollArea, QWidget
from pytestqt.qtbot import QtBot

from app.engine.worker import EngineWorker
from app.ui.main_window import MainWindow
from app.ui.settings.settings_dialog import SettingsDialog
from tests.helpers.net import free_port


@pytest.fixture
def engine_worker() -> Iterator[EngineWorker]:
    """No model: these tests only look at the dialog."""
    worker = EngineWorker()
    yield worker
    worker.shutdown()


def open_provider_editor(window: MainWindow) -> SettingsDialog:
    window.open_settings()
    dialog = window.settings_dialog
    assert dialog is not None
    # small, yet room for the buttons and a two-line result (at the 600x420 minimum, for a
    # 640x480 screen, the buttons stay in view first: ProviderEditor._reveal_result)
    dialog.resize(720, 520)
    dialog.show_page("Providers")
    dialog.providers_page.add_provider()
    QApplication.processEvents()
    return dialog


def test_the_extra_headers_label_sits_on_the_first_line_of_its_box(window: MainWindow) -> None:
    dialog = open_provider_editor(window)
    editor = dialog.providers_page.editor
    box = editor.headers
    labels = [w for w in editor.findChildren(QLabel) if w.text() == "Extra headers"]
    (label,) = labels
    first_line = box.cursorRect(QTextCursor(box.document())).center()
    line_centre = box.viewport().mapTo(dialog, first_line).y()
    label_centre = label.mapTo(dialog, label.contentsRect().center()).y()
    assert abs(label_centre - line_centre) <= 2, (label_centre, line_centre)
    dialog.reject()


def test_a_failed_connection_test_keeps_the_buttons_in_view(
    qtbot: QtBot, window: MainWindow
) -> None:
    dialog = open_provider_editor(window)
    editor = dialog.providers_page.editor
    scroll = dialog.pages.currentWidget()
    assert isinstance(scroll, QScrollArea)
    editor.name.setText("gpu-box")
    editor.url.setText(f"http://127.0.0.1:{free_port()}/v1")  # nothing listens there
    qtbot.mouseClick(editor.test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: editor.result.property("kind") == "error", timeout=20_000)
    for button in (editor.test_button, editor.save_button):  # the message comes under them
        assert editor.result.geometry().top() > button.geometry().bottom()

    def in_view(widget: QWidget) -> bool:
        viewport = scroll.viewport()
        top_left = widget.mapTo(viewport, QPoint(0, 0))
        return viewport.rect().contains(QRect(top_left, widget.size()))

    qtbot.waitUntil(
        lambda: all(in_view(w) for w in (editor.test_button, editor.save_button, editor.result))
    )
    dialog.reject()


def test_reopening_the_form_during_a_connection_test_gives_the_button_back(
    qtbot: QtBot, window: MainWindow
) -> None:
    """A server that accepts and never answers: the test runs on; opening the form again
    forgets it, so "Test connection" works again and the old test's result never shows."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        dialog = open_provider_editor(window)
        editor = dialog.providers_page.editor
        editor.name.setText("gpu-box")
        editor.url.setText(f"http://127.0.0.1:{silent.getsockname()[1]}/v1")
        qtbot.mouseClick(editor.test_button, Qt.MouseButton.LeftButton)
        assert not editor.test_button.isEnabled()
        assert editor.result.property("kind") == "busy"
        dialog.providers_page.add_provider()
        assert editor.test_button.isEnabled()
        assert editor.result.isHidden()
        dialog.reject()
