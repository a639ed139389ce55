"""The inline editor of a user message (Edit and resend)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal, Slot
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)


class EditBox(QFrame):
    """Inline editor for a user message: Enter sends, Shift+Enter is a newline, Esc cancels."""

    submitted = Signal(str)
    cancelled = Signal()

    def __init__(self, text: str, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("EditBox")
        self.editor = QPlainTextEdit(self)
        self.editor.setObjectName("EditField")
        self.editor.setPlainText(text)
        self.editor.installEventFilter(self)
        self.editor.setMinimumHeight(80)
        self.editor.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        cancel = QPushButton("Cancel", self)
        cancel.setObjectName("SecondaryButton")
        self.send_button = QPushButton("Send", self)
        self.send_button.setObjectName("PrimaryButton")
        cancel.clicked.connect(self.cancelled)
        self.send_button.clicked.connect(self._on_send_clicked)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(cancel)
        buttons.addWidget(self.send_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 12, 12, 12)
        layout.addWidget(self.editor)
        layout.addLayout(buttons)

    def eventFilter(self, watched: object, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        key_press = isinstance(event, QKeyEvent) and event.type() == QEvent.Type.KeyPress
        if watched is self.editor and key_press:
            assert isinstance(event, QKeyEvent)
            enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
            if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self._on_send_clicked()
                return True
            if event.key() == Qt.Key.Key_Escape:
                self.cancelled.emit()
                return True
        return False

    @Slot()
    def _on_send_clicked(self) -> None:
        text = self.editor.toPlainText().strip()
        if text:
            self.submitted.emit(text)
