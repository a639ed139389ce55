"""The scrolling list of messages, rendered lazily from the newest upwards.

Opening a conversation renders only its last ``INITIAL`` messages; older ones are rendered as
the reader scrolls towards the top, a few per event-loop turn (keeping what is on screen
still), so an answer streaming meanwhile never waits for a batch of them. So a
500-message conversation opens as fast as a short one. When the branch changes (a sibling
switch, a regenerate), widgets of the unchanged beginning are kept. A new answer's (empty)
message is built in the event-loop turn after the question's, or as soon as something needs it.
While the chat writes an answer (``set_answering``), its messages offer only copy (see
message_widget.py), also those built meanwhile: an answer's tool call and results.

Signals: ``action_requested(str action, str message_id)``, ``edit_submitted(str message_id,
str text)`` (forwarded from the message widgets).
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QScrollArea, QWidget

from app.chats.models import Message
from app.ui.chat.height_cache import ColumnLayout
from app.ui.chat.markdown import MarkdownRenderer
from app.ui.chat.message_widget import MessageWidget

INITIAL = 8  # a window of them; more in turns to fill it (24 at once held a switch ~250 ms)
BATCH = 16
LOAD_MARGIN = 400  # px from the top at which older messages are rendered
STICK_MARGIN = 48  # px from the bottom within which the view follows new text
COLUMN_WIDTH = 820
TURN_BUDGET = 0.008  # s of rendering older messages per event-loop turn (then the next turn)


class ChatView(QScrollArea):
    """See the module docstring."""

    action_requested = Signal(str, str)
    edit_submitted = Signal(str, str)

    def __init__(self, renderer: MarkdownRenderer, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ChatView")
        self.setAccessibleName("Messages")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._renderer = renderer
        self._messages: list[Message] = []
        self._widgets: list[MessageWidget] = []  # for _messages[_first:]
        self._first = 0
        self._streaming_id: str | None = None
        self._stick = True
        self._anchor_from_bottom: int | None = None
        self._older_scheduled = False
        self._last_answer: MessageWidget | None = None
        self._pending: Message | None = None  # an answer whose widget is built next turn
        self._waiting: tuple[str, str] | None = None  # (message id, what its answer waits for)
        self._answering = False  # the chat is writing an answer: only copy is offered
        # A timer, not QTimer.singleShot(0, ...): that posts an event, handled before any
        # timer or paint is due, so it ran in the same stretch as the send.
        self._pending_timer = QTimer(self)
        self._pending_timer.setSingleShot(True)
        self._pending_timer.setInterval(0)
        self._pending_timer.timeout.connect(self._build_pending)

        canvas = self.canvas = QWidget()
        canvas.setObjectName("ChatCanvas")
        outer = QHBoxLayout(canvas)
        outer.setContentsMargins(24, 0, 24, 0)
        self.column = QWidget(canvas)
        self.column.setObjectName("ChatColumn")
        self.column.setMaximumWidth(COLUMN_WIDTH)
        # They grow at the bottom as an answer streams: without static contents Qt repainted
        # them whole each time, every message on screen with them, also when the reader had
        # scrolled up to earlier ones (bench/gui_repaint.py). Children that move repaint.
        for grows in (canvas, self.column):
            grows.setAttribute(Qt.WidgetAttribute.WA_StaticContents, True)
        outer.addWidget(self.column)
        self._layout = ColumnLayout(self.column)
        self._layout.setContentsMargins(0, 24, 0, 24)
        self._layout.setSpacing(14)
        self.older_label = QLabel("Scroll up for earlier messages", self.column)
        self.older_label.setObjectName("OlderLabel")
        self.older_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.older_label.hide()
        self._layout.addWidget(self.older_label)
        self._layout.addStretch(1)
        self.setWidget(canvas)

        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range_changed)

    # -- queries --------------------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        return list(self._messages)

    @property
    def rendered_count(self) -> int:
        return len(self._widgets)

    def widgets(self) -> list[MessageWidget]:
        self._build_pending()
        return list(self._widgets)

    def widget_for(self, message_id: str) -> MessageWidget | None:
        if self._pending is not None and self._pending.id == message_id:
            self._build_pending()
        for widget in self._widgets:
            if widget.message.id == message_id:
                return widget
        return None

    def last_assistant_widget(self) -> MessageWidget | None:
        for widget in reversed(self._widgets):
            if not widget.is_user:
                return widget
        return None

    # -- changes --------------------------------------------------------------------------

    def set_messages(self, messages: list[Message], streaming_id: str | None = None) -> None:
        """Show a branch; keeps the widgets of the beginning it shares with the one on screen."""
        self._build_pending()  # _widgets in step with _messages again
        self._streaming_id = streaming_id
        self._waiting = None
        keep = 0
        limit = min(len(self._messages), len(messages))
        while keep < limit and self._messages[keep].id == messages[keep].id:
            keep += 1
        if keep <= self._first or not self._widgets:
            self._clear()
            self._messages = list(messages)
            self._first = max(0, len(messages) - INITIAL)
            for message in messages[self._first :]:
                self._add_widget(message)
            self._stick = True
            self.scroll_to_bottom()
            QTimer.singleShot(0, self, self._fill_viewport)
        else:
            for widget in self._widgets[keep - self._first :]:
                self._remove_widget(widget)
            del self._widgets[keep - self._first :]
            for index, widget in enumerate(self._widgets):
                new = messages[self._first + index]
                if new != widget.message:
                    widget.set_message(new, streaming=new.id == streaming_id)
            self._messages = list(messages)
            for message in messages[keep:]:
                self._add_widget(message)
        self._refresh_last()
        self.older_label.setVisible(self._first > 0)

    def append_message(self, message: Message, streaming: bool = False) -> None:
        self._build_pending()  # in order
        if streaming:
            self._streaming_id = message.id
        self._messages.append(message)
        self._stick = True
        if streaming and not message.content:
            # Sending built the question's widget and this one in one turn (~25 ms): this one
            # waits for the next turn, unless its text (or anything else) needs it first.
            self._pending = message
            self._pending_timer.start()
            return
        self._add_widget(message)
        self._refresh_last()
        self.scroll_to_bottom()

    @Slot()
    def _build_pending(self) -> None:
        message, self._pending = self._pending, None
        if message is None:
            return
        self._add_widget(message)
        self._refresh_last()
        if self._stick:
            self.scroll_to_bottom()

    def update_message(self, message: Message) -> None:
        for index, old in enumerate(self._messages):
            if old.id == message.id:
                self._messages[index] = message
        widget = self.widget_for(message.id)
        if widget is not None:
            if widget.streaming and message.status != "streaming":
                widget.finish_stream(message)
            else:
                widget.set_message(message)
        if message.id == self._streaming_id and message.status != "streaming":
            self._streaming_id = None
        self._refresh_last()

    def append_stream(self, message_id: str, text: str) -> None:
        widget = self.widget_for(message_id)
        if widget is not None:
            widget.append_stream(text)

    def set_waiting(self, message_id: str, text: str) -> None:
        """What the answer ``message_id`` waits for until its text comes (waiting_label.py);
        kept for its widget when that is built later."""
        self._waiting = (message_id, text)
        for widget in self._widgets:
            if widget.message.id == message_id:
                widget.set_waiting(text)

    def set_answering(self, answering: bool) -> None:
        """Whether the chat on screen is writing an answer (its messages offer only copy)."""
        self._answering = answering
        for widget in self._widgets:
            widget.set_answering(answering)

    def set_renderer(self, renderer: MarkdownRenderer) -> None:
        self._renderer = renderer
        for widget in self._widgets:
            widget.set_renderer(renderer)

    def scroll_to_bottom(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    # -- lazy rendering -------------------------------------------------------------------

    def render_older(self, count: int = BATCH, budget: float | None = None) -> int:
        """Render up to ``count`` older messages above the first one, the nearest first;
        with a ``budget`` (seconds), stop after the one that used it up. Returns how many."""
        self._older_scheduled = False
        if self._first == 0:
            return 0
        deadline = time.perf_counter() + budget if budget is not None else None
        bar = self.verticalScrollBar()
        self._anchor_from_bottom = bar.maximum() - bar.value()
        added = 0
        while self._first > 0 and added < count:
            self._first -= 1
            widget = self._make_widget(self._messages[self._first])
            self._layout.insertWidget(1, widget)
            widget.show()  # see _add_widget
            self._widgets.insert(0, widget)
            added += 1
            if deadline is not None and time.perf_counter() > deadline:
                break
        self.older_label.setVisible(self._first > 0)
        QTimer.singleShot(200, self, self._drop_anchor)
        return added

    @Slot()
    def _drop_anchor(self) -> None:
        self._anchor_from_bottom = None

    @Slot()
    def _fill_viewport(self) -> None:
        if self._first > 0 and self.canvas.sizeHint().height() < self.viewport().height():
            self.render_older(budget=TURN_BUDGET)
            QTimer.singleShot(0, self, self._fill_viewport)

    @Slot()
    def _render_older_in_turns(self) -> None:
        """Older messages while the reader is near the top, a few per event-loop turn: a
        batch at once would hold the window (and an answer streaming into it) for a while."""
        self.render_older(budget=TURN_BUDGET)
        if self._first > 0 and self.verticalScrollBar().value() < LOAD_MARGIN:
            self._older_scheduled = True
            QTimer.singleShot(0, self, self._render_older_in_turns)

    @Slot(int)
    def _on_scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        if self._anchor_from_bottom is None:
            self._stick = bar.maximum() - value <= STICK_MARGIN
        if value < LOAD_MARGIN and self._first > 0 and not self._older_scheduled:
            self._older_scheduled = True
            QTimer.singleShot(0, self, self._render_older_in_turns)

    @Slot(int, int)
    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        bar = self.verticalScrollBar()
        if self._anchor_from_bottom is not None:
            bar.setValue(maximum - self._anchor_from_bottom)
            self._anchor_from_bottom = None
        elif self._stick:
            bar.setValue(maximum)

    # -- widgets --------------------------------------------------------------------------

    def _make_widget(self, message: Message) -> MessageWidget:
        widget = MessageWidget(
            message,
            self._renderer,
            streaming=message.id == self._streaming_id,
            parent=self.column,
        )
        widget.action_requested.connect(self.action_requested)
        widget.edit_submitted.connect(self.edit_submitted)
        widget.set_answering(self._answering)
        if self._waiting is not None and self._waiting[0] == message.id:
            widget.set_waiting(self._waiting[1])
        return widget

    def _add_widget(self, message: Message) -> MessageWidget:
        widget = self._make_widget(message)
        self._layout.insertWidget(self._layout.count() - 1, widget)
        # Shown now, in place. Left to Qt, a widget added to a shown column is shown in a later
        # event-loop turn, after a layout pass without it: a chat opened over a taller one was
        # laid out empty first (scroll range 0), which looked like being scrolled to the top
        # and rendered older messages nobody asked for.
        widget.show()
        self._widgets.append(widget)
        return widget

    def _remove_widget(self, widget: MessageWidget) -> None:
        self._layout.removeWidget(widget)
        widget.hide()
        widget.deleteLater()

    def _clear(self) -> None:
        for widget in self._widgets:
            self._remove_widget(widget)
        self._widgets.clear()
        self._messages.clear()
        self._first = 0
        self._last_answer = None
        self._pending = None

    def _refresh_last(self) -> None:
        """The newest answer always shows its actions; the others on hover."""
        last = self.last_assistant_widget()
        if last is self._last_answer:
            return
        if self._last_answer is not None and self._last_answer in self._widgets:
            self._last_answer.set_always_show_actions(False)
        if last is not None:
            last.set_always_show_actions(True)
        self._last_answer = last
