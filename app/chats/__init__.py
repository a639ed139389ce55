"""Conversation storage (no Qt): the SQLite chat history, its value types and sidebar grouping."""

from app.chats.grouping import group_by_day
from app.chats.models import (
    ChatStoreError,
    Conversation,
    Message,
    NotFoundError,
    RecoveryReport,
    Role,
    SchemaVersionError,
    SearchHit,
    Status,
    StoreDamagedError,
    StoreLockedError,
)
from app.chats.store import ChatStore

__all__ = [
    "ChatStore",
    "ChatStoreError",
    "Conversation",
    "Message",
    "NotFoundError",
    "RecoveryReport",
    "Role",
    "SchemaVersionError",
    "SearchHit",
    "Status",
    "StoreDamagedError",
    "StoreLockedError",
    "group_by_day",
]
