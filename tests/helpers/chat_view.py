"""Streaming into a chat view without a model: stored messages, an answer begun, and the
layouts settled between updates."""

from __future__ import annotations

import time

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.chats.models import Message, Role, Status
from app.ui import theme
from app.ui.chat import code_block
from app.ui.chat.chat_view import ChatView
from app.ui.chat.markdown import MarkdownRenderer
from app.ui.chat.message_widget import MessageWidget

CHUNK = 60  # characters per update: ~15 tokens, as 450 tok/s arrive 30 times a second


def stored_message(index: int, role: Role, content: str, status: Status = "complete") -> Message:
    return Message(f"m{index}", "chat", None, role, content, status, time.time())


def settle_layouts() -> None:
    for _ in range(3):
        QApplication.processEvents()


def start_answer(view: ChatView) -> tuple[Message, MessageWidget]:
    streaming = stored_message(100, "assistant", "", "streaming")
    view.append_message(streaming, streaming=True)
    settle_layouts()
    widget = view.widget_for(streaming.id)
    assert widget is not None
    return streaming, widget


def shown_chat_view(qtbot: QtBot) -> ChatView:
    """An empty chat view at a laptop window's size, shown (offscreen)."""
    view = ChatView(MarkdownRenderer(theme.current()))
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.show()
    qtbot.waitExposed(view)
    return view


def count_coloured_lines(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, how many lines each call of ``code_block.code_html`` colours, in order."""
    coloured: list[int] = []
    real = code_block.code_html

    def counting(code: str, language: str, palette: theme.Palette) -> str:
        coloured.append(code.count("\n") + 1)
        return real(code, language, palette)

    monkeypatch.setattr(code_block, "code_html", counting)
    return coloured
