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
from app.ui.chat.code_block import CodeBlock
from app.ui.chat.markdown import CodeSegment, MarkdownRenderer
from app.ui.chat.message_widget import MessageWidget
from tests.helpers.spying import spy

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
    return spy(monkeypatch, code_block, "code_html", lambda code, *_: code.count("\n") + 1)


CODE_LINES = [f"value_{i} = compute({i})  # line {i}" for i in range(200)]


def streamed_code_block(qtbot: QtBot, count: int) -> CodeBlock:
    """A Python code block streamed the first ``count`` of ``CODE_LINES`` a line at a time (an
    answer still writing it: not finished)."""
    block = CodeBlock(CodeSegment("", "python", False))
    qtbot.addWidget(block)
    for n in range(1, count + 1):
        block.set_segment(CodeSegment("\n".join(CODE_LINES[:n]), "python", False))
    return block
