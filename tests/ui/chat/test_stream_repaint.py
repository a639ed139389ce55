"""What a streamed update repaints while the reader is scrolled up to earlier messages: not
the messages being read (counted paint events; bench/gui_repaint.py measures the whole window).

Each update grows the answer below, so the chat's canvas and column grow at the bottom; Qt
repaints a widget that grows wholly unless its contents are static (``WA_StaticContents``),
and with them every message on screen: about 13 paint events per update, the viewport
repainted whole, for messages that did not change."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication, QWidget

from app.ui.chat.chat_view import ChatView
from app.ui.chat.message_widget import MessageWidget
from tests.helpers.chat_view import (
    CHUNK,
    settle_layouts,
    start_answer,
)
from tests.helpers.parallel_fake import ANSWER

TEXT = ANSWER * 3


class Paints(QObject):
    """Paint events received by the widgets inside ``watched`` messages."""

    def __init__(self, watched: list[MessageWidget]) -> None:
        super().__init__()
        self.watched = watched
        self.count = 0

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() != QEvent.Type.Paint or not isinstance(obj, QWidget):
            return False
        if any(w is obj or w.isAncestorOf(obj) for w in self.watched):
            self.count += 1
        return False


def test_the_messages_being_read_are_not_repainted_by_an_answer_growing_below(
    view: ChatView, ember_app: QApplication
) -> None:
    streaming, widget = start_answer(view)
    view.verticalScrollBar().setValue(0)  # the reader goes back to the first messages
    settle_layouts()
    read = [w for w in view.widgets()[:3] if not w.visibleRegion().isEmpty()]
    assert read and not any(w is widget for w in read)
    paints = Paints(read)
    ember_app.installEventFilter(paints)
    grown = 0
    try:
        for start in range(0, len(TEXT), CHUNK):
            before = view.canvas.height()
            view.append_stream(streaming.id, TEXT[start : start + CHUNK])
            settle_layouts()
            grown += view.canvas.height() > before
    finally:
        ember_app.removeEventFilter(paints)
    assert view.verticalScrollBar().value() == 0  # still reading there
    assert grown > 20  # the answer grew below, the canvas with it, update after update
    assert paints.count <= grown // 10, f"{paints.count} paints of {len(read)} messages"
