"""Two of issue 23's findings a new user reported once and the suite never saw: an error
banner covered the first messages, and a restart reopened another chat than the one open at
quit. Both are checked here the way they were met: a chat with messages and a banner; two
chats, the second open at quit, the app started again on the same EMBER_HOME."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from tests.helpers.fake_app import WAIT_MS, ask, fake_services, load_fake, model_file, show_window
from tests.helpers.parallel_fake import ParallelFakeWorker


def _rect_in(window: MainWindow, widget: object) -> QRect:
    from PySide6.QtWidgets import QWidget

    assert isinstance(widget, QWidget)
    return QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())


def test_an_error_banner_never_covers_the_messages(
    qtbot: QtBot, tmp_path: Path, ember_app: QApplication
) -> None:
    worker = ParallelFakeWorker()
    load_fake(worker, model_file(tmp_path, "m.gguf"))
    services = fake_services(worker, max_tokens=4)
    window = show_window(qtbot, services)
    try:
        ask(qtbot, window, "Hello")
        qtbot.waitUntil(lambda: window.controller.answer is None, timeout=WAIT_MS)
        window.chat.banner.show_message("error", "Something went wrong. " * 12, [("OK", print)])
        qtbot.waitUntil(window.chat.banner.isVisible)
        QApplication.processEvents()
        banner = _rect_in(window, window.chat.banner)
        view = _rect_in(window, window.chat.view.viewport())
        assert not banner.intersects(view), (banner, view)
        assert banner.bottom() < view.top()
    finally:
        window.close()
        services.close()
        worker.shutdown()


def test_a_restart_reopens_the_chat_open_at_quit(
    qtbot: QtBot, tmp_path: Path, ember_app: QApplication
) -> None:
    worker = ParallelFakeWorker()
    load_fake(worker, model_file(tmp_path, "m.gguf"))
    services = fake_services(worker, max_tokens=4)
    window = show_window(qtbot, services)
    try:
        ask(qtbot, window, "First chat")
        first = window.controller.conversation_id
        window.controller.new_conversation()
        ask(qtbot, window, "Second chat")
        second = window.controller.conversation_id
        window.controller.open_conversation(first)
        window.controller.open_conversation(second)  # back to the second, then quit
        qtbot.waitUntil(lambda: window.controller.answer is None, timeout=WAIT_MS)
        window.close()
    finally:
        services.close()
    again = fake_services(worker, max_tokens=4)
    reopened = show_window(qtbot, again)
    try:
        assert second is not None and second != first
        assert reopened.controller.conversation_id == second
    finally:
        reopened.close()
        again.close()
        worker.shutdown()
