"""Unsent text per chat, kept as it is typed, so switching chats or a crash loses nothing.

``DraftKeeper`` saves the composer's text ``SAVE_DELAY_MS`` after typing pauses (and at once
when the chat changes or the app closes): a conversation's draft in its settings blob
(chat_record.py), a new chat's draft (no conversation yet) in the app settings. Opening a chat,
also after a restart, gives its draft back. GUI thread only.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, QTimer, Slot

from app.chats.models import ChatStoreError, Conversation
from app.chats.store import ChatStore
from app.config import Settings
from app.ui.chat.chat_record import draft_of, save_draft

log = logging.getLogger(__name__)

SAVE_DELAY_MS = 700
NEW_CHAT_DRAFT = "ui.new_chat_draft"  # an app-settings extra: the draft of the unsaved new chat


class DraftKeeper(QObject):
    """See the module docstring."""

    def __init__(self, store: ChatStore, settings: Settings, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.settings = settings
        self._pending: tuple[str | None, str] | None = None  # (conversation id, text)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SAVE_DELAY_MS)
        self._timer.timeout.connect(self.flush)

    def text_for(self, conversation: Conversation | None) -> str:
        """The draft to show when ``conversation`` (None: a new chat) is opened."""
        if conversation is None:
            text = self.settings.extra(NEW_CHAT_DRAFT, "")
            return text if isinstance(text, str) else ""
        return draft_of(conversation)

    def changed(self, conversation_id: str | None, text: str) -> None:
        """The composer of ``conversation_id`` (None: a new chat) now holds ``text``."""
        if self._pending is not None and self._pending[0] != conversation_id:
            self.flush()
        self._pending = (conversation_id, text)
        self._timer.start()

    def forget_new_chat(self) -> None:
        """The new chat's text was sent (it became a conversation): nothing to keep."""
        if self._pending is not None and self._pending[0] is None:
            self._pending = None
            self._timer.stop()
        if self.settings.extra(NEW_CHAT_DRAFT, ""):
            self.settings.set_extra(NEW_CHAT_DRAFT, "")

    @Slot()
    def flush(self) -> None:
        """Save the text waiting for the typing pause, now."""
        self._timer.stop()
        pending, self._pending = self._pending, None
        if pending is None:
            return
        conversation_id, text = pending
        if conversation_id is None:
            if self.settings.extra(NEW_CHAT_DRAFT, "") != text:
                self.settings.set_extra(NEW_CHAT_DRAFT, text)
            return
        try:
            save_draft(self.store, conversation_id, text)
        except ChatStoreError:  # the chat was deleted meanwhile: its draft goes with it
            log.info("Not keeping the draft of conversation %s: it is gone", conversation_id)
