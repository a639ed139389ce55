"""Queries over a conversation's message tree that several store operations share."""

from __future__ import annotations

import sqlite3

from app.chats.models import Message

# The message given as the parameter and everything below it.
SUBTREE = """
    WITH RECURSIVE subtree(id) AS (
        SELECT ? UNION ALL SELECT m.id FROM messages m JOIN subtree ON m.parent_id = subtree.id
    )
"""


def latest_leaf(conn: sqlite3.Connection, message_id: str) -> str:
    """The newest message at or below ``message_id``. A child is always newer than its
    parent, so this is a leaf, and its path is the most recent branch under the message.
    """
    row = conn.execute(
        f"{SUBTREE} SELECT m.id FROM subtree JOIN messages m ON m.id = subtree.id "
        "ORDER BY m.seq DESC LIMIT 1",
        (message_id,),
    ).fetchone()
    return str(row[0])


def fallback_leaf(conn: sqlite3.Connection, deleted: Message) -> str | None:
    """Where the view goes when the branch on screen is deleted at ``deleted``."""
    rows = conn.execute(
        "SELECT id, seq FROM messages WHERE conversation_id = ? AND parent_id IS ? "
        "AND id != ? ORDER BY seq",
        (deleted.conversation_id, deleted.parent_id, deleted.id),
    ).fetchall()
    before = [message_id for message_id, seq in rows if seq < deleted.seq]
    after = [message_id for message_id, seq in rows if seq > deleted.seq]
    if before:
        return latest_leaf(conn, before[-1])
    if after:
        return latest_leaf(conn, after[0])
    return deleted.parent_id
