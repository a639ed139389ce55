"""The header above the chat: sidebar toggle, the chat's title, the model picker, the chat's
settings and a menu of chat actions.

Signals: ``sidebar_toggle_requested()``, ``conversation_settings_toggled(bool)``,
``conversation_action_requested(str action)`` with action rename, export_markdown,
export_json or delete.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QAction, QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QSizePolicy,
    QToolButton,
    QWidget,
)

from app.chats.models import Conversation
from app.ui import icons, theme
from app.ui.engine_session import EngineSession
from app.ui.header.model_list import ModelCatalog
from app.ui.header.model_picker import ModelPicker


def _icon_button(parent: QWidget, icon: str, tip: str, name: str) -> QToolButton:
    button = QToolButton(parent)
    button.setObjectName(name)
    button.setProperty("class", "IconButton")
    button.setToolTip(tip)
    button.setAccessibleName(tip)
    button.setAutoRaise(True)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    button.setFixedSize(34, 34)
    icons.set_icon(button, icon, size=19)
    return button


class _ElidedLabel(QLabel):
    """A label that shortens its text with "…" to the width it gets (never pushes others)."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self._full = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    @property
    def full_text(self) -> str:
        return self._full

    def set_full_text(self, text: str) -> None:
        self._full = text
        self.setToolTip(text)
        self._elide()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        metrics = self.fontMetrics()
        self.setText(metrics.elidedText(self._full, Qt.TextElideMode.ElideRight, self.width()))


class HeaderBar(QFrame):
    """See the module docstring."""

    sidebar_toggle_requested = Signal()
    conversation_settings_toggled = Signal(bool)
    conversation_action_requested = Signal(str)

    def __init__(
        self, engine: EngineSession, catalog: ModelCatalog, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("HeaderBar")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setFixedHeight(58)
        self.sidebar_button = _icon_button(
            self, "sidebar", "Show or hide the sidebar", "SidebarToggle"
        )
        self.sidebar_button.clicked.connect(self.sidebar_toggle_requested)
        self.title = _ElidedLabel(self)
        self.title.setObjectName("HeaderTitle")
        self.title.set_full_text("New chat")
        self.picker = ModelPicker(engine, catalog, self)
        self.settings_button = _icon_button(
            self, "sliders", "Chat settings: model, system prompt, sampling", "ChatSettingsToggle"
        )
        self.settings_button.setCheckable(True)
        self.settings_button.toggled.connect(self.conversation_settings_toggled)
        self.more_button = _icon_button(self, "more", "More", "MoreButton")
        self.more_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.more_menu = QMenu(self)
        self.more_button.setMenu(self.more_menu)
        self.more_button.setStyleSheet("QToolButton::menu-indicator { image: none; width: 0; }")
        self.more_menu.aboutToShow.connect(self._fill_more_menu)
        self._has_conversation = False

        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.setSpacing(6)
        left = QHBoxLayout()
        left.setSpacing(8)
        left.addWidget(self.sidebar_button)
        left.addWidget(self.title, 1)
        right = QHBoxLayout()
        right.setSpacing(4)
        right.addStretch(1)
        right.addWidget(self.settings_button)
        right.addWidget(self.more_button)
        layout.addLayout(left, 1)
        layout.addWidget(self.picker, 0, Qt.AlignmentFlag.AlignVCenter)
        layout.addLayout(right, 1)

    def set_conversation(self, conversation: Conversation | None) -> None:
        self._has_conversation = conversation is not None
        self.title.set_full_text(conversation.title if conversation else "New chat")

    @Slot()
    def _fill_more_menu(self) -> None:
        menu = self.more_menu
        menu.clear()
        enabled = self._has_conversation
        for label, icon, action in (
            ("Rename chat", "edit", "rename"),
            ("Export as Markdown…", "export", "export_markdown"),
            ("Export as JSON…", "export", "export_json"),
        ):
            item = menu.addAction(theme.icon(icon), label)
            item.setData(action)
            item.setEnabled(enabled)
            item.triggered.connect(self._on_more_action)
        menu.addSeparator()
        item = menu.addAction(theme.icon("trash", "danger"), "Delete chat")
        item.setData("delete")
        item.setEnabled(enabled)
        item.triggered.connect(self._on_more_action)

    @Slot()
    def _on_more_action(self) -> None:
        action = self.sender()
        if isinstance(action, QAction) and action.data():
            self.conversation_action_requested.emit(str(action.data()))
