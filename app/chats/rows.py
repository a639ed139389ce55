"""Rows to value types and back: the column lists every query selects, JSON columns."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from app.chats.models import Conversation, Message, Role, Status

CONVERSATION_COLUMNS = (
    "c.id, c.title, c.created_at, c.updated_at, c.model, c.system_prompt, c.settings, "
    "c.current_leaf_id, c.deleted_at"
)
CONVERSATION_WIDTH = 9

# Sibling position comes with every message (two index lookups), so "2/3" costs no query.
MESSAGE_COLUMNS = """
    m.id, m.conversation_id, m.parent_id, m.role, m.content, m.status, m.created_at,
    m.metadata, m.seq,
    (SELECT COUNT(*) FROM messages s WHERE s.conversation_id = m.conversation_id
        AND s.parent_id IS m.parent_id AND s.seq < m.seq),
    (SELECT COUNT(*) FROM messages s WHERE s.conversation_id = m.conversation_id
        AND s.parent_id IS m.parent_id)
"""


def dumps(value: dict[str, Any], what: str) -> str:
    """A dict as compact JSON text; ``what`` names it in the error."""
    if not isinstance(value, dict):
        raise TypeError(f"{what} must be a dict, got {type(value).__name__}")
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{what} must be JSON-serializable: {error}") from error


def conversation_from_row(row: Sequence[Any]) -> Conversation:
    return Conversation(
        id=row[0],
        title=row[1],
        created_at=row[2],
        updated_at=row[3],
        model=row[4],
        system_prompt=row[5],
        settings=json.loads(row[6]),
        current_leaf_id=row[7],
        deleted_at=row[8],
    )


def message_from_row(row: Sequence[Any]) -> Message:
    return Message(
        id=row[0],
        conversation_id=row[1],
        parent_id=row[2],
        role=cast(Role, row[3]),
        content=row[4],
        status=cast(Status, row[5]),
        created_at=row[6],
        metadata=json.loads(row[7]),
        seq=row[8],
        sibling_index=row[9],
        sibling_count=row[10],
    )
