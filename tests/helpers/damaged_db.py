"""A chat history to damage: filled with marked messages, then pages of its SQLite file overwritten
with noise, to test how the app recovers what is left."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from app.chats.store import ChatStore

FILLER = "lorem ipsum dolor sit amet consectetur adipiscing elit " * 6


def fill(db_path: Path, conversations: int = 150) -> None:
    """A history of ``conversations`` chats: a question, an answer (with a second version on
    every fifth), each message a few hundred bytes with a unique marker."""
    with ChatStore(db_path) as store:
        for i in range(conversations):
            conversation = store.create_conversation(f"title-{i:04d}")
            question = store.add_message(conversation.id, "user", f"question-{i:04d} {FILLER}")
            store.add_message(conversation.id, "assistant", f"answer-{i:04d} {FILLER}")
            if i % 5 == 0:
                store.begin_streaming_message(conversation.id, parent_id=question.id)
                store.append_to_message(store.active_branch(conversation.id)[-1].id, "second")


def page_size(db_path: Path) -> int:
    conn = sqlite3.connect(db_path)
    try:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        conn.close()


def garbage(db_path: Path, offset: int, size: int = 8192) -> bytes:
    """Write ``size`` random bytes at ``offset``; the file's new content."""
    noise = random.Random(offset).randbytes(size)
    with db_path.open("r+b") as f:
        f.seek(offset)
        f.write(noise)
    return db_path.read_bytes()


def page_holding(db_path: Path, marker: str) -> int:
    """The offset of the page that holds the only copy of ``marker``."""
    data = db_path.read_bytes()
    assert data.count(marker.encode()) == 1, marker
    size = page_size(db_path)
    return data.index(marker.encode()) // size * size


def damage_page_holding(db_path: Path, marker: str) -> None:
    """Garbage written over the page that holds the only copy of ``marker``."""
    garbage(db_path, page_holding(db_path, marker), page_size(db_path))
