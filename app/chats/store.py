"""ChatStore: conversations and their message trees in one SQLite file (``EMBER_HOME/chats.db``).

Threads: one connection, opened with ``check_same_thread=False`` and guarded by a re-entrant
lock; every public method takes the lock for its whole duration, so the store may be shared by
the GUI thread and a background executor. Calls are short (milliseconds), which is why a lock is
simpler and as fast as a connection per thread here: SQLite serializes writers anyway, and
``close()`` can close the one connection from any thread.

Durability: WAL with ``synchronous=NORMAL``. Every write is its own ``BEGIN IMMEDIATE``
transaction, so what a call wrote survives the process being killed right after it returns
(only an OS crash or power cut may lose the last transactions). Opening checks the file; a
damaged one is kept aside and recovered, and another program's lock is waited for, then
reported (``app.chats.connection``). Every error a call raises on purpose is a ``ChatStoreError``.

The message tree: each message has a parent (None for a first message). Versions of a message,
from editing or regenerating, are siblings (same parent), ordered by ``seq``. A conversation's
``current_leaf_id`` picks the branch on screen: the path from the root to that message.
"""

from __future__ import annotations

import enum
import json
import sqlite3
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from app.chats import attachments, search, transfer, tree
from app.chats.connection import BUSY_TIMEOUT, StoreConnection
from app.chats.models import (
    FINAL_STATUSES,
    ROLES,
    STATUSES,
    Conversation,
    Message,
    NotFoundError,
    RecoveryReport,
    Role,
    SearchHit,
    Status,
)
from app.chats.rows import (
    CONVERSATION_COLUMNS,
    MESSAGE_COLUMNS,
    conversation_from_row,
    dumps,
    message_from_row,
)


class _Default(enum.Enum):
    CURRENT_LEAF = "current leaf"
    UNSET = "unset"


CURRENT_LEAF = _Default.CURRENT_LEAF
_PURGED = "SELECT id FROM conversations WHERE deleted_at IS NOT NULL AND deleted_at <= ?"
_UNSET = _Default.UNSET


def _new_id() -> str:
    return str(uuid.uuid4())


class ChatStore:
    """The conversation history. Safe to call from several threads (see the module docstring).

    Missing ids raise ``NotFoundError``; invalid arguments raise ``ValueError``.
    ``has_fts`` tells whether search uses SQLite FTS5 (word-prefix matching) or the LIKE
    fallback (substring matching, case-insensitive for ASCII only).
    """

    def __init__(
        self, path: Path, *, use_fts: bool | None = None, busy_timeout: float = BUSY_TIMEOUT
    ) -> None:
        """Open (creating and migrating as needed) the database at ``path``.

        ``use_fts=None`` uses FTS5 when this SQLite has it; ``False`` forces the LIKE search.
        ``busy_timeout``: seconds a call waits for another program's write lock.
        A damaged file is kept aside and what it holds is recovered into a fresh one
        (``recovery`` says so). Raises ``SchemaVersionError`` for a file from a newer Ember,
        ``StoreLockedError`` when another program keeps it locked, and ``ChatStoreError`` when
        it cannot be opened at all.
        """
        self.path = Path(path)
        self._db = StoreConnection(self.path, use_fts=use_fts, busy_timeout=busy_timeout)
        self._lock = self._db.lock
        self._read = self._db.read  # the connection under the lock; errors made the store's
        self._write = self._db.write  # the same, in a transaction committed at the end
        self._last_time = 0.0

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def recovery(self) -> RecoveryReport | None:
        """Set when the file was found damaged (at open or since): show ``.message`` to the
        user. The history now lives in a fresh file; the damaged one was kept aside."""
        return self._db.recovery

    @property
    def has_fts(self) -> bool:
        return self._db.has_fts

    @property
    def _conn(self) -> sqlite3.Connection | None:
        return self._db.connection

    def close(self) -> None:
        """Close the database. Idempotent; any later call raises ``ChatStoreError``."""
        self._db.close()

    def __enter__(self) -> ChatStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- conversations -------------------------------------------------------------------------

    def create_conversation(
        self,
        title: str = "New chat",
        model: str | None = None,
        system_prompt: str = "",
        settings: dict[str, Any] | None = None,
    ) -> Conversation:
        """A new, empty conversation."""
        settings_json = dumps(settings or {}, "settings")
        conversation_id = _new_id()
        with self._write() as conn:
            now = self._now()
            conn.execute(
                "INSERT INTO conversations (id, title, created_at, updated_at, model, "
                "system_prompt, settings) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, title, now, now, model, system_prompt, settings_json),
            )
            return self._get_conversation(conn, conversation_id)

    def get_conversation(self, conversation_id: str) -> Conversation:
        """The conversation, also when it is soft-deleted (check ``is_deleted``)."""
        with self._read() as conn:
            return self._get_conversation(conn, conversation_id)

    def list_conversations(self, limit: int | None = None) -> list[Conversation]:
        """Conversations that are not deleted, most recently active first."""
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.deleted_at IS NULL "
                "ORDER BY c.updated_at DESC, c.seq DESC LIMIT ?",
                (-1 if limit is None else limit,),
            ).fetchall()
        return [conversation_from_row(row) for row in rows]

    def rename_conversation(self, conversation_id: str, title: str) -> Conversation:
        """Set the title (surrounding whitespace removed; must not be empty)."""
        title = title.strip()
        if not title:
            raise ValueError("A conversation title must not be empty.")
        with self._write() as conn:
            self._update_conversation(conn, conversation_id, "title = ?", (title,))
            return self._get_conversation(conn, conversation_id)

    def update_conversation_settings(
        self,
        conversation_id: str,
        *,
        model: str | _Default | None = _UNSET,
        system_prompt: str | _Default = _UNSET,
        settings: dict[str, Any] | _Default = _UNSET,
    ) -> Conversation:
        """Change only the given fields. ``settings`` replaces the whole dict."""
        assignments: list[str] = []
        values: list[Any] = []
        if not isinstance(model, _Default):
            assignments.append("model = ?")
            values.append(model)
        if not isinstance(system_prompt, _Default):
            assignments.append("system_prompt = ?")
            values.append(system_prompt)
        if not isinstance(settings, _Default):
            assignments.append("settings = ?")
            values.append(dumps(settings, "settings"))
        with self._write() as conn:
            if assignments:
                self._update_conversation(conn, conversation_id, ", ".join(assignments), values)
            return self._get_conversation(conn, conversation_id)

    def delete_conversation(self, conversation_id: str) -> None:
        """Soft delete: hidden from lists and search until restored or purged."""
        with self._write() as conn:
            self._get_conversation(conn, conversation_id)
            conn.execute(
                "UPDATE conversations SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL",
                (time.time(), conversation_id),
            )

    def restore_conversation(self, conversation_id: str) -> Conversation:
        """Undo ``delete_conversation``."""
        with self._write() as conn:
            self._update_conversation(conn, conversation_id, "deleted_at = NULL", ())
            return self._get_conversation(conn, conversation_id)

    def purge_deleted(self, older_than_seconds: float = 0.0) -> int:
        """Delete for good the chats soft-deleted that long ago, and what only they used of the
        attachments (``app.chats.attachments``); their count."""
        values = (time.time() - older_than_seconds,)
        with self._lock:  # until the files are gone: no message may refer to one meanwhile
            with self._write() as conn:
                removal = attachments.of_purged(conn, _PURGED, values)
                count = conn.execute(f"DELETE FROM conversations WHERE id IN ({_PURGED})", values)
                removal.check(conn, attachments.MAX_REMOVALS)
            attachments.remove(removal, attachments.MAX_REMOVALS)
        return count.rowcount

    def remove_unused_attachments(self) -> int:
        """What earlier purges left to remove, all of it (a worker thread); the count. Each
        batch holds the lock for its own check and unlinks only: a GUI-thread call waits for
        one batch at most, never for the whole sweep."""
        total = 0
        while True:
            batch = max(1, attachments.MAX_REMOVALS)
            with self._read() as conn:
                removal = attachments.read_leftovers()
                if not removal.files and not removal.indexes:
                    return total
                removal.check(conn, batch)  # each batch leaves the list shorter
                total += attachments.remove(removal, batch)

    # -- messages ------------------------------------------------------------------------------

    def add_message(
        self,
        conversation_id: str,
        role: Role,
        content: str,
        *,
        parent_id: str | _Default | None = CURRENT_LEAF,
        status: Status = "complete",
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        """Add a message under ``parent_id`` (default: the current leaf; None: a new root).

        The new message becomes the current leaf and the conversation's ``updated_at`` moves.
        """
        if role not in ROLES:
            raise ValueError(f"Unknown role {role!r}; expected one of {', '.join(ROLES)}.")
        if status not in STATUSES:
            raise ValueError(f"Unknown status {status!r}; expected one of {', '.join(STATUSES)}.")
        metadata_json = dumps(metadata or {}, "metadata")
        with self._write() as conn:
            conversation = self._get_conversation(conn, conversation_id)
            if isinstance(parent_id, _Default):
                parent_id = conversation.current_leaf_id
            elif parent_id is not None:
                parent = self._get_message(conn, parent_id)
                if parent.conversation_id != conversation_id:
                    raise ValueError(
                        f"Message {parent_id!r} belongs to another conversation "
                        f"({parent.conversation_id!r}), not {conversation_id!r}."
                    )
            message_id = self._insert_message(
                conn,
                conversation_id,
                parent_id=parent_id,
                role=role,
                content=content,
                status=status,
                metadata_json=metadata_json,
            )
            return self._get_message(conn, message_id)

    def begin_streaming_message(
        self,
        conversation_id: str,
        *,
        parent_id: str | _Default | None = CURRENT_LEAF,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        """An empty assistant message with status "streaming", made the current leaf.

        Regenerating an answer is this with ``parent_id`` = the question: the new answer becomes
        a sibling of the old ones.
        """
        return self.add_message(
            conversation_id,
            "assistant",
            "",
            parent_id=parent_id,
            status="streaming",
            metadata=metadata,
        )

    def append_to_message(self, message_id: str, text: str) -> None:
        """Append streamed text to a streaming message. Call it with batches (a few per second)."""
        if not text:
            return
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE messages SET content = content || ? WHERE id = ? AND status = 'streaming'",
                (text, message_id),
            )
            if cursor.rowcount == 0:
                message = self._get_message(conn, message_id)
                raise ValueError(
                    f"Message {message_id!r} is {message.status}, not streaming; "
                    "only a streaming message can be appended to."
                )

    def finish_message(
        self,
        message_id: str,
        status: Status = "complete",
        metadata: dict[str, Any] | None = None,
        content: str | None = None,
    ) -> Message:
        """End a streaming message: set its final status, merge ``metadata`` into its metadata,
        and replace its text if ``content`` is given. Raises ValueError if it is not streaming.
        """
        if status not in FINAL_STATUSES:
            raise ValueError(
                f"A message finishes as one of {', '.join(FINAL_STATUSES)}, not {status!r}."
            )
        with self._write() as conn:
            message = self._get_message(conn, message_id)
            if message.status != "streaming":
                raise ValueError(f"Message {message_id!r} is {message.status}, not streaming.")
            merged = {**message.metadata, **(metadata or {})}
            conn.execute(
                "UPDATE messages SET status = ?, metadata = ?, content = COALESCE(?, content) "
                "WHERE id = ?",
                (status, dumps(merged, "metadata"), content, message_id),
            )
            self._touch(conn, message.conversation_id)
            return self._get_message(conn, message_id)

    def add_sibling(
        self, message_id: str, content: str, metadata: dict[str, Any] | None = None
    ) -> Message:
        """A new version of a message (same parent and role): the edit of a question.

        The new version becomes the current leaf; the old one keeps its own continuation.
        """
        metadata_json = dumps(metadata or {}, "metadata")
        with self._write() as conn:
            original = self._get_message(conn, message_id)
            new_id = self._insert_message(
                conn,
                original.conversation_id,
                parent_id=original.parent_id,
                role=original.role,
                content=content,
                status="complete",
                metadata_json=metadata_json,
            )
            return self._get_message(conn, new_id)

    def get_message(self, message_id: str) -> Message:
        with self._read() as conn:
            return self._get_message(conn, message_id)

    def delete_message(self, message_id: str) -> str | None:
        """Delete a message and everything below it; returns the new current leaf id.

        If the branch on screen went through it, the view moves to the previous sibling's
        latest continuation (else the next sibling's, else the parent). Attached files stay.
        """
        with self._write() as conn:
            message = self._get_message(conn, message_id)
            conversation = self._get_conversation(conn, message.conversation_id)
            leaf = conversation.current_leaf_id
            in_subtree = (
                leaf is not None
                and conn.execute(
                    f"{tree.SUBTREE} SELECT 1 FROM subtree WHERE id = ?", (message_id, leaf)
                ).fetchone()
            )
            if in_subtree:
                leaf = tree.fallback_leaf(conn, message)
                conn.execute(
                    "UPDATE conversations SET current_leaf_id = ? WHERE id = ?",
                    (leaf, message.conversation_id),
                )
            conn.execute(
                f"DELETE FROM messages WHERE id IN ({tree.SUBTREE} SELECT id FROM subtree)",
                (message_id,),
            )
            self._touch(conn, message.conversation_id)
            return leaf

    def active_branch(self, conversation_id: str) -> list[Message]:
        """The messages on screen, root first, ending at the current leaf. One query."""
        with self._read() as conn:
            rows = conn.execute(
                f"""
                WITH RECURSIVE path(id, depth) AS (
                    SELECT current_leaf_id, 0 FROM conversations
                        WHERE id = ? AND current_leaf_id IS NOT NULL
                    UNION ALL
                    SELECT m.parent_id, path.depth + 1 FROM path
                        JOIN messages m ON m.id = path.id WHERE m.parent_id IS NOT NULL
                )
                SELECT {MESSAGE_COLUMNS} FROM path JOIN messages m ON m.id = path.id
                ORDER BY path.depth DESC
                """,
                (conversation_id,),
            ).fetchall()
            if not rows:
                self._get_conversation(conn, conversation_id)
        return [message_from_row(row) for row in rows]

    def siblings(self, message_id: str) -> list[Message]:
        """All versions of a message (itself included), oldest first."""
        with self._read() as conn:
            message = self._get_message(conn, message_id)
            rows = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.conversation_id = ? "
                "AND m.parent_id IS ? ORDER BY m.seq",
                (message.conversation_id, message.parent_id),
            ).fetchall()
        return [message_from_row(row) for row in rows]

    def switch_to_sibling(self, message_id: str) -> list[Message]:
        """Show this version: the current leaf becomes the newest message below it (or itself),
        so each version comes back with its latest continuation. Returns the new active branch.
        """
        with self._lock:
            with self._write() as conn:
                message = self._get_message(conn, message_id)
                conn.execute(
                    "UPDATE conversations SET current_leaf_id = ? WHERE id = ?",
                    (tree.latest_leaf(conn, message_id), message.conversation_id),
                )
            return self.active_branch(message.conversation_id)

    def message_count(self, conversation_id: str) -> int:
        """Messages in the whole tree, all branches."""
        with self._read() as conn:
            count = int(
                conn.execute(
                    "SELECT COUNT(*) FROM messages WHERE conversation_id = ?", (conversation_id,)
                ).fetchone()[0]
            )
            if count == 0:
                self._get_conversation(conn, conversation_id)
        return count

    def recover_interrupted(self) -> list[Message]:
        """Mark messages left "streaming" by a crash as "stopped" (text kept; metadata gets
        ``"interrupted": true``) and return them. Call once at startup, before any generation.
        """
        with self._write() as conn:
            rows = conn.execute(
                "SELECT id, metadata FROM messages WHERE status = 'streaming' ORDER BY seq"
            ).fetchall()
            for message_id, metadata in rows:
                conn.execute(
                    "UPDATE messages SET status = 'stopped', metadata = ? WHERE id = ?",
                    (dumps({**json.loads(metadata), "interrupted": True}, "metadata"), message_id),
                )
            return [self._get_message(conn, message_id) for message_id, _ in rows]

    # -- search --------------------------------------------------------------------------------

    def search(self, query: str, limit: int | None = 50) -> list[SearchHit]:
        """Conversations (not deleted) whose title or a message matches every word of
        ``query``, most recently active first. Any text is safe; no words means no hits.
        A hit's message is the newest matching message of that conversation.
        """
        with self._read() as conn:
            return search.find(conn, query, use_fts=self.has_fts, limit=limit)

    # -- export / import -----------------------------------------------------------------------

    def export_markdown(self, conversation_id: str) -> str:
        """The branch on screen as Markdown: title, model, system prompt, one heading per role."""
        with self._read():
            conversation = self.get_conversation(conversation_id)
            branch = self.active_branch(conversation_id)
        return transfer.to_markdown(conversation, branch)

    def export_json(self, conversation_id: str) -> dict[str, Any]:
        """The whole tree as a JSON-ready dict (see ``app.chats.transfer`` for the format)."""
        with self._read() as conn:
            conversation = self._get_conversation(conn, conversation_id)
            rows = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.conversation_id = ? "
                "ORDER BY m.seq",
                (conversation_id,),
            ).fetchall()
        return transfer.to_json(conversation, [message_from_row(row) for row in rows])

    def import_json(self, data: object) -> Conversation:
        """Add a conversation from ``export_json`` output, with new ids (so importing twice
        gives two copies). Times, branches, sibling order and the branch on screen are kept.
        Raises ValueError naming the first problem in ``data``.
        """
        imported = transfer.parse_import(data)
        with self._write() as conn:
            conversation_id = self._insert_imported(conn, imported)
            return self._get_conversation(conn, conversation_id)

    # -- helpers (caller holds the lock) ----------------------------------------------------------

    def _insert_imported(
        self, conn: sqlite3.Connection, imported: transfer.ImportedConversation
    ) -> str:
        """Write an imported conversation with new ids (importing twice gives two copies); its id.
        Times, branches, sibling order and the branch on screen are kept."""
        conversation_id = _new_id()
        new_ids = {message.old_id: _new_id() for message in imported.messages}
        conn.execute(
            "INSERT INTO conversations (id, title, created_at, updated_at, model, "
            "system_prompt, settings) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                conversation_id,
                imported.title,
                imported.created_at,
                imported.updated_at,
                imported.model,
                imported.system_prompt,
                dumps(imported.settings, "conversation.settings"),
            ),
        )
        conn.executemany(
            "INSERT INTO messages (id, conversation_id, parent_id, role, content, "
            "created_at, status, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    new_ids[message.old_id],
                    conversation_id,
                    None if message.old_parent_id is None else new_ids[message.old_parent_id],
                    message.role,
                    message.content,
                    message.created_at,
                    message.status,
                    dumps(message.metadata, "metadata"),
                )
                for message in imported.messages
            ],
        )
        leaf = imported.current_leaf_old_id
        conn.execute(
            "UPDATE conversations SET current_leaf_id = ? WHERE id = ?",
            (None if leaf is None else new_ids[leaf], conversation_id),
        )
        return conversation_id

    def _get_conversation(self, conn: sqlite3.Connection, conversation_id: str) -> Conversation:
        row = conn.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.id = ?",
            (conversation_id,),
        ).fetchone()
        if row is None:
            raise NotFoundError(f"No conversation with id {conversation_id!r}.")
        return conversation_from_row(row)

    def _get_message(self, conn: sqlite3.Connection, message_id: str) -> Message:
        row = conn.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.id = ?", (message_id,)
        ).fetchone()
        if row is None:
            raise NotFoundError(f"No message with id {message_id!r}.")
        return message_from_row(row)

    def _update_conversation(
        self,
        conn: sqlite3.Connection,
        conversation_id: str,
        assignments: str,
        values: Sequence[Any],
    ) -> None:
        cursor = conn.execute(
            f"UPDATE conversations SET {assignments} WHERE id = ?", (*values, conversation_id)
        )
        if cursor.rowcount == 0:
            raise NotFoundError(f"No conversation with id {conversation_id!r}.")

    def _now(self) -> float:
        """``time.time()``, but strictly increasing, so that two quick writes on a coarse clock
        (Windows) still order the sidebar and the messages as they happened. Hold the lock.
        """
        self._last_time = max(time.time(), self._last_time + 1e-6)
        return self._last_time

    def _touch(self, conn: sqlite3.Connection, conversation_id: str) -> None:
        conn.execute(
            "UPDATE conversations SET updated_at = ? WHERE id = ?", (self._now(), conversation_id)
        )

    def _insert_message(
        self,
        conn: sqlite3.Connection,
        conversation_id: str,
        *,
        parent_id: str | None,
        role: str,
        content: str,
        status: str,
        metadata_json: str,
    ) -> str:
        """Insert a message, make it the current leaf and mark the conversation active."""
        message_id = _new_id()
        now = self._now()
        conn.execute(
            "INSERT INTO messages (id, conversation_id, parent_id, role, content, created_at, "
            "status, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (message_id, conversation_id, parent_id, role, content, now, status, metadata_json),
        )
        conn.execute(
            "UPDATE conversations SET current_leaf_id = ?, updated_at = ? WHERE id = ?",
            (message_id, now, conversation_id),
        )
        return message_id
