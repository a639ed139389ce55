"""Value types of the conversation store: conversations, messages, search hits, errors.

All are immutable snapshots; the store hands out fresh ones on every call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

Role = Literal["system", "user", "assistant", "tool"]
Status = Literal["complete", "streaming", "stopped", "error"]

ROLES: Final[tuple[str, ...]] = get_args(Role)
STATUSES: Final[tuple[str, ...]] = get_args(Status)
FINAL_STATUSES: Final[tuple[str, ...]] = ("complete", "stopped", "error")


class ChatStoreError(Exception):
    """Base class of the errors the conversation store raises on purpose."""


class NotFoundError(ChatStoreError, LookupError):
    """No conversation or message with that id."""


class SchemaVersionError(ChatStoreError):
    """The database was written by a newer Ember whose schema this version does not know."""


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
