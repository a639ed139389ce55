"""One message in the chat: a user bubble or an assistant answer with its stats and actions.

While its chat writes an answer (``set_answering``), a message offers only what works then:
copy. Editing, regenerating, deleting and switching versions would only be refused ("busy"),
so those buttons are hidden (the sibling arrows disabled) until the answer ends; an answer
with tools has finished messages (the call, its results) long before it ends.

Signals: ``action_requested(str action, str message_id)`` with action one of copy, edit,
regenerate, delete, previous, next; ``edit_submitted(str message_id, str text)``.
"""

from __future__ import annotations

import itertools

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QEnterEvent, QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chats.models import Message
from app.engine.provider_ids import parse_remote_id
from app.ui import icons, theme
from app.ui.chat.edit_box import EditBox
from app.ui.chat.height_cache import HeightCache
from app.ui.chat.markdown import MarkdownRenderer, turn_share
from app.ui.chat.message_attachments import (
    AttachmentChips,
    SourcesLine,
    attached_files,
    sources_of,
)
from app.ui.chat.message_words import dropped_text, stats_text
from app.ui.chat.thought_block import AnswerBody
from app.ui.chat.tool_message import ToolMessageView
from app.ui.chat.waiting_label import WaitingLabel

ACTIONS = ("copy", "edit", "regenerate", "delete", "previous", "next")
_ACTIONS = {  # action: icon, tooltip, object name
    "copy": ("copy", "Copy message", "CopyMessage"),
    "edit": ("edit", "Edit and resend", "EditMessage"),
    "regenerate": ("regenerate", "Regenerate", "Regenerate"),
    "delete": ("trash", "Delete message", "DeleteMessage"),
    "previous": ("chevron-left", "Previous version", "PrevSibling"),
    "next": ("chevron-right", "Next version", "NextSibling"),
}
STREAM_SLICE = 600  # characters of a streamed burst rendered per event-loop turn, at most
MIN_HINT_WIDTH = 60  # narrower: not laid out yet (see sizeHint)


class _ToolButton(QToolButton):
    def __init__(self, icon: str, tip: str, name: str, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName(name)
        self.setToolTip(tip)
        self.setAccessibleName(tip)
        self.setAutoRaise(True)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setProperty("flat", True)
        icons.set_icon(self, icon, size=16)


class MessageWidget(QFrame):
    """A message on screen (see the module docstring for its signals)."""

    action_requested = Signal(str, str)
    edit_submitted = Signal(str, str)

    def __init__(
        self,
        message: Message,
        renderer: MarkdownRenderer,
        *,
        streaming: bool = False,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.message = message
        self.is_user = message.role == "user"
        self.streaming = streaming
        self._always_show_actions = False
        self._hovered = False
        self._answering = False  # its chat is writing an answer (see the module docstring)
        self._edit_box: EditBox | None = None
        self._heights = HeightCache(self)
        self._backlog = ""
        self._finished_message: Message | None = None
        self._drain_timer = QTimer(self)
        self._drain_timer.setSingleShot(True)
        self._drain_timer.setInterval(0)
        self._drain_timer.timeout.connect(self._drain_backlog)
        self.setObjectName("UserMessage" if self.is_user else "AssistantMessage")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 6, 0, 6)
        self._layout.setSpacing(6)
        self.body: AnswerBody | None = None
        self.text_label: QLabel | None = None
        self.attachment_chips: AttachmentChips | None = None  # a question's files
        self.sources_line: SourcesLine | None = None  # an answer's sources
        if self.is_user:
            self._build_user()
        else:
            self._build_assistant(renderer)
        self._build_footer()
        self.set_message(message, streaming=streaming)

    # -- construction ---------------------------------------------------------------------

    def _build_user(self) -> None:
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addStretch(1)
        self.bubble = QFrame(self)
        self.bubble.setObjectName("UserBubble")
        self.bubble.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.text_label = QLabel(self.bubble)
        self.text_label.setObjectName("UserText")
        self.text_label.setTextFormat(Qt.TextFormat.PlainText)
        self.text_label.setWordWrap(True)
        self.text_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text_label.setCursor(Qt.CursorShape.IBeamCursor)
        bubble_layout = QVBoxLayout(self.bubble)
        bubble_layout.setContentsMargins(16, 10, 16, 10)
        bubble_layout.addWidget(self.text_label)
        row.addWidget(self.bubble)
        self._content_row = row
        self._layout.addLayout(row)

    def _build_assistant(self, renderer: MarkdownRenderer) -> None:
        header = QHBoxLayout()
        header.setSpacing(10)
        self.avatar = QLabel(self)
        self.avatar.setObjectName("Avatar")
        self.avatar.setFixedSize(28, 28)
        self.avatar.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.name_label = QLabel(self)
        self.name_label.setObjectName("AuthorName")
        header.addWidget(self.avatar)
        header.addWidget(self.name_label)
        header.addStretch(1)
        self._layout.addLayout(header)
        self.notice = QLabel(self)
        self.notice.setObjectName("ContextNotice")
        self.notice.setWordWrap(True)
        self.notice.hide()
        self.thinking = WaitingLabel(self)  # while a streaming answer has no text yet
        self.body = AnswerBody(renderer, self)
        self.status_label = QLabel(self)
        self.status_label.setObjectName("StatusChip")
        self.status_label.setWordWrap(True)
        self.status_label.hide()
        column = self._column = QVBoxLayout()
        column.setContentsMargins(38, 0, 0, 0)
        column.setSpacing(8)
        column.addWidget(self.notice)
        column.addWidget(self.thinking)
        column.addWidget(self.body)
        self.tool_view = ToolMessageView(self)  # a tool call or result (hidden otherwise)
        self.tool_view.resized.connect(self.invalidate_height)
        column.addWidget(self.tool_view)
        column.addWidget(self.status_label)
        self._layout.addLayout(column)
        self._refresh_avatar()

    def _build_footer(self) -> None:
        # Built when first needed: the sibling arrows (most messages have none), a question's
        # stats and regenerate button and an answer's edit button (never shown). Each widget
        # costs its construction and a stylesheet pass, times every message opened, and a
        # question and its answer are built as the question is sent.
        footer = self._footer = QHBoxLayout()
        footer.setContentsMargins(0 if self.is_user else 38, 0, 0, 0)
        footer.setSpacing(2)
        self._buttons: dict[str, _ToolButton] = {}
        self._siblings: tuple[_ToolButton, QLabel, _ToolButton] | None = None
        self._stats_label: QLabel | None = None
        if self.is_user:
            footer.addStretch(1)
        else:  # the stats under the answer's text, level with it; the buttons after them
            footer.addWidget(self.stats_label, 1)
            footer.addSpacing(8)
        middle = "edit" if self.is_user else "regenerate"
        self._action_buttons = [self._action_button(a) for a in ("copy", middle, "delete")]
        self.copy_button, _, self.delete_button = self._action_buttons
        for button in self._action_buttons:
            policy = button.sizePolicy()
            policy.setRetainSizeWhenHidden(True)  # showing them on hover moves nothing
            button.setSizePolicy(policy)
            footer.addWidget(button)
        self._layout.addLayout(footer)

    def _action_button(self, action: str) -> _ToolButton:
        button = self._buttons[action] = _ToolButton(*_ACTIONS[action], self)
        button.setProperty("action", action)
        button.clicked.connect(self._on_action_clicked)
        return button

    def _spare_button(self, action: str) -> _ToolButton:
        """A question's regenerate or an answer's edit button: never shown."""
        if action not in self._buttons:
            self._action_button(action).hide()
        return self._buttons[action]

    def _sibling_widgets(self) -> tuple[_ToolButton, QLabel, _ToolButton]:
        if self._siblings is None:
            label = QLabel(self)
            label.setObjectName("SiblingLabel")
            shown = self._siblings = (
                self._action_button("previous"),
                label,
                self._action_button("next"),
            )
            at = 1 if self.is_user else 0  # before the actions (a question's: after its stretch)
            for offset, widget in enumerate(shown):
                widget.hide()  # _refresh_siblings shows them
                self._footer.insertWidget(at + offset, widget)
            chain = [shown[0], shown[2], *self._action_buttons]
            for first, then in itertools.pairwise(chain):
                QWidget.setTabOrder(first, then)
        return self._siblings

    @property
    def previous_button(self) -> _ToolButton:
        return self._sibling_widgets()[0]

    @property
    def sibling_label(self) -> QLabel:
        return self._sibling_widgets()[1]

    @property
    def next_button(self) -> _ToolButton:
        return self._sibling_widgets()[2]

    @property
    def edit_button(self) -> _ToolButton:
        return self._spare_button("edit")

    @property
    def regenerate_button(self) -> _ToolButton:
        return self._spare_button("regenerate")

    @property
    def stats_label(self) -> QLabel:
        if self._stats_label is None:
            self._stats_label = QLabel(self)
            self._stats_label.setObjectName("Stats")
            self._stats_label.setWordWrap(True)  # a narrow chat shows it on two lines, whole
        return self._stats_label

    # -- state ----------------------------------------------------------------------------

    def set_message(self, message: Message, streaming: bool | None = None) -> None:
        self.message = message
        if streaming is not None:
            self.streaming = streaming
        if self.is_user and self.text_label is not None:
            self.text_label.setText(message.content)
            self._fit_bubble()
        elif self.body is not None:
            if self.streaming:
                if not self.body.text and message.content:
                    self.body.append(message.content)
            else:  # a tool result is shown folded by tool_view, not as the answer's text
                self.body.set_markdown("" if message.role == "tool" else message.content)
            self.tool_view.set_message(message)
            self._refresh_assistant_state()
        self._refresh_attachments()
        self._refresh_siblings()
        self._refresh_actions()
        self.invalidate_height()

    def append_stream(self, text: str) -> None:
        """Show more streamed text, from the next event-loop turn on: a burst is rendered in
        slices of at most STREAM_SLICE characters and one new block (markdown.turn_share), one
        per turn, so no single update can stall the window (rendered at once, new text arriving
        in the turn a slice was rendered in made that turn render two)."""
        if self.body is None:
            return
        self._backlog += text
        if not self._drain_timer.isActive():
            self._drain_timer.start()

    @Slot()
    def _drain_backlog(self) -> None:
        if self.body is None:
            return
        end = turn_share(self.body.open_tail, self._backlog, STREAM_SLICE)
        chunk, self._backlog = self._backlog[:end], self._backlog[end:]
        if chunk:
            self.body.append(chunk)
            self._refresh_thinking()
        if self._backlog:
            self._drain_timer.start()
        elif self._finished_message is not None:
            message, self._finished_message = self._finished_message, None
            self.finish_stream(message)

    def finish_stream(self, message: Message) -> None:
        if self._backlog:  # finish once the streamed text is all on screen
            self._finished_message = message
            return
        self.streaming = False
        self.message = message
        if self.body is not None:
            if self.body.text != message.content:
                self.body.set_markdown(message.content)
            else:
                self.body.finish_stream()
            self.tool_view.set_message(message)  # an answer that ended in tool calls
        self._refresh_assistant_state()
        self._refresh_attachments()
        self._refresh_siblings()
        self._refresh_actions()
        self.invalidate_height()

    def set_context_notice(self, dropped: int, n_ctx: int | None) -> None:
        if not self.is_user:
            self.notice.setText(dropped_text(dropped, n_ctx))
            self.notice.setVisible(dropped > 0)
            self.invalidate_height()

    def set_always_show_actions(self, value: bool) -> None:
        self._always_show_actions = value
        self._refresh_actions()

    def set_answering(self, answering: bool) -> None:
        """Whether its chat is writing an answer: then only copy is offered."""
        if answering != self._answering:
            self._answering = answering
            self._refresh_siblings()
            self._refresh_actions()

    def set_renderer(self, renderer: MarkdownRenderer) -> None:
        if self.body is not None:
            self.body.set_renderer(renderer)
            self._refresh_avatar()
        self.invalidate_height()

    @property
    def plain_text(self) -> str:
        return self.message.content if self.body is None else self.body.text + self._backlog

    def _refresh_assistant_state(self) -> None:
        meta = self.message.metadata
        model = str(meta.get("model") or ("Tool" if self.message.role == "tool" else "Assistant"))
        remote = parse_remote_id(model)  # provider::model reads better the other way round
        self.name_label.setText(f"{remote.model} · {remote.provider}" if remote else model)
        self.name_label.setToolTip(model if remote else "")
        dropped = meta.get("dropped_turns")
        n_ctx = meta.get("n_ctx")
        self.set_context_notice(
            dropped if isinstance(dropped, int) else 0, n_ctx if isinstance(n_ctx, int) else None
        )
        status = self.message.status
        if self.streaming:
            self.status_label.hide()
        elif status == "stopped":
            why = "interrupted" if meta.get("interrupted") else "stopped"
            self.status_label.setText(f"Answer {why} before the end")
            self.status_label.setProperty("kind", "stopped")
            self.status_label.show()
        elif status == "error":
            error = str(meta.get("error") or "The answer failed.")
            self.status_label.setText(error)
            self.status_label.setProperty("kind", "error")
            self.status_label.show()
        else:
            self.status_label.hide()
        self.status_label.style().unpolish(self.status_label)
        self.status_label.style().polish(self.status_label)
        self.stats_label.setText("" if self.streaming else stats_text(meta))
        self.body.set_thought_seconds(meta.get("thought_seconds"))  # type: ignore[union-attr]
        self._refresh_thinking()

    def _refresh_attachments(self) -> None:
        """Built when a message has some (most have none)."""
        meta = self.message.metadata
        if self.is_user:
            files = attached_files(meta)
            if files and self.attachment_chips is None:
                self.attachment_chips = AttachmentChips(self)
                self._layout.insertWidget(1, self.attachment_chips)
            if self.attachment_chips is not None:
                self.attachment_chips.set_files(files)
            return
        sources = [] if self.streaming else sources_of(meta)
        left_out = meta.get("attachments_left_out")
        left = [str(s) for s in left_out] if isinstance(left_out, list) else []
        if (sources or left) and self.sources_line is None:
            self.sources_line = SourcesLine(self)
            self._column.insertWidget(self._column.indexOf(self.status_label), self.sources_line)
        if self.sources_line is not None:
            self.sources_line.set_sources(sources, left)

    def set_waiting(self, text: str) -> None:
        """What the answer waits for until its text comes (waiting_label.py)."""
        if not self.is_user:
            self.thinking.set_what(text)
            self._refresh_thinking()

    def _refresh_thinking(self) -> None:
        if self.body is None:
            return
        self.thinking.run(self.streaming and not self.body.text)
        show_body = bool(self.body.text) or not self.streaming
        if show_body and self.body.isHidden() and self.width() >= MIN_HINT_WIDTH:
            # Shown at the width it will have: shown in its default size, its first text
            # would be laid out at that width first, then at its own.
            margins = self._layout.contentsMargins() + self._column.contentsMargins()
            self.body.resize(self.width() - margins.left() - margins.right(), 0)
        self.body.setVisible(show_body)

    def _refresh_siblings(self) -> None:
        count = self.message.sibling_count
        show = count > 1
        if not show and self._siblings is None:
            return
        for widget in self._sibling_widgets():
            widget.setVisible(show)
        if show:
            index = self.message.sibling_index
            self.sibling_label.setText(f"{index + 1}/{count}")
            free = not self.streaming and not self._answering  # arrows only when they work
            self.previous_button.setVisible(free)
            self.next_button.setVisible(free)
            self.previous_button.setEnabled(index > 0)
            self.next_button.setEnabled(index < count - 1)

    def _refresh_actions(self) -> None:
        visible = (self._hovered or self._always_show_actions) and not self.streaming
        visible = visible and self._edit_box is None
        copy, *changes = self._action_buttons
        copy.setVisible(visible)
        for button in changes:  # edit or regenerate, and delete: refused while answering
            button.setVisible(visible and not self._answering)

    def _refresh_avatar(self) -> None:
        if not self.is_user:
            icon = "tool" if self.message.role == "tool" else "flame"  # a result is not Ember's
            ratio = self.devicePixelRatioF()
            self.avatar.setPixmap(icons.pixmap(icon, theme.current().accent, 18, ratio))

    # -- editing --------------------------------------------------------------------------

    def begin_edit(self) -> None:
        if not self.is_user or self._edit_box is not None:
            return
        self._edit_box = EditBox(self.message.content, self)
        self._edit_box.submitted.connect(self._on_edit_submitted)
        self._edit_box.cancelled.connect(self.end_edit)
        self.bubble.hide()
        self._content_row.addWidget(self._edit_box, 4)
        self._edit_box.editor.setFocus()
        self._refresh_actions()
        self.invalidate_height()

    @Slot()
    def end_edit(self) -> None:
        if self._edit_box is not None:
            self._edit_box.hide()
            self._edit_box.deleteLater()
            self._edit_box = None
            self.bubble.show()
            self._refresh_actions()
            self.invalidate_height()

    @property
    def edit_box(self) -> EditBox | None:
        return self._edit_box

    @Slot(str)
    def _on_edit_submitted(self, text: str) -> None:
        message_id = self.message.id
        self.end_edit()
        self.edit_submitted.emit(message_id, text)

    # -- size ------------------------------------------------------------------------------

    @property
    def live(self) -> bool:
        """Sizes computed by the layout as usual: streaming, being edited, or a user bubble
        (cheap plain text, sized by _fit_bubble)."""
        return self.streaming or self._edit_box is not None or self.is_user

    # No hasHeightForWidth override: Qt asks it of every message in the column, uncached, several
    # times per layout pass (each streamed update); answered in Python that was ~10 calls per
    # message per update, all 500 of a long chat once scrolled through. Qt's own answer (the
    # layout's) is as good: a finished message without height-for-width text is measured by
    # sizeHint below, at its width, from the same cache.
    def heightForWidth(self, width: int) -> int:  # noqa: N802 (Qt override)
        if self.live:
            layout = self.layout()
            if layout is None:
                return 0
            if layout.hasHeightForWidth():
                return layout.totalHeightForWidth(width)
            return layout.totalSizeHint().height()
        return self._heights.height_for(width)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        if self.live:
            return super().sizeHint()
        # Qt asks a height-for-width widget for its height at its hint's width: a hint as
        # wide as the widget is answered from the cache (another width would lay out every
        # paragraph of the answer again, ~1 ms each, when an answer finishes).
        width = self.width()
        if width >= MIN_HINT_WIDTH:
            return QSize(width, self._heights.height_for(width))
        return self._heights.size_hint()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return super().minimumSizeHint() if self.live else QSize(0, 0)

    def invalidate_height(self) -> None:
        """The content changed size: measure again (see height_cache)."""
        self._heights.invalidate()
        self.updateGeometry()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self.invalidate_height()  # sizes asked before it was shown (and styled) are stale

    # -- events ---------------------------------------------------------------------------

    @Slot()
    def _on_action_clicked(self) -> None:
        action = str(self.sender().property("action"))
        if action == "edit":
            self.begin_edit()
            return
        self.action_requested.emit(action, self.message.id)

    def enterEvent(self, event: QEnterEvent) -> None:  # noqa: N802 (Qt override)
        self._hovered = True
        self._refresh_actions()
        super().enterEvent(event)

    def leaveEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        self._hovered = False
        self._refresh_actions()
        super().leaveEvent(event)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        if self.is_user:
            self._fit_bubble()

    def _fit_bubble(self) -> None:
        """Size the bubble to its text: as wide as the longest line, at most 78% of the row
        (a word-wrapped QLabel alone would wrap far too early)."""
        if self.text_label is None:
            return
        limit = max(240, int(self.width() * 0.78))
        bubble_layout = self.bubble.layout()
        assert bubble_layout is not None
        margins = bubble_layout.contentsMargins()
        padding = margins.left() + margins.right()
        metrics = self.text_label.fontMetrics()
        lines = self.message.content.split("\n")[:200]
        natural = max((metrics.horizontalAdvance(line) for line in lines), default=0) + 4
        minimum = min(natural, limit - padding)
        if self.text_label.minimumWidth() != minimum:
            self.text_label.setMinimumWidth(minimum)
        if self.bubble.maximumWidth() != limit:
            self.bubble.setMaximumWidth(limit)
