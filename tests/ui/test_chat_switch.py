"""Switching to a long chat: the view is laid out with its messages before anything decides
whether older ones are needed (issue 10, item 7: widgets built for nothing right after a switch
held the GUI thread while answers were streaming)."""

from __future__ import annotations

import time

from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.chats.models import Message, Role
from app.ui import theme
from app.ui.chat.chat_view import INITIAL, ChatView
from app.ui.chat.markdown import MarkdownRenderer


def _message(message_id: str, role: Role, content: str) -> Message:
    return Message(message_id, "chat", None, role, content, "complete", time.time())


def test_switching_from_a_tall_chat_to_a_long_one_renders_no_older_messages(
    qtbot: QtBot, ember_app: QApplication
) -> None:
    """The new messages used to be shown by Qt a turn later: the first layout had none of
    them, the scroll range fell to 0, and 'scrolled to the top' rendered older messages."""
    view = ChatView(MarkdownRenderer(theme.current()))
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.show()
    qtbot.waitExposed(view)
    answer = "\n\n".join(f"Paragraph {i} of a long answer." for i in range(60))
    view.set_messages([_message("q", "user", "Question"), _message("a", "assistant", answer)])
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())

    ranges: list[int] = []
    bar.rangeChanged.connect(lambda _low, high: ranges.append(high))
    view.set_messages(
        [
            _message(f"m{i}", "user", f"Question {i}")
            if i % 2 == 0
            else _message(f"m{i}", "assistant", f"Answer {i}: **bold**, `code`.\n\nMore.")
            for i in range(500)
        ]
    )
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())
    for _ in range(10):
        QApplication.processEvents()
    assert 0 not in ranges  # never laid out without its messages
    # The newest INITIAL messages fill the window: nothing older is needed yet.
    assert view.rendered_count == INITIAL
