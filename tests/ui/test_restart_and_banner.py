"""Two of issue 23's findings a new user reported once and the suite never saw: an error
banner covered the first messages, and a restart reopened another chat than the one open at
quit. Both are checked here the way they were met: a chat with messages and a banner; two
chats, the second open at quit, the app started again on the same EMBER_HOME."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from tests.helpers.fake_app import WAIT_MS, FakeEngine, ask, fake_window_on
from tests.helpers.parallel_fake import ParallelFakeWorker


def _rect_in(window: MainWindow, widget: object) -> QRect:
    from PySide6.QtWidgets import QWidget

    assert isinstance(widget, QWidget)
    return QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())


FAKE_ENGINE = FakeEngine(max_tokens=4)  # the `window` fixture is on the fake engine


def test_an_error_banner_never_covers_the_messages(qtbot: QtBot, window: MainWindow) -> None:
    ask(qtbot, window, "Hello")
    qtbot.waitUntil(lambda: window.controller.answer is None, timeout=WAIT_MS)
    window.chat.banner.show_message("error", "Something went wrong. " * 12, [("OK", print)])
    qtbot.waitUntil(window.chat.banner.isVisible)
    QApplication.processEvents()
    banner = _rect_in(window, window.chat.banner)
    view = _rect_in(window, window.chat.view.viewport())
    assert not banner.intersects(view), (banner, view)
    assert banner.bottom() < view.top()


def test_a_restart_reopens_the_chat_open_at_quit(
    qtbot: QtBot, ember_app: QApplication, fake_worker: ParallelFakeWorker
) -> None:
    with fake_window_on(qtbot, fake_worker, max_tokens=4) as window:
        ask(qtbot, window, "First chat")
        first = window.controller.conversation_id
        window.controller.new_conversation()
        ask(qtbot, window, "Second chat")
        second = window.controller.conversation_id
        window.controller.open_conversation(first)
        window.controller.open_conversation(second)  # back to the second, then quit
        qtbot.waitUntil(lambda: window.controller.answer is None, timeout=WAIT_MS)
    with fake_window_on(qtbot, fake_worker, max_tokens=4) as reopened:
        assert second is not None and second != first
        assert reopened.controller.conversation_id == second
