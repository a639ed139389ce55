"""Value types of the conversation store: conversations, messages, search hits, errors.

All are immutable snapshots; the store hands out fresh ones on every call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, get_args

Role = Literal["system", "user", "assistant", "tool"]
Status = Literal["complete", "streaming", "stopped", "error"]

ROLES: Final[tuple[str, ...]] = get_args(Role)
STATUSES: Final[tuple[str, ...]] = get_args(Status)
FINAL_STATUSES: Final[tuple[str, ...]] = ("complete", "stopped", "error")
RECOVERED_TITLE: Final = "Recovered chat"


class ChatStoreError(Exception):
    """Base class of the errors the conversation store raises on purpose."""


class NotFoundError(ChatStoreError, LookupError):
    """No conversation or message with that id."""


class SchemaVersionError(ChatStoreError):
    """The database was written by a newer Ember whose schema this version does not know."""


class StoreLockedError(ChatStoreError):
    """Another program held chats.db's write lock for longer than the store waits for it.
    Nothing was changed by the call that raised it; trying again later is safe."""


class StoreDamagedError(ChatStoreError):
    """chats.db turned out to be damaged while in use. The store has already moved the damaged
    file aside and recovered what it could read into a fresh file (``report``); the call that
    raised this did nothing, and later calls use the fresh file."""

    def __init__(self, message: str, report: RecoveryReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What happened when chats.db was found damaged (``ChatStore.recovery``).

    ``damaged_path`` is where the damaged file was kept (its -wal and -shm beside it, with the
    same name plus ``-wal``/``-shm``); nothing was written into it. ``unreadable`` counts the
    stretches of rows that could not be read (0: everything readable was recovered).
    ``placeholder_conversations`` are chats whose own row was lost but whose messages were
    not: they come back titled ``RECOVERED_TITLE``.
    """

    reason: str
    damaged_path: Path
    conversations: int
    messages: int
    unreadable: int
    placeholder_conversations: int = 0
    error: str | None = None  # why a whole table could not be read, if one could not

    @property
    def message(self) -> str:
        """One paragraph for the user."""
        chats = f"{self.conversations} {'chat' if self.conversations == 1 else 'chats'}"
        messages = f"{self.messages} {'message' if self.messages == 1 else 'messages'}"
        text = (
            f"The chat history was damaged ({self.reason}). Ember recovered {chats} with "
            f"{messages} into a fresh file"
        )
        if self.error and self.error != self.reason:
            text += f"; the rest could not be read ({self.error})"
        elif self.error:
            text += "; nothing else could be read"
        elif self.unreadable:
            text += "; some parts could not be read"
        return f"{text}. The damaged file was kept as {self.damaged_path}."


@dataclass(frozen=True, slots=True)
class Conversation:
    """One chat in the sidebar. Times are unix seconds (``time.time()``).

    ``updated_at`` is the time of the last *activity* (a message added, finished or deleted);
    renaming or changing settings does not move a chat to the top of the list.
    ``current_leaf_id`` is the last message of the branch on screen (None: no messages yet).
    ``settings`` is an opaque JSON object owned by the GUI (sampling parameters and the like).
    """

    id: str
    title: str
    created_at: float
    updated_at: float
    model: str | None = None
    system_prompt: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    current_leaf_id: str | None = None
    deleted_at: float | None = None

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None


@dataclass(frozen=True, slots=True)
class Message:
    """One node of a conversation's message tree.

    ``parent_id`` is None for a first message (a root; edits of a first message are roots too).
    ``seq`` grows with creation and orders siblings. ``sibling_index`` (0-based) and
    ``sibling_count`` say where the message sits among the versions that share its parent,
    so the GUI can show "2/3" without another query: ``f"{m.sibling_index + 1}/{m.sibling_count}"``.
    ``metadata`` is a JSON object: tokens, ttft, tok/s, model, finish reason, error text.
    """

    id: str
    conversation_id: str
    parent_id: str | None
    role: Role
    content: str
    status: Status
    created_at: float
    metadata: dict[str, Any] = field(default_factory=dict)
    seq: int = 0
    sibling_index: int = 0
    sibling_count: int = 1


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A conversation that matches a search, with a short plain-text excerpt.

    ``highlights`` are ``(start, end)`` character offsets of the matched words in ``snippet``;
    the snippet is plain text (escape it before showing it as rich text). ``message_id`` is the
    matching message, or None when only the title matched.
    """

    conversation: Conversation
    snippet: str
    highlights: tuple[tuple[int, int], ...] = ()
    message_id: str | None = None
