"""The message box: Enter sends, Shift+Enter is a new line, Esc stops; a context meter;
attached files (the paperclip, files dropped on the chat or pasted) as chips above the text.

Signals: ``send_requested(str text)``, ``stop_requested()``, ``draft_changed(str text)``.
The attached files live in an ``AttachmentTray`` (the chat controller's, which takes them
when the message is sent); sending waits until every file is read.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QMimeData, QObject, QRectF, QSize, Qt, Signal, Slot
from PySide6.QtGui import QColor, QDropEvent, QKeyEvent, QPainter, QPaintEvent
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

from app.ui import icons, theme
from app.ui.chat.attaching import AttachmentTray
from app.ui.chat.attachments_bar import AttachmentsBar

WARN_AT = 0.8
FULL_AT = 0.95
MAX_LINES = 9


class ContextMeter(QWidget):
    """A slim bar and "used / total tokens"; turns amber near the limit and red when full."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ContextMeter")
        self.used = 0
        self.total = 0
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

    def set_usage(self, used: int, total: int) -> None:
        """``total`` 0: no model; negative: a remote model whose context size is unknown
        (the bar hides, the tokens used stay)."""
        self.used, self.total = max(0, used), max(0, total)
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
        theme.set_style_property(self.label, "level", self.level)
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


def local_files(mime: QMimeData | None) -> list[Path]:
    """The local files a drop or a paste carries (file URLs), in order."""
    if mime is None or not mime.hasUrls():
        return []
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()]


class _Input(QPlainTextEdit):
    """Grows with its text up to MAX_LINES. Files pasted or dropped into it are attached
    (``files_given``), not written in as their paths."""

    files_given = Signal(list)

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("ComposerInput")
        self.setTabChangesFocus(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._fit()

    @Slot()
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
        return bool(local_files(source)) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:  # noqa: N802 (Qt override)
        files = local_files(source)
        if files:
            self.files_given.emit(files)
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
        self.attach_button = QToolButton(self)
        self.attach_button.setObjectName("AttachButton")
        self.attach_button.setAutoRaise(True)
        self.attach_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.attach_button.setFixedSize(36, 36)
        self.attach_button.setToolTip(
            "Attach files (text, Markdown, code, PDF, .docx, HTML); you can also drop or paste them"
        )
        self.attach_button.setAccessibleName("Attach files")
        icons.set_icon(self.attach_button, "paperclip", role="muted", size=18)
        self.attach_button.clicked.connect(self._on_attach_clicked)
        self.input = _Input(self)
        self.input.files_given.connect(self.attach_files)
        self.input.setPlaceholderText(
            "Message the model…  (Enter to send, Shift+Enter for a new line)"
        )
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
        self.meter.set_usage(used, total)

    @Slot(list)
    def attach_files(self, paths: list[Path]) -> None:
        self.attachments.add_paths([Path(p) for p in paths])

    # -- internals ------------------------------------------------------------------------

    def _refresh_button(self) -> None:
        if self._busy:
            icons.set_icon(self.send_button, "stop", role="accent_text", size=16)
            self.send_button.setToolTip("Stop the answer (Esc)")
            self.send_button.setProperty("mode", "stop")
            self.send_button.setEnabled(True)
        else:
            reading = self.attachments.reading
            icons.set_icon(self.send_button, "send", role="accent_text", size=18)
            self.send_button.setToolTip(
                f"Sends once {reading[0].name} is read" if reading else "Send (Enter)"
            )
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
        paths, _ = QFileDialog.getOpenFileNames(self, "Attach files")
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
