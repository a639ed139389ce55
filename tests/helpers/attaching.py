"""Attaching files in the real window: dropping them on the chat, reading the chips, sending
with them, and a fake engine that keeps the requests it gets."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.chats.models import Message
from app.engine.types import ChatRequest, Request
from app.engine.worker import Job, Sink
from app.ui.main_window import MainWindow
from tests.helpers.fake_app import WAIT_MS, FakeEngine
from tests.helpers.parallel_fake import ParallelFakeWorker


def chip_texts(window: MainWindow) -> dict[str, str]:
    bar = window.chat.composer.attachments_bar
    return {c.name_label.text(): c.detail_label.text() for c in bar.chips.values()}


def drop_files(target: object, paths: list[Path]) -> QDropEvent:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    actions = Qt.DropAction.CopyAction
    buttons, modifiers = Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier
    enter = QDragEnterEvent(QPoint(50, 50), actions, mime, buttons, modifiers)
    QApplication.sendEvent(target, enter)  # type: ignore[arg-type]
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(50, 50), actions, mime, buttons, modifiers)
    QApplication.sendEvent(target, drop)  # type: ignore[arg-type]
    return drop


ATTACH_CTX = 4096  # a 40-page PDF does not fit: its passages are retrieved


class RecordingWorker(ParallelFakeWorker):
    """Keeps every chat request it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[ChatRequest] = []

    def submit(self, request: Request, sink: Sink | None = None) -> Job:
        if isinstance(request, ChatRequest):
            self.requests.append(request)
        return super().submit(request, sink)


def attach(qtbot: QtBot, window: MainWindow, *paths: Path) -> None:
    window.chat.composer.attach_files(list(paths))
    qtbot.waitUntil(lambda: not window.controller.attachments.reading, timeout=WAIT_MS)


def send_and_finish(qtbot: QtBot, window: MainWindow, text: str) -> Message:
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS) as blocker:
        window.chat.composer.set_text(text)
        window.chat.composer.send_button.click()
    answer = blocker.args[0]
    assert isinstance(answer, Message) and answer.status == "complete", answer
    return answer


def user_content(request: ChatRequest) -> str:
    return str(request.messages[-1].get("content"))


# The fake engine and window of the tests of sending files (tests/ui/conftest.py's fake_window).
RECORDING = FakeEngine(worker=RecordingWorker, n_ctx=ATTACH_CTX)
