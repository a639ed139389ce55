"""The message box: Enter sends, Shift+Enter is a new line, Esc stops; a context meter;
attached files (the paperclip, files dropped on the chat or pasted) as chips above the text.

Signals: ``send_requested(str text)``, ``stop_requested()``, ``draft_changed(str text)``.
The attached files live in an ``AttachmentTray`` (the chat controller's, which takes them
when the message is sent); sending waits until every file is read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import (
    QBuffer,
    QByteArray,
    QEvent,
    QIODevice,
    QMimeData,
    QObject,
    QRectF,
    QSize,
    Qt,
    Signal,
    Slot,
)
from PySide6.QtGui import QColor, QDropEvent, QImage, QKeyEvent, QPainter, QPaintEvent, QResizeEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.attachments.chunks import CHUNK_CHARS
from app.attachments.context import (
    INTRO,
    MAX_CHARS_PER_TOKEN,
    SEPARATOR_TOKENS,
    TOP_K,
    WHOLE_SHARE,
    Source,
    excerpt_text,
    whole_text,
)
from app.attachments.document import Document
from app.engine.fitting import answer_room, estimate_tokens
from app.ui import icons, theme
from app.ui.chat.answers import REMOTE_ATTACHED_BUDGET
from app.ui.chat.attached_prompt import IMAGE_TOKENS
from app.ui.chat.attaching import AttachmentTray
from app.ui.chat.attachments_bar import AttachmentsBar

WARN_AT = 0.8
FULL_AT = 0.95
MAX_LINES = 9
PLACEHOLDER = "Message the model…  (Enter to send, Shift+Enter for a new line)"
SHORT_PLACEHOLDER = "Message the model…"


@dataclass(frozen=True, slots=True)
class AttachedCost:
    """What the files waiting in the composer will take of the context (an estimate)."""

    tokens: int = 0
    whole: tuple[str, ...] = ()  # names of the files that go in whole
    retrieved: tuple[str, ...] = ()  # too long: their most relevant passages go in
    reading: tuple[str, ...] = ()  # not read yet, not counted
    images: tuple[str, ...] = ()  # counted as IMAGE_TOKENS each

    def describe(self) -> str:
        """The tooltip's sentences about the files ('' without files)."""
        parts: list[str] = []
        if self.whole or self.retrieved or self.images:
            parts.append(f"The attached files will take about {self.tokens:,} tokens.")
        if self.whole:
            parts.append(f"{_names(self.whole)} {_verb(self.whole, 'goes', 'go')} in whole.")
        if self.retrieved:
            parts.append(
                f"{_names(self.retrieved)} {_verb(self.retrieved, 'is', 'are')} too long to go "
                f"in whole: only the passages most relevant to your question go in (up to "
                f"{TOP_K}), so the model will not see all of "
                f"{_verb(self.retrieved, 'it', 'them')}."
            )
        if self.images:
            parts.append(
                f"{_names(self.images)} {_verb(self.images, 'is', 'are')} counted as about "
                f"{IMAGE_TOKENS} tokens each (the model's projector decides)."
            )
        if self.reading:
            parts.append(
                f"{_names(self.reading)} {_verb(self.reading, 'is', 'are')} still being read "
                "and not counted yet."
            )
        return " ".join(parts)


def _names(names: tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _verb(names: tuple[str, ...], one: str, many: str) -> str:
    return one if len(names) == 1 else many


def attached_cost(
    documents: Sequence[Document], room: int, whole_tokens: Callable[[Document], int]
) -> AttachedCost:
    """The tokens ``build_context`` would give these documents in ``room`` (estimated: the
    question is not known yet): whole ones as they are, smallest first within WHOLE_SHARE of
    the room, and for the others about the retrieval budget (TOP_K passages, within the rest
    of the room). ``whole_tokens``: a document's whole text's estimated tokens."""
    documents = list({d.sha256: d for d in documents}.values())
    if not documents:
        return AttachedCost()
    intro = estimate_tokens(INTRO) + SEPARATOR_TOKENS
    budget = room - intro
    share = int(budget * WHOLE_SHARE)
    whole: set[str] = set()
    used = 0
    for doc in sorted(documents, key=lambda d: d.chars):
        if doc.chars > max(share, 0) * MAX_CHARS_PER_TOKEN:
            continue
        cost = whole_tokens(doc) + SEPARATOR_TOKENS
        if used + cost <= share:
            whole.add(doc.sha256)
            used += cost
    rest = [d for d in documents if d.sha256 not in whole]
    retrieved = 0
    if rest:
        passage = estimate_tokens(excerpt_text(Source(rest[0].name, 1, None, "x" * CHUNK_CHARS)))
        retrieved = max(0, min(budget - used, TOP_K * (passage + SEPARATOR_TOKENS)))
    return AttachedCost(
        intro + used + retrieved,
        tuple(d.name for d in documents if d.sha256 in whole),
        tuple(d.name for d in rest),
    )


class ContextMeter(QWidget):
    """A slim bar and "used / total tokens"; turns amber near the limit and red when full."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ContextMeter")
        self.used = 0
        self.total = 0
        self.attached = AttachedCost()
        self.label = QLabel(self)
        self.label.setObjectName("ContextLabel")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        self._bar = _MeterBar(self)
        layout.addWidget(self._bar)
        layout.addWidget(self.label)
        self.set_usage(0, 0)

    @property
    def level(self) -> str:
        if not self.total:
            return "none"
        ratio = self.used / self.total
        return "full" if ratio >= FULL_AT else "warn" if ratio >= WARN_AT else "ok"

    def set_usage(self, used: int, total: int, attached: AttachedCost | None = None) -> None:
        """``total`` 0: no model; negative: a remote model whose context size is unknown
        (the bar hides, the tokens used stay). ``attached``: the files waiting to be sent,
        counted in ``used``; the tooltip says what of them goes in."""
        self.used, self.total = max(0, used), max(0, total)
        self.attached = attached or AttachedCost()
        self._bar.setVisible(total >= 0)
        if total < 0:
            self.label.setText(f"{self.used:,} tokens" if self.used else "")
            self.setToolTip(
                f"This chat uses about {self.used:,} tokens. The provider does not say how "
                "long this model's context is; it answers with an error when the chat outgrows "
                "it."
            )
        elif not total:
            self.label.setText("No model loaded")
            self.setToolTip("Load a model to see how much of its context this chat uses.")
        else:
            pct = min(100, round(100 * self.used / total))
            self.label.setText(f"{self.used:,} / {total:,} tokens")
            tip = (
                f"This chat uses about {self.used:,} of the model's {total:,}-token context "
                f"({pct}%)."
            )
            if self.level != "ok":
                tip += (
                    " When it is full, the oldest messages are left out of what the model "
                    "sees (the system prompt is always kept) and the chat says so."
                )
            self.setToolTip(tip)
        files = self.attached.describe()
        if files and total:
            self.setToolTip(f"{self.toolTip()} {files}")
            if self.attached.tokens:
                self.label.setText(f"{self.label.text()} (files ~{self.attached.tokens:,})")
        theme.set_style_property(self.label, "level", self.level)
        self.label.setToolTip(self.toolTip())  # shown wherever the pointer rests on it
        self._bar.setToolTip(self.toolTip())
        self._bar.update()


class _MeterBar(QWidget):
    def __init__(self, meter: ContextMeter) -> None:
        super().__init__(meter)
        self._meter = meter
        self.setFixedSize(64, 6)

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        p = theme.current()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        rect = QRectF(self.rect())
        painter.setBrush(QColor(p.border))
        painter.drawRoundedRect(rect, 3, 3)
        meter = self._meter
        if meter.total:
            ratio = min(1.0, meter.used / meter.total)
            color = {"full": p.danger, "warn": p.warning}.get(meter.level, p.accent)
            painter.setBrush(QColor(color))
            painter.drawRoundedRect(QRectF(0, 0, max(6.0, rect.width() * ratio), 6), 3, 3)
        painter.end()


FILE_FILTER = (
    "Files Ember reads (*.txt *.md *.pdf *.docx *.html *.htm *.png *.jpg *.jpeg *.py *.json"
    " *.csv);;Images (*.png *.jpg *.jpeg);;Documents (*.txt *.md *.pdf *.docx *.html *.htm)"
    ";;All files (*)"
)


def png_bytes(image: QImage) -> bytes:
    """A pasted picture as PNG, the lossless format the engine takes."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")  # type: ignore[call-overload]  # (the stubs want bytes)
    buffer.close()
    return bytes(data.data())


def local_files(mime: QMimeData | None) -> list[Path]:
    """The local files a drop or a paste carries (file URLs), in order."""
    if mime is None or not mime.hasUrls():
        return []
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()]


class _Input(QPlainTextEdit):
    """Grows with its text up to MAX_LINES. Files pasted or dropped into it are attached
    (``files_given``), not written in as their paths; so is a pasted picture
    (``image_given(bytes)``, as PNG)."""

    files_given = Signal(list)
    image_given = Signal(bytes)

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("ComposerInput")
        self._hints: tuple[str, str] | None = None
        self.setAccessibleName("Message")
        self.setTabChangesFocus(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._fit()

    @Slot()
    def set_hint(self, text: str, short: str) -> None:
        """The placeholder: ``text`` when it fits on the one line shown, else ``short`` (the
        long one wrapped to a second line, cut in half under the first)."""
        self._hints = (text, short)
        self._fit_hint()

    def _fit_hint(self) -> None:
        hints = self._hints
        if hints is None:
            return
        room = self.viewport().width() - 2 * round(self.document().documentMargin())
        fits = self.fontMetrics().horizontalAdvance(hints[0]) <= room
        hint = hints[0] if fits else hints[1]
        if self.placeholderText() != hint:
            self.setPlaceholderText(hint)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._fit_hint()

    def _fit(self) -> None:
        line = self.fontMetrics().lineSpacing()
        wanted = max(1, round(self.document().size().height()))
        lines = min(MAX_LINES, wanted)
        margins = self.contentsMargins()
        padding = round(self.document().documentMargin() * 2) + margins.top() + margins.bottom()
        self.setFixedHeight(lines * line + padding + 2)
        policy = Qt.ScrollBarPolicy
        self.setVerticalScrollBarPolicy(
            policy.ScrollBarAsNeeded if wanted > MAX_LINES else policy.ScrollBarAlwaysOff
        )

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(400, self.height())

    def canInsertFromMimeData(self, source: QMimeData) -> bool:  # noqa: N802 (Qt override)
        return (
            bool(local_files(source)) or source.hasImage() or super().canInsertFromMimeData(source)
        )

    def insertFromMimeData(self, source: QMimeData) -> None:  # noqa: N802 (Qt override)
        files = local_files(source)
        image = source.imageData() if not files and source.hasImage() else None
        if files:
            self.files_given.emit(files)
        elif isinstance(image, QImage) and not image.isNull():
            self.image_given.emit(png_bytes(image))
        else:
            super().insertFromMimeData(source)


class Composer(QFrame):
    """See the module docstring."""

    send_requested = Signal(str)
    stop_requested = Signal()
    draft_changed = Signal(str)

    def __init__(
        self, parent: QWidget | None = None, attachments: AttachmentTray | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("Composer")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self._busy = False
        self.attachments = attachments if attachments is not None else AttachmentTray(self)
        self.attachments_bar = AttachmentsBar(self.attachments, self)
        self.attachments.files_changed.connect(self._refresh_button)
        self.attachments.file_updated.connect(self._refresh_button)
        self.attachments.files_changed.connect(self._refresh_meter)
        self.attachments.file_updated.connect(self._on_file_updated)
        self._context = (0, 0)  # the chat's tokens and the context, as the controller said
        self._whole_tokens: dict[str, int] = {}  # by sha256: a file's whole text, estimated
        self.attach_button = QToolButton(self)
        self.attach_button.setObjectName("AttachButton")
        self.attach_button.setAutoRaise(True)
        self.attach_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.attach_button.setFixedSize(36, 36)
        self.attach_button.setToolTip(
            "Attach files (text, Markdown, code, PDF, .docx, HTML, PNG and JPEG images); you can "
            "also drop or paste them"
        )
        self.attach_button.setAccessibleName("Attach files")
        icons.set_icon(self.attach_button, "paperclip", role="muted", size=18)
        self.attach_button.clicked.connect(self._on_attach_clicked)
        self.input = _Input(self)
        self.input.files_given.connect(self.attach_files)
        self.input.image_given.connect(self.attach_image)
        self.input.set_hint(PLACEHOLDER, SHORT_PLACEHOLDER)
        self.input.installEventFilter(self)
        self.input.textChanged.connect(self._on_text_changed)
        self.send_button = QToolButton(self)
        self.send_button.setObjectName("SendButton")
        self.send_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.send_button.setFixedSize(36, 36)
        self.send_button.clicked.connect(self._on_send_clicked)
        self.meter = ContextMeter(self)

        top = QHBoxLayout()
        top.setSpacing(10)
        top.addWidget(self.attach_button, 0, Qt.AlignmentFlag.AlignBottom)
        top.addWidget(self.input, 1)
        top.addWidget(self.send_button, 0, Qt.AlignmentFlag.AlignBottom)
        bottom = QHBoxLayout()
        bottom.setContentsMargins(4, 0, 0, 0)
        bottom.addWidget(self.meter)
        bottom.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 12, 12, 10)
        layout.setSpacing(8)
        layout.addWidget(self.attachments_bar)
        layout.addLayout(top)
        layout.addLayout(bottom)
        if parent is not None:  # files dropped anywhere on the chat are attached
            parent.setAcceptDrops(True)
            parent.installEventFilter(self)
        self._refresh_button()

    # -- public ---------------------------------------------------------------------------

    @property
    def text(self) -> str:
        return self.input.toPlainText()

    def set_text(self, text: str) -> None:
        self.input.setPlainText(text)
        cursor = self.input.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        self.input.setTextCursor(cursor)

    def clear(self) -> None:
        self.input.clear()

    def focus_input(self) -> None:
        self.input.setFocus(Qt.FocusReason.OtherFocusReason)

    @property
    def busy(self) -> bool:
        return self._busy

    def set_busy(self, busy: bool) -> None:
        self._busy = busy
        self._refresh_button()

    def set_context(self, used: int, total: int) -> None:
        """The chat's tokens (with the draft) and the context; the meter adds the files."""
        self._context = (used, total)
        self._refresh_meter()

    def attached_cost(self) -> AttachedCost:
        """What the files waiting to be sent will take of the room the chat leaves."""
        used, total = self._context
        if total < 0:  # a remote model: the budget its answers give attached files
            room = REMOTE_ATTACHED_BUDGET
        else:
            budget = total - answer_room(total, None)
            room = max(budget - used, budget // 2)
        files = self.attachments.files
        ready = [f.document for f in files if f.state == "ready" and f.document is not None]
        cost = attached_cost(ready, room, self._whole_cost)
        reading = tuple(f.name for f in files if f.state == "reading")
        images = tuple(f.name for f in files if f.state == "ready" and f.image is not None)
        tokens = cost.tokens + IMAGE_TOKENS * len(images)
        return dataclasses.replace(cost, tokens=tokens, reading=reading, images=images)

    @Slot()
    def _refresh_meter(self) -> None:
        used, total = self._context
        cost = self.attached_cost() if total and self.attachments.files else AttachedCost()
        self.meter.set_usage(used + cost.tokens, total, cost)

    @Slot(int)
    def _on_file_updated(self, key: int) -> None:
        pending = self.attachments.file(key)
        if pending is not None and pending.state != "reading":  # not at each percent read
            self._refresh_meter()

    def _whole_cost(self, document: Document) -> int:
        tokens = self._whole_tokens.get(document.sha256)
        if tokens is None:
            tokens = self._whole_tokens[document.sha256] = estimate_tokens(whole_text(document))
        return tokens

    @Slot(list)
    def attach_files(self, paths: list[Path]) -> None:
        self.attachments.add_paths([Path(p) for p in paths])

    @Slot(bytes)
    def attach_image(self, data: bytes) -> None:
        self.attachments.add_image_data(data)

    # -- internals ------------------------------------------------------------------------

    def _refresh_button(self) -> None:
        if self._busy:
            icons.set_icon(self.send_button, "stop", role="accent_text", size=16)
            self.send_button.setToolTip("Stop the answer (Esc)")
            self.send_button.setAccessibleName("Stop the answer")
            self.send_button.setProperty("mode", "stop")
            self.send_button.setEnabled(True)
        else:
            reading = self.attachments.reading
            icons.set_icon(self.send_button, "send", role="accent_text", size=18)
            self.send_button.setToolTip(
                f"Sends once {reading[0].name} is read" if reading else "Send (Enter)"
            )
            self.send_button.setAccessibleName("Send")
            self.send_button.setProperty("mode", "send")
            self.send_button.setEnabled(bool(self.text.strip()) and not reading)
        self.send_button.style().unpolish(self.send_button)
        self.send_button.style().polish(self.send_button)

    @Slot()
    def _on_text_changed(self) -> None:
        self._refresh_button()
        self.draft_changed.emit(self.text)

    @Slot()
    def _on_send_clicked(self) -> None:
        if self._busy:
            self.stop_requested.emit()
        else:
            self._send()

    def _send(self) -> None:
        text = self.text.strip()
        if text and not self._busy and not self.attachments.reading:
            self.send_requested.emit(text)

    @Slot()
    def _on_attach_clicked(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Attach files", "", FILE_FILTER)
        self.attach_files([Path(p) for p in paths])

    def _on_drop(self, event: QDropEvent) -> bool:
        files = local_files(event.mimeData())
        if not files:
            return False
        if event.type() == QEvent.Type.Drop:
            self.attach_files(files)
        event.acceptProposedAction()
        return True

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        drag = (QEvent.Type.DragEnter, QEvent.Type.DragMove, QEvent.Type.Drop)
        if watched is self.parent() and event.type() in drag:
            assert isinstance(event, QDropEvent)  # QDragEnterEvent and QDragMoveEvent are ones
            if self._on_drop(event):
                return True
        if watched is self.input and event.type() == QEvent.Type.KeyPress:
            assert isinstance(event, QKeyEvent)
            if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
                if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                    self.input.insertPlainText("\n")
                    return True
                self._send()
                return True
            if event.key() == Qt.Key.Key_Escape and self._busy:
                self.stop_requested.emit()
                return True
        return super().eventFilter(watched, event)
