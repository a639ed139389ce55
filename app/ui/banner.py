"""An inline message strip (error, warning, info) with optional action buttons.

Errors a user can act on appear here, inside the window, never as a traceback dialog.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QWidget

from app.ui import icons

Action = tuple[str, Callable[[], None]]

_ICONS = {"error": "alert", "warning": "alert", "info": "info"}
_ROLES = {"error": "danger", "warning": "warning", "info": "accent"}


class Banner(QFrame):
    """Hidden until ``show_message``; the close button or an action hides it again."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Banner")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.kind = "info"
        self.icon = QLabel(self)
        self.icon.setFixedSize(20, 20)
        self.text = QLabel(self)
        self.text.setObjectName("BannerText")
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._actions = QHBoxLayout()
        self._actions.setSpacing(6)
        self.close_button = QToolButton(self)
        self.close_button.setObjectName("BannerClose")
        self.close_button.setAutoRaise(True)
        self.close_button.setToolTip("Dismiss")
        self.close_button.setAccessibleName(icons.spoken("Dismiss"))
        icons.set_icon(self.close_button, "close", size=14)
        self.close_button.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(14, 10, 8, 10)
        layout.setSpacing(10)
        layout.addWidget(self.icon, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(self.text, 1)
        layout.addLayout(self._actions)
        layout.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_message(self, kind: str, text: str, actions: Sequence[Action] = ()) -> None:
        from app.ui import theme

        self.kind = kind if kind in _ICONS else "info"
        theme.set_style_property(self, "kind", self.kind)
        palette = theme.current()
        color = palette.role(_ROLES[self.kind])
        self.icon.setPixmap(icons.pixmap(_ICONS[self.kind], color, 20, self.devicePixelRatioF()))
        self.text.setText(text)
        while self._actions.count():
            item = self._actions.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        for label, callback in actions:
            button = QPushButton(label, self)
            button.setObjectName("BannerAction")
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.clicked.connect(self._run(callback))
            self._actions.addWidget(button)
        self.show()

    def _run(self, callback: Callable[[], None]) -> Callable[[], None]:
        @Slot()
        def run() -> None:
            self.hide()
            callback()

        return run
