"""The chats.db schema: ordered migrations tracked in ``PRAGMA user_version``, and the search index.

To change the schema, append a function to ``MIGRATIONS``; never edit one that has shipped.
Each runs in its own transaction together with the ``user_version`` bump, so a failed migration
leaves the file at the previous version. Never use ``executescript`` in a migration: it commits.

The full-text index (FTS5) is not part of the versioned schema. It is derived data that
``ensure_search_index`` creates or drops at every open, depending on whether this SQLite has
FTS5, and rebuilds when it was missing; so the same file works with and without FTS5.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from app.chats.models import SchemaVersionError

Migration = Callable[[sqlite3.Connection], None]


def _migration_1(conn: sqlite3.Connection) -> None:
    # `seq` is the rowid alias of both tables: stable across VACUUM (the FTS index points at
    # it) and, for messages, the creation order that sorts siblings.
    # messages.parent_id has no ON DELETE action on purpose: a subtree is deleted in one
    # statement (checked at its end), and a deep cascade would hit SQLite's trigger-depth limit.
    statements = (
        """
        CREATE TABLE conversations (
            seq             INTEGER PRIMARY KEY,
            id              TEXT NOT NULL UNIQUE,
            title           TEXT NOT NULL,
            created_at      REAL NOT NULL,
            updated_at      REAL NOT NULL,
            model           TEXT,
            system_prompt   TEXT NOT NULL DEFAULT '',
            settings        TEXT NOT NULL DEFAULT '{}',
            current_leaf_id TEXT REFERENCES messages(id) ON DELETE SET NULL,
            deleted_at      REAL
        )
        """,
        """
        CREATE TABLE messages (
            seq             INTEGER PRIMARY KEY,
            id              TEXT NOT NULL UNIQUE,
            conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            parent_id       TEXT REFERENCES messages(id),
            role            TEXT NOT NULL
                            CHECK (role IN ('system', 'user', 'assistant', 'tool')),
            content         TEXT NOT NULL DEFAULT '',
            created_at      REAL NOT NULL,
            status          TEXT NOT NULL DEFAULT 'complete'
                            CHECK (status IN ('complete', 'streaming', 'stopped', 'error')),
            metadata        TEXT NOT NULL DEFAULT '{}'
        )
        """,
        # Leads with conversation_id, so it is also the messages(conversation_id) index; the
        # rest serves sibling counting (parent_id IS ?, ordered by seq).
        "CREATE INDEX messages_conversation ON messages(conversation_id, parent_id, seq)",
        "CREATE INDEX messages_parent ON messages(parent_id)",
        "CREATE INDEX messages_streaming ON messages(status) WHERE status = 'streaming'",
        "CREATE INDEX conversations_updated ON conversations(deleted_at, updated_at)",
        # Deleting a message checks this foreign key; without the index that is a table scan.
        "CREATE INDEX conversations_leaf ON conversations(current_leaf_id)",
    )
    for statement in statements:
        conn.execute(statement)


MIGRATIONS: list[Migration] = [_migration_1]


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring the database up to ``len(MIGRATIONS)``; refuse a database from a newer Ember.

    ``conn`` must be in autocommit mode (``isolation_level=None``).
    """
    known = len(MIGRATIONS)
    current = schema_version(conn)
    if current > known:
        raise SchemaVersionError(
            f"{path} was written by a newer version of Ember (chat schema version {current}; "
            f"this version understands up to {known}). Update Ember, or move the file away "
            "to start with an empty chat history."
        )
    for version in range(current + 1, known + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            MIGRATIONS[version - 1](conn)
            conn.execute(f"PRAGMA user_version = {version:d}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


def fts5_available(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.ember_fts5_probe USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    conn.execute("DROP TABLE temp.ember_fts5_probe")
    return True


# Messages are indexed only once they stop streaming: appending to a streaming message then
# costs no re-indexing of its whole text on every batch. Triggers are recreated only when one
# is missing: to change a body, rename it (or drop it in a migration).
_SEARCH_TRIGGERS = {
    "conversations_fts_insert": """
        CREATE TRIGGER conversations_fts_insert AFTER INSERT ON conversations BEGIN
            INSERT INTO conversations_fts(rowid, title) VALUES (new.seq, new.title);
        END""",
    "conversations_fts_delete": """
        CREATE TRIGGER conversations_fts_delete AFTER DELETE ON conversations BEGIN
            INSERT INTO conversations_fts(conversations_fts, rowid, title)
                VALUES ('delete', old.seq, old.title);
        END""",
    "conversations_fts_update": """
        CREATE TRIGGER conversations_fts_update AFTER UPDATE OF title ON conversations BEGIN
            INSERT INTO conversations_fts(conversations_fts, rowid, title)
                VALUES ('delete', old.seq, old.title);
            INSERT INTO conversations_fts(rowid, title) VALUES (new.seq, new.title);
        END""",
    "messages_fts_insert": """
        CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
        WHEN new.status != 'streaming' BEGIN
            INSERT INTO messages_fts(rowid, content) VALUES (new.seq, new.content);
        END""",
    "messages_fts_delete": """
        CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
        WHEN old.status != 'streaming' BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
                VALUES ('delete', old.seq, old.content);
        END""",
    "messages_fts_update": """
        CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, status ON messages
        WHEN old.status != 'streaming' OR new.status != 'streaming' BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
                SELECT 'delete', old.seq, old.content WHERE old.status != 'streaming';
            INSERT INTO messages_fts(rowid, content)
                SELECT new.seq, new.content WHERE new.status != 'streaming';
        END""",
}

_FTS_TABLES = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS conversations_fts USING fts5(title, "
    "content='conversations', content_rowid='seq', tokenize='unicode61 remove_diacritics 2')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(content, "
    "content='messages', content_rowid='seq', tokenize='unicode61 remove_diacritics 2')",
)

_REBUILD = (
    "INSERT INTO conversations_fts(conversations_fts) VALUES ('delete-all')",
    "INSERT INTO conversations_fts(rowid, title) SELECT seq, title FROM conversations",
    "INSERT INTO messages_fts(messages_fts) VALUES ('delete-all')",
    "INSERT INTO messages_fts(rowid, content) "
    "SELECT seq, content FROM messages WHERE status != 'streaming'",
)


def ensure_search_index(conn: sqlite3.Connection, use_fts: bool) -> None:
    """Create (and fill, if it was missing) the FTS5 index, or drop its triggers without FTS5.

    Without FTS5 the triggers must go, or every write would fail with "no such module: fts5".
    A file last opened without FTS5 has an index that is out of date: it is rebuilt here.
    """
    existing = {
        row[0]
        for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        if row[0] in _SEARCH_TRIGGERS
    }
    if existing == (set(_SEARCH_TRIGGERS) if use_fts else set()):
        # Nothing to change (the triggers and their tables are made together): no write
        # lock, so the history opens while another program holds it.
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if use_fts:
            for statement in _FTS_TABLES:
                conn.execute(statement)
            if existing != set(_SEARCH_TRIGGERS):
                for name, statement in _SEARCH_TRIGGERS.items():
                    conn.execute(f"DROP TRIGGER IF EXISTS {name}")
                    conn.execute(statement)
                for statement in _REBUILD:
                    conn.execute(statement)
        else:
            for name in existing:
                conn.execute(f"DROP TRIGGER {name}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
