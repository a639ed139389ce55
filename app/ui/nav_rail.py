"""The rail on the window's left edge: Chats, Models, Server, and at the bottom the keyboard
shortcuts (Help) and Settings.

It only says which page the user asked for (``page_requested(str)``); the main window owns
the pages. ``set_page`` checks the button of the page shown, ``set_badge`` puts a count on a
button (running downloads on Models).
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal, Slot
from PySide6.QtWidgets import QButtonGroup, QLabel, QToolButton, QVBoxLayout, QWidget

from app.ui import icons

CHATS = "chats"
MODELS = "models"
SERVER = "server"
PAGES = (CHATS, MODELS, SERVER)

_LABELS = {
    CHATS: ("chat", "Chats", "Chats (Ctrl+1)"),
    MODELS: ("box", "Models", "Discover, download and manage models (Ctrl+2)"),
    SERVER: ("server", "Server", "The OpenAI-compatible API for editors and scripts (Ctrl+3)"),
}


class NavRail(QWidget):
    page_requested = Signal(str)
    settings_requested = Signal()
    help_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("NavRail")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setFixedWidth(68)
        self.buttons: dict[str, QToolButton] = {}
        self._badges: dict[str, QLabel] = {}
        group = QButtonGroup(self)
        group.setExclusive(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 12, 6, 10)
        layout.setSpacing(4)
        for page in PAGES:
            icon, text, tip = _LABELS[page]
            button = self._button(icon, text, tip)
            button.setCheckable(True)
            button.setObjectName("NavButton")
            button.setProperty("page", page)
            button.clicked.connect(lambda _=False, p=page: self.page_requested.emit(p))
            group.addButton(button)
            layout.addWidget(button, 0, Qt.AlignmentFlag.AlignHCenter)
            self.buttons[page] = button
            badge = QLabel(button)
            badge.setObjectName("NavBadge")
            badge.setAlignment(Qt.AlignmentFlag.AlignCenter)
            badge.hide()
            self._badges[page] = badge
        layout.addStretch(1)
        self.help_button = self._button("keyboard", "Keys", "Keyboard shortcuts (F1)")
        self.help_button.setObjectName("NavButton")
        self.help_button.setAccessibleName("Keyboard shortcuts")
        self.help_button.clicked.connect(self.help_requested)
        layout.addWidget(self.help_button, 0, Qt.AlignmentFlag.AlignHCenter)
        self.settings_button = self._button("gear", "Settings", "Settings (Ctrl+,)")
        self.settings_button.setObjectName("NavButton")
        self.settings_button.clicked.connect(self.settings_requested)
        layout.addWidget(self.settings_button, 0, Qt.AlignmentFlag.AlignHCenter)
        self.buttons[CHATS].setChecked(True)

    def _button(self, icon: str, text: str, tip: str) -> QToolButton:
        button = QToolButton(self)
        button.setText(text)
        button.setToolTip(tip)
        button.setAccessibleName(text)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextUnderIcon)
        button.setIconSize(QSize(20, 20))
        button.setFixedSize(56, 52)
        icons.set_icon(button, icon, size=20)
        return button

    @Slot(str)
    def set_page(self, page: str) -> None:
        button = self.buttons.get(page)
        if button is not None:
            button.setChecked(True)

    def set_badge(self, page: str, count: int) -> None:
        """A small count in the corner of a page's button; 0 hides it."""
        badge = self._badges[page]
        if count <= 0:
            badge.hide()
            return
        badge.setText(str(count) if count < 100 else "99+")
        badge.adjustSize()
        width = max(16, badge.sizeHint().width())
        badge.setFixedSize(width, 16)
        badge.move(self.buttons[page].width() - width - 6, 3)
        badge.show()
        badge.raise_()
