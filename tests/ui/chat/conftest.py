"""Fixtures shared by the chat's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.tools.config import McpConfig
from app.tools.manager import ToolManager
from app.ui.chat.chat_view import ChatView
from tests.helpers.chat_view import settle_layouts, shown_chat_view, stored_message
from tests.helpers.mcp_config import time_server
from tests.helpers.parallel_fake import ANSWER


@pytest.fixture
def time_manager(ember_home: Path) -> Iterator[ToolManager]:
    """A tool manager with mcp-server-time, its command line approved."""
    config = McpConfig()
    config.add(time_server())
    manager = ToolManager(config)
    yield manager
    manager.shutdown()


@pytest.fixture
def view(qtbot: QtBot, ember_app: QApplication) -> ChatView:
    """A chat of eight finished messages (all rendered: none waits for a scroll up), laid out
    and shown."""
    shown = shown_chat_view(qtbot)
    history = [
        stored_message(i, "user", f"Question {i}")
        if i % 2 == 0
        else stored_message(i, "assistant", ANSWER)
        for i in range(8)
    ]
    shown.set_messages(history)
    settle_layouts()
    return shown
