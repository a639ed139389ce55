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
    QSpacerItem,
    QToolButton,
    QWidget,
)

from app.chats.models import Conversation
from app.ui import icons, theme
from app.ui.engine_session import EngineSession
from app.ui.header.model_list import ModelChoices
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


TITLE_MIN_WIDTH = 150  # the title keeps about 15 characters however narrow the header gets
TITLE_ROOM = 200  # room the title gets before the model picker leaves the centre
_SPACING = 6


class _ElidedLabel(QLabel):
    """A label that shortens its text with "…" to the width it gets (never pushes others),
    down to ``TITLE_MIN_WIDTH`` (or its whole text, when shorter)."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self._full = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    @property
    def full_text(self) -> str:
        return self._full

    def text_width(self) -> int:
        return self.fontMetrics().horizontalAdvance(self._full) + 2

    def set_full_text(self, text: str) -> None:
        self._full = text
        self.setToolTip(text)
        self.setMinimumWidth(min(self.text_width(), TITLE_MIN_WIDTH))
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
        self, engine: EngineSession, catalog: ModelChoices, parent: QWidget | None = None
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
        self._app_actions: list[QAction] = []  # the window's own (Quit), below the chat's

        # [sidebar][title ……][picker][balance][settings][more]: ``balance`` is as wide as
        # it takes to put the picker in the middle, while the title has room for that (see
        # _arrange); otherwise the picker narrows first, then the title, down to their minimums.
        self._balance = QSpacerItem(0, 0, QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Minimum)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.setSpacing(_SPACING)
        layout.addWidget(self.sidebar_button)
        layout.addSpacing(2)
        layout.addWidget(self.title, 1)
        layout.addWidget(self.picker, 0, Qt.AlignmentFlag.AlignVCenter)
        layout.addItem(self._balance)
        layout.addWidget(self.settings_button)
        layout.addWidget(self.more_button)

    def set_conversation(self, conversation: Conversation | None) -> None:
        self._has_conversation = conversation is not None
        self.title.set_full_text(conversation.title if conversation else "New chat")
        self._arrange()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._arrange()

    def _arrange(self) -> None:
        """Centre the picker when the title still fits beside it; else let the picker shrink
        (to its minimum) before the title does, so the title never becomes "C…"."""
        margins = self.contentsMargins()
        layout = self.layout()
        if layout is None:
            return
        lm = layout.contentsMargins()
        width = self.width() - margins.left() - margins.right() - lm.left() - lm.right()
        left = self.sidebar_button.width() + 2 + 2 * _SPACING  # up to the title, and after it
        right = self.settings_button.width() + self.more_button.width() + 2 * _SPACING
        title = min(self.title.text_width(), TITLE_ROOM)
        preferred = self.picker.sizeHint().width()
        smallest = self.picker.minimumSizeHint().width()
        side = (width - preferred) // 2
        if side >= left + title and side >= right:
            picker, balance = preferred, side - right
        else:
            picker = max(smallest, min(preferred, width - left - right - title))
            balance = 0
        self.picker.setMaximumWidth(picker)
        if self._balance.sizeHint().width() != balance:
            self._balance.changeSize(
                balance, 0, QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Minimum
            )
            layout.invalidate()

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
        if self._app_actions:
            menu.addSeparator()
            menu.addActions(self._app_actions)

    def add_app_action(self, action: QAction) -> None:
        """An action of the app's (Quit) listed at the end of the More menu."""
        self._app_actions.append(action)

    @Slot()
    def _on_more_action(self) -> None:
        action = self.sender()
        if isinstance(action, QAction) and action.data():
            self.conversation_action_requested.emit(str(action.data()))
