"""A damaged chats.db: tell it on open, keep it aside, recover what can be read.

Python's sqlite3 has no ``.recover`` (a feature of the sqlite3 shell). So the tables are read
from a scratch copy of the damaged file by rowid (``seq``) ranges: when a read fails, the next
readable rowid is found by probing ever further ahead and then bisecting back, and reading goes
on from there, so a bad page costs the rows on it, not the rest of the table. The damaged file
itself is only read (the integrity check), moved and copied: nothing is ever written into it.

What comes back keeps its ids, times, branches and order. A message whose chat row was lost
goes into a chat titled ``RECOVERED_TITLE`` (same id); one whose parent was lost becomes a
first message; a chat whose current message was lost shows its newest one.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from app.chats.models import RECOVERED_TITLE, RecoveryReport
from app.config import private_file

log = logging.getLogger(__name__)

SUFFIXES = ("-wal", "-shm")  # SQLite's files beside a WAL database

# Primary result codes (https://sqlite.org/rescode.html); extended codes keep them in the low byte.
_PERM, _BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN = 3, 5, 6, 8, 10, 11, 13, 14
_NOTADB = 26
DISK_CODES = frozenset({_PERM, _READONLY, _IOERR, _FULL, _CANTOPEN})

_LOWEST = -(2**63)
_HIGHEST = 2**63 - 1


def result_code(error: sqlite3.Error) -> int | None:
    """SQLite's primary result code of ``error`` (None when SQLite did not give one)."""
    code = getattr(error, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


def is_locked(error: sqlite3.Error) -> bool:
    """Another connection held the lock for longer than the busy timeout."""
    return result_code(error) in (_BUSY, _LOCKED) or "database is locked" in str(error)


def is_damage(error: sqlite3.Error) -> bool:
    """The file is not a database, or SQLite found it malformed."""
    return result_code(error) in (_CORRUPT, _NOTADB) or any(
        words in str(error) for words in ("malformed", "not a database")
    )


def describe(error: sqlite3.Error) -> str:
    if result_code(error) == _NOTADB or "not a database" in str(error):
        return "it is not an SQLite database"
    return f"SQLite: {error}"


def damage_of(path: Path, was_empty: bool, busy_timeout: float) -> str | None:
    """Why the database at ``path`` is damaged, or None when it is fine (or absent).

    Read only: a read-write connection would checkpoint its WAL into it on closing.
    ``was_empty``: the file had 0 bytes; with nothing in it (no WAL holding its tables either)
    that is a truncated history, not a new one. Errors other than damage (a lock) are raised.
    """
    if not path.exists():
        return None
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=busy_timeout)
    try:
        if was_empty and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            return "the file was empty (0 bytes)"
        rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as error:
        if is_damage(error):
            return describe(error)
        raise
    finally:
        conn.close()
    if rows != [("ok",)]:
        first = str(rows[0][0]) if rows else "no answer"
        more = f" (and {len(rows) - 1} more problems)" if len(rows) > 1 else ""
        return f"the integrity check found: {first[:200]}{more}"
    return None


def set_aside(path: Path) -> Path:
    """Move ``path`` and its -wal/-shm to ``<name>.damaged-<time>`` (+ the same suffixes, so
    SQLite pairs them again when someone opens it). Returns the new path of the database.
    No connection may be open on ``path``."""
    aside = _aside_name(path)
    # The WAL goes first: a WAL left without its database could be replayed into a new one.
    for source, target in reversed(
        list(zip(related_files(path), related_files(aside), strict=True))
    ):
        if source.exists():
            os.replace(source, target)
            private_file(target)
    return aside


def copy_aside(path: Path) -> Path:
    """Like ``set_aside``, but copies, for a file still open: closing the last connection to
    a WAL database checkpoints into it, and the kept file must be the damaged one as it was.
    Call ``discard(path)`` once the connection is closed."""
    aside = _aside_name(path)
    copied: list[Path] = []
    try:
        for source, target in zip(related_files(path), related_files(aside), strict=True):
            if source.exists():
                shutil.copyfile(source, target)
                copied.append(target)
                private_file(target)
    except OSError:
        for target in copied:
            target.unlink(missing_ok=True)
        raise
    return aside


def discard(path: Path) -> None:
    """Delete ``path`` and its -wal/-shm (a copy was kept), the WAL first."""
    for file in reversed(related_files(path)):
        file.unlink(missing_ok=True)


def _aside_name(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while any(file.exists() for file in related_files(aside)):
        n += 1
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    return aside


def salvage(damaged: Path, into: sqlite3.Connection, reason: str) -> RecoveryReport:
    """Copy what can be read from the ``damaged`` file (kept aside) into the fresh store open
    on ``into`` (migrated, empty). Never raises for what it cannot read: the report says."""
    salvager = _Salvager(into)
    error: str | None = None
    if damaged.exists() and damaged.stat().st_size > 0:
        with tempfile.TemporaryDirectory(prefix=".chats-recovery-", dir=damaged.parent) as tmp:
            copy = Path(tmp) / "chats.db"
            try:
                shutil.copyfile(damaged, copy)
                if Path(f"{damaged}-wal").exists():
                    shutil.copyfile(f"{damaged}-wal", f"{copy}-wal")
            except OSError as e:
                error = f"it could not be copied: {e}"
            else:
                source = sqlite3.connect(copy, isolation_level=None)
                try:
                    error = salvager.run(source)
                finally:
                    source.close()
    report = RecoveryReport(
        reason=reason,
        damaged_path=damaged,
        conversations=salvager.conversations,
        messages=salvager.messages,
        unreadable=salvager.unreadable,
        placeholder_conversations=salvager.placeholders,
        error=error,
    )
    log.warning("%s", report.message)
    return report


class _Salvager:
    """Reads the damaged copy and writes the fresh store, counting what it could not use."""

    def __init__(self, into: sqlite3.Connection) -> None:
        self.into = into
        self.conversations = 0
        self.messages = 0
        self.placeholders = 0
        self.unreadable = 0

    def run(self, source: sqlite3.Connection) -> str | None:
        """Returns why a whole table could not be read, if one could not."""
        source.text_factory = _lenient_text
        problem: str | None = None
        tables: dict[str, list[dict[str, Any]]] = {}
        for table in ("conversations", "messages"):
            try:
                tables[table] = self._read_table(source, table)
            except sqlite3.DatabaseError as error:
                tables[table] = []
                problem = problem or describe(error)
        self.into.execute("BEGIN IMMEDIATE")
        try:
            self._write(tables["conversations"], tables["messages"])
        except BaseException:
            self.into.execute("ROLLBACK")
            raise
        self.into.execute("COMMIT")
        return problem

    # -- reading ----------------------------------------------------------------------------

    def _read_table(self, source: sqlite3.Connection, table: str) -> list[dict[str, Any]]:
        """Every row that can be read, in ``seq`` order, as dicts of the columns both files
        have. Raises only when the table cannot be read at all (schema damaged)."""
        wanted = [str(row[1]) for row in self.into.execute(f"PRAGMA table_info({table})")]
        have = {str(row[1]) for row in source.execute(f"PRAGMA table_info({table})")}
        columns = ["seq", *(c for c in wanted if c in have and c != "seq")]
        select = f"SELECT {', '.join(columns)} FROM {table} WHERE seq >= ? ORDER BY seq"
        source.execute(f"{select} LIMIT 0", (0,)).fetchall()  # a missing table raises here
        rows: list[dict[str, Any]] = []
        start: int | None = _LOWEST
        while start is not None:
            try:
                for row in source.execute(select, (start,)):
                    rows.append(dict(zip(columns, row, strict=True)))
                    start = int(row[0]) + 1
                return rows
            except sqlite3.DatabaseError:
                self.unreadable += 1
                start = _next_readable(source, f"{select} LIMIT 1", start)
        return rows

    # -- writing ----------------------------------------------------------------------------

    def _write(self, conversations: list[dict[str, Any]], messages: list[dict[str, Any]]) -> None:
        leaves: dict[str, Any] = {}
        kept: set[str] = set()
        for read in conversations:
            leaves[read["id"]] = read.get("current_leaf_id")
            row = {**read, "current_leaf_id": None, "settings": _json_object(read.get("settings"))}
            if self._insert("conversations", row):
                kept.add(row["id"])
                self.conversations += 1
        self._add_placeholders(messages, kept)
        newest: dict[str, str] = {}  # conversation -> its newest recovered message
        written: dict[str, str] = {}  # message -> its conversation
        for read in messages:
            conversation_id = read["conversation_id"]
            row = {
                **read,
                "metadata": _json_object(read.get("metadata")),
                "content": _text(read.get("content")),
            }
            if written.get(read.get("parent_id") or "") != conversation_id:
                row["parent_id"] = None  # its parent was lost
            if self._insert("messages", row):
                written[row["id"]] = conversation_id
                newest[conversation_id] = row["id"]
                self.messages += 1
        for conversation_id in kept:
            leaf = leaves.get(conversation_id)
            if written.get(leaf or "") != conversation_id:
                leaf = newest.get(conversation_id)
            if leaf is not None:
                self.into.execute(
                    "UPDATE conversations SET current_leaf_id = ? WHERE id = ?",
                    (leaf, conversation_id),
                )

    def _add_placeholders(self, messages: list[dict[str, Any]], kept: set[str]) -> None:
        """A chat for the messages whose own chat row was lost."""
        orphans: dict[str, list[float]] = {}
        for row in messages:
            created = row.get("created_at")
            if row.get("conversation_id") not in kept and isinstance(created, (int, float)):
                orphans.setdefault(str(row["conversation_id"]), []).append(float(created))
        for conversation_id, times in orphans.items():
            row = {
                "id": conversation_id,
                "title": RECOVERED_TITLE,
                "created_at": min(times),
                "updated_at": max(times),
            }
            if self._insert("conversations", row):
                kept.add(conversation_id)
                self.conversations += 1
                self.placeholders += 1

    def _insert(self, table: str, row: dict[str, Any]) -> bool:
        """Insert one row; a row that breaks a constraint (garbage read back) is counted."""
        names = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        try:
            self.into.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", list(row.values()))
        except (sqlite3.IntegrityError, sqlite3.DataError, sqlite3.InterfaceError, OverflowError):
            self.unreadable += 1
            return False
        return True


def _next_readable(source: sqlite3.Connection, probe: str, failed: int) -> int | None:
    """The smallest rowid above ``failed`` from which reading works again, or None.

    Reading from a rowid fails exactly when the first row at or after it lies on a bad page,
    so this probes ``failed + 1, + 2, + 4, …`` until one works, then bisects back to the
    first that does.
    """

    def works(start: int) -> bool:
        try:
            source.execute(probe, (start,)).fetchall()
        except sqlite3.DatabaseError:
            return False
        return True

    step = 1
    low = failed  # the last start known to fail
    while True:
        high = min(failed + step, _HIGHEST)
        if works(high):
            break
        if high == _HIGHEST:
            return None
        low = high
        step *= 2
    while high - low > 1:
        middle = (low + high) // 2
        if works(middle):
            high = middle
        else:
            low = middle
    return high


def _json_object(value: object) -> str:
    """A JSON-object column as read back: kept when it is one, else ``{}`` (the row stays)."""
    try:
        parsed = json.loads(value) if isinstance(value, (str, bytes)) else None
    except ValueError:
        parsed = None
    return value if isinstance(parsed, dict) and isinstance(value, str) else "{}"


def _text(value: object) -> object:
    """Text read back as bytes (a damaged type tag) becomes text; anything else is left to
    the table's constraints."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _lenient_text(data: bytes) -> str:
    # Bad UTF-8 in a message costs a few characters, not the whole row.
    return data.decode("utf-8", errors="replace")


def related_files(path: Path) -> tuple[Path, ...]:
    """``path`` and the -wal/-shm files SQLite keeps beside it."""
    return (path, *(Path(f"{path}{suffix}") for suffix in SUFFIXES))
