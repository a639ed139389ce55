"""A small notice floating at the bottom of the window, with an optional action (Undo)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Slot
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget


class Toast(QFrame):
    """One per window; ``Toast.show_in(widget, text, action, callback)`` reuses it."""

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self.setObjectName("Toast")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.label = QLabel(self)
        self.label.setObjectName("ToastText")
        self.action_button = QPushButton(self)
        self.action_button.setObjectName("ToastAction")
        self.action_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.action_button.clicked.connect(self._on_action_clicked)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(16, 8, 8, 8)
        layout.setSpacing(12)
        layout.addWidget(self.label)
        layout.addWidget(self.action_button)
        self._callback: Callable[[], None] | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.dismiss)
        window.installEventFilter(self)
        self.hide()

    @classmethod
    def show_in(
        cls,
        widget: QWidget,
        text: str,
        action: str | None = None,
        callback: Callable[[], None] | None = None,
        timeout_ms: int = 6000,
    ) -> Toast:
        window = widget.window()
        toast = window.findChild(Toast, "Toast", Qt.FindChildOption.FindDirectChildrenOnly)
        if toast is None:
            toast = cls(window)
        toast.present(text, action, callback, timeout_ms)
        return toast

    def present(
        self,
        text: str,
        action: str | None,
        callback: Callable[[], None] | None,
        timeout_ms: int,
    ) -> None:
        self.label.setText(text)
        self._callback = callback
        self.action_button.setText(action or "")
        self.action_button.setVisible(bool(action))
        self.adjustSize()
        self._place()
        self.raise_()
        self.show()
        self._timer.start(timeout_ms)

    @Slot()
    def dismiss(self) -> None:
        self._callback = None
        self.hide()

    @Slot()
    def _on_action_clicked(self) -> None:
        callback = self._callback
        self.dismiss()
        if callback is not None:
            callback()

    def _place(self) -> None:
        parent = self.parentWidget()
        if parent is not None:
            x = (parent.width() - self.width()) // 2
            self.move(x, parent.height() - self.height() - 48)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.Resize and self.isVisible():
            self._place()
        return False
