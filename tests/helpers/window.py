"""Helpers for driving the window in tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.chats.models import Message
from app.engine.providers import make_provider
from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.ui.chat.message_widget import MessageWidget
from app.ui.main_window import MainWindow
from app.ui.settings.settings_dialog import SettingsDialog
from tests.helpers.http_stub import Stub, sse_answer

ANSWER_TIMEOUT = 90_000
LONG_PROMPT = "Count from 1 to 300, separated by commas: 1, 2, 3,"


def type_and_send(window: MainWindow, text: str) -> None:
    window.chat.composer.set_text(text)
    window.chat.composer.send_button.click()


def send(qtbot: QtBot, window: MainWindow, text: str) -> Message:
    """Send a message and wait until its answer is finished and saved."""
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT) as blocker:
        type_and_send(window, text)
    message = blocker.args[0]
    assert isinstance(message, Message)
    return message


def set_max_tokens(window: MainWindow, max_tokens: int) -> None:
    """Change the open (or draft) chat's answer length through its settings panel."""
    form = window.panel.form
    values = form.values()
    values["max_tokens"] = max_tokens
    form.set_values(values)
    window.panel.save()


def settings_by_shortcut(qtbot: QtBot, window: MainWindow) -> SettingsDialog:
    """Ctrl+, pressed on the window, as a user opens Settings; the dialog, shown."""
    qtbot.keyClick(window, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
    dialog = window.settings_dialog
    assert dialog is not None and dialog.isVisible()
    return dialog


@contextmanager
def on_remote_stub(window: MainWindow) -> Iterator[Stub]:
    """The window's chat on model ``stub::alpha`` of an OpenAI-compatible server on 127.0.0.1
    that answers every chat with a short stream and keeps what it was sent (``Stub.hits``)."""
    stub = Stub()
    stub.routes[("POST", "/v1/chat/completions")] = sse_answer
    try:
        window.services.providers.add(make_provider("stub", f"{stub.url}/v1", "llama-server"))
        window.services.engine.select_remote("stub::alpha")
        window.controller.set_model("stub::alpha")
        yield stub
    finally:
        stub.close()


def widget(window: MainWindow, message_id: str) -> MessageWidget:
    found = window.chat.view.widget_for(message_id)
    assert found is not None, f"no widget for {message_id}"
    return found


TEST_CTX = 2048


SMALL_CTX = 512


def loaded_worker(gemma_path: Path, params: LoadParams) -> Iterator[EngineWorker]:
    """An engine worker with the real test model loaded with ``params``, shut down when the
    generator ends (a fixture's ``yield from``)."""
    worker = EngineWorker()
    worker.load(str(gemma_path), params).result(180)
    yield worker
    worker.shutdown()
