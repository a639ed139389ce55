"""The sidebar: new chat, search, and the conversations by day.

Rename (F2, double-click or the menu), delete with Undo, export and import live here and act on
the ``ChatStore`` directly.

Signals: ``conversation_selected(str id)``, ``new_chat_requested()``,
``conversation_deleted(str id)``, ``conversation_restored(str id)``,
``conversation_renamed(str id)``, ``conversation_imported(str id)``.
"""

from __future__ import annotations

from datetime import datetime

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chats.models import ChatStoreError, StoreDamagedError
from app.chats.store import ChatStore
from app.ui import icons, theme
from app.ui.chat.empty_state import app_icon_pixmap
from app.ui.sidebar import transfer
from app.ui.sidebar.conversation_list import CHAT, ID_ROLE, KIND_ROLE, ConversationList
from app.ui.toast import Toast

SEARCH_DELAY_MS = 150


class Sidebar(QFrame):
    """See the module docstring."""

    conversation_selected = Signal(str)
    new_chat_requested = Signal()
    conversation_deleted = Signal(str)
    conversation_restored = Signal(str)
    conversation_renamed = Signal(str)
    conversation_imported = Signal(str)
    history_recovered = Signal(str)  # chats.db was damaged and replaced: what to tell the user

    def __init__(self, store: ChatStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Sidebar")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setMinimumWidth(220)
        self.store = store
        self.current_id: str | None = None

        brand = QHBoxLayout()
        brand.setContentsMargins(6, 0, 0, 0)
        logo = QLabel(self)
        logo.setPixmap(app_icon_pixmap(24, self.devicePixelRatioF()))
        name = QLabel("Ember", self)
        name.setObjectName("BrandName")
        self.import_button = QToolButton(self)
        self.import_button.setObjectName("IconButton")
        self.import_button.setToolTip("Import a conversation (JSON)")
        self.import_button.setAccessibleName(icons.spoken("Import a conversation (JSON)"))
        self.import_button.setAutoRaise(True)
        icons.set_icon(self.import_button, "chat-import", size=17)
        self.import_button.clicked.connect(self.import_conversation)
        brand.addWidget(logo)
        brand.addSpacing(4)
        brand.addWidget(name)
        brand.addStretch(1)
        brand.addWidget(self.import_button)

        self.new_button = QPushButton("New chat", self)
        self.new_button.setObjectName("NewChatButton")
        self.new_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.new_button.setToolTip("Start a new chat (Ctrl+N)")
        self.new_button.setAccessibleName(icons.spoken("Start a new chat (Ctrl+N)"))
        icons.set_icon(self.new_button, "plus", role="text", size=16)
        self.new_button.clicked.connect(self.new_chat_requested)

        self.search = QLineEdit(self)
        self.search.setAccessibleName("Search chats")
        self.search.setObjectName("SearchField")
        self.search.setPlaceholderText("Search chats")
        self.search.setClearButtonEnabled(True)
        self.search.setToolTip("Search titles and messages (Ctrl+K)")
        self._search_icon = self.search.addAction(
            theme.icon("search"), QLineEdit.ActionPosition.LeadingPosition
        )
        self.search.textChanged.connect(self._on_search_text_changed)
        self.search.returnPressed.connect(self._on_search_return)
        self.search.installEventFilter(self)
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DELAY_MS)
        self._search_timer.timeout.connect(self.refresh)
        self._refresh_timer = QTimer(self)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(0)
        self._refresh_timer.timeout.connect(self.refresh)

        self.list = ConversationList(self)
        self.list.setAccessibleName("Chats")
        self.list.currentItemChanged.connect(self._on_current_item_changed)
        self.list.itemChanged.connect(self._on_item_changed)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._on_context_menu)
        self.empty_label = QLabel("No chats yet.\nYour conversations will appear here.", self)
        self.empty_label.setObjectName("SidebarEmpty")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setWordWrap(True)

        delete_action = QAction("Delete", self.list)
        delete_action.setShortcut(QKeySequence.StandardKey.Delete)
        delete_action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        delete_action.triggered.connect(self._on_delete_key)
        self.list.addAction(delete_action)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 14, 10, 10)
        layout.setSpacing(10)
        layout.addLayout(brand)
        layout.addSpacing(4)
        layout.addWidget(self.new_button)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.empty_label, 1)
        self.refresh()

    # -- public ---------------------------------------------------------------------------

    @Slot()
    def request_refresh(self) -> None:
        """Refresh on the next event-loop turn (several changes in a row refresh once)."""
        self._refresh_timer.start()

    @Slot()
    def refresh(self) -> None:
        self._refresh_timer.stop()
        try:
            self._show_rows()
        except StoreDamagedError as error:  # the recovered history is there now: list it
            self.history_recovered.emit(str(error))
            self._show_rows()

    def _show_rows(self) -> None:
        query = self.search.text().strip()
        if query:
            self.list.show_hits(self.store.search(query))
        else:
            self.list.show_conversations(self.store.list_conversations(), datetime.now())
        has_rows = bool(self.list.conversation_ids()) or bool(query)
        self.list.setVisible(has_rows)
        self.empty_label.setVisible(not has_rows)
        self.list.select(self.current_id)

    def set_current(self, conversation_id: str | None) -> None:
        self.current_id = conversation_id
        self.list.select(conversation_id)

    def focus_search(self) -> None:
        self.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search.selectAll()

    def rename(self, conversation_id: str) -> None:
        item = self.list.item_for(conversation_id)
        if item is not None:
            self.list.editItem(item)

    def apply_rename(self, conversation_id: str, title: str) -> bool:
        try:
            self.store.rename_conversation(conversation_id, title)
        except StoreDamagedError as error:
            self._on_store_damaged(error)
            return False
        except (ValueError, ChatStoreError):
            self.refresh()
            return False
        self.refresh()
        self.conversation_renamed.emit(conversation_id)
        return True

    def delete(self, conversation_id: str) -> None:
        """Soft-delete with an Undo toast (deleted chats are purged when the app quits)."""
        try:
            conversation = self.store.get_conversation(conversation_id)
            self.store.delete_conversation(conversation_id)
        except StoreDamagedError as error:
            self._on_store_damaged(error)
            return
        except ChatStoreError:
            return
        self.refresh()
        self.conversation_deleted.emit(conversation_id)
        title = conversation.title
        if len(title) > 40:  # the chat's own words, cut with "…" (not an anonymous "Chat")
            title = title[:39].rstrip() + "…"
        Toast.show_in(
            self, f"“{title}” deleted", "Undo", lambda: self.restore(conversation_id), 8000
        )

    def restore(self, conversation_id: str) -> None:
        try:
            self.store.restore_conversation(conversation_id)
        except StoreDamagedError as error:
            self._on_store_damaged(error)
            return
        except ChatStoreError:
            return
        self.refresh()
        self.conversation_restored.emit(conversation_id)

    def _on_store_damaged(self, error: StoreDamagedError) -> None:
        """The change was not made; chats.db was replaced by what could be recovered from it."""
        self.history_recovered.emit(str(error))
        self.refresh()

    def export(self, conversation_id: str, fmt: str) -> None:
        path = transfer.export_with_dialog(self, self.store, conversation_id, fmt)
        if path is not None:
            Toast.show_in(self, f"Exported to {path.name}", timeout_ms=4000)

    @Slot()
    def import_conversation(self) -> None:
        conversation = transfer.import_with_dialog(self, self.store)
        if conversation is not None:
            self.refresh()
            self.conversation_imported.emit(conversation.id)

    # -- events ---------------------------------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        """Esc in a search with text clears it. The window's Esc (stop the answer) would take
        the key first, so the field claims it, but only while there is something to clear."""
        clearing = (
            watched is self.search
            and isinstance(event, QKeyEvent)
            and event.key() == Qt.Key.Key_Escape
            and bool(self.search.text())
        )
        if clearing and event.type() == QEvent.Type.ShortcutOverride:
            event.accept()
            return True
        if clearing and event.type() == QEvent.Type.KeyPress:
            self.search.clear()
            self._search_timer.stop()
            self.refresh()
            return True
        return super().eventFilter(watched, event)

    @Slot(str)
    def _on_search_text_changed(self, _text: str) -> None:
        self._search_timer.start()

    @Slot()
    def _on_search_return(self) -> None:
        self._search_timer.stop()
        self.refresh()
        ids = self.list.conversation_ids()
        if ids:
            self.conversation_selected.emit(ids[0])

    @Slot(QListWidgetItem, QListWidgetItem)
    def _on_current_item_changed(
        self, current: QListWidgetItem | None, _previous: QListWidgetItem | None
    ) -> None:
        if current is None or current.data(KIND_ROLE) != CHAT:
            return
        conversation_id = str(current.data(ID_ROLE))
        if conversation_id != self.current_id:
            self.current_id = conversation_id
            self.conversation_selected.emit(conversation_id)

    @Slot(QListWidgetItem)
    def _on_item_changed(self, item: QListWidgetItem) -> None:
        if item.data(KIND_ROLE) == CHAT:
            conversation_id = str(item.data(ID_ROLE))
            QTimer.singleShot(0, self, lambda: self.apply_rename(conversation_id, item.text()))

    @Slot()
    def _on_delete_key(self) -> None:
        item = self.list.currentItem()
        if item is not None and item.data(KIND_ROLE) == CHAT:
            self.delete(str(item.data(ID_ROLE)))

    @Slot(QPoint)
    def _on_context_menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None or item.data(KIND_ROLE) != CHAT:
            return
        conversation_id = str(item.data(ID_ROLE))
        menu = self.conversation_menu(conversation_id)
        menu.exec(self.list.viewport().mapToGlobal(pos))

    def conversation_menu(self, conversation_id: str) -> QMenu:
        menu = QMenu(self)
        menu.addAction(theme.icon("edit"), "Rename", lambda: self.rename(conversation_id))
        export = menu.addMenu(theme.icon("export"), "Export")
        export.addAction("As Markdown…", lambda: self.export(conversation_id, "markdown"))
        export.addAction("As JSON…", lambda: self.export(conversation_id, "json"))
        menu.addSeparator()
        menu.addAction(
            theme.icon("trash", "danger"), "Delete", lambda: self.delete(conversation_id)
        )
        return menu
