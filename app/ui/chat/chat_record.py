"""What the GUI keeps in a conversation's settings blob besides its sampling settings.

The store treats ``Conversation.settings`` as an opaque JSON object owned by the GUI. Next to
``preset`` and ``sampling`` (edited in the chat's settings panel) it holds:

- ``draft``: the text typed in the composer and not sent yet;
- ``partial_stats``: ``{message_id: stats}`` of answers being written (tokens, time to first
  token, tok/s so far). A streaming message's own metadata is fixed when it is created, so this
  is where an answer cut short by a crash keeps its stats; the entry goes once it is finished.

Every write here re-reads the blob first (read, change one key, write), so the panel's
sampling edits and these keys never overwrite each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from app.chats.models import Conversation, Message
from app.chats.store import ChatStore

DRAFT = "draft"
PARTIAL_STATS = "partial_stats"
GUI_KEYS = (DRAFT, PARTIAL_STATS)


def draft_of(conversation: Conversation) -> str:
    text = conversation.settings.get(DRAFT)
    return text if isinstance(text, str) else ""


def with_gui_keys(store: ChatStore, conversation_id: str, blob: dict[str, Any]) -> dict[str, Any]:
    """``blob`` (the panel's settings) plus the GUI keys stored for the conversation now."""
    stored = store.get_conversation(conversation_id).settings
    return {**{k: stored[k] for k in GUI_KEYS if k in stored}, **blob}


def save_draft(store: ChatStore, conversation_id: str, text: str) -> Conversation:
    """Keep (or, when empty, forget) the unsent text of a conversation."""

    def change(blob: dict[str, Any]) -> None:
        if text:
            blob[DRAFT] = text
        else:
            blob.pop(DRAFT, None)

    return _update(store, conversation_id, change)


def save_partial_stats(
    store: ChatStore, conversation_id: str, message_id: str, stats: dict[str, Any] | None
) -> Conversation:
    """Record the stats so far of an answer being written (None: forget them)."""

    def change(blob: dict[str, Any]) -> None:
        entries = blob.get(PARTIAL_STATS)
        entries = dict(entries) if isinstance(entries, dict) else {}
        if stats is None:
            entries.pop(message_id, None)
        else:
            entries[message_id] = stats
        if entries:
            blob[PARTIAL_STATS] = entries
        else:
            blob.pop(PARTIAL_STATS, None)

    return _update(store, conversation_id, change)


def with_partial_stats(messages: list[Message], conversation: Conversation) -> list[Message]:
    """The messages, an interrupted answer carrying the stats saved while it was written."""
    entries = conversation.settings.get(PARTIAL_STATS)
    if not isinstance(entries, dict) or not entries:
        return messages
    result: list[Message] = []
    for message in messages:
        stats = entries.get(message.id)
        keep = message.status == "streaming" or "tokens" in message.metadata
        if isinstance(stats, dict) and not keep:
            result.append(dataclasses.replace(message, metadata={**stats, **message.metadata}))
        else:
            result.append(message)
    return result


def _update(
    store: ChatStore, conversation_id: str, change: Callable[[dict[str, Any]], None]
) -> Conversation:
    conversation = store.get_conversation(conversation_id)
    blob = dict(conversation.settings)
    change(blob)
    if blob == conversation.settings:
        return conversation  # nothing to write
    return store.update_conversation_settings(conversation_id, settings=blob)


def answer_stats(usage: Any, timings: Any, reason: str) -> dict[str, Any]:
    """What the engine measured of an answer, as its message's metadata keeps it."""
    return {
        "tokens": usage.completion_tokens,
        "prompt_tokens": usage.prompt_tokens,
        **{k: getattr(usage, k) for k in ("cached_tokens", "drafted_tokens", "accepted_tokens")},
        "ttft": round(timings.time_to_first_token, 4),
        "tps": round(timings.generation_tokens_per_second, 2),
        "generation_seconds": round(timings.generation_seconds, 3),
        "finish_reason": reason,
    }
