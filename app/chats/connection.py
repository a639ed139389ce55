"""The one SQLite connection behind a ChatStore: opening, the lock, transactions, and SQLite's
errors turned into the store's own.

Opening checks the file (``PRAGMA quick_check``; a 0-byte file that holds nothing is a
truncated history, not a new one). A damaged file is moved aside and what it holds is
recovered into a fresh one (``app.chats.recovery``); the same happens when damage shows up
while the store is in use, and the call that met it raises ``StoreDamagedError``. Nothing is
ever written into a damaged file.

Another program holding the write lock is waited for (SQLite's busy handler retries for
``busy_timeout`` seconds); after that the call raises ``StoreLockedError`` and changed nothing.

The database and its -wal/-shm are readable by this user only (0600 on POSIX).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from app.chats import recovery, schema
from app.chats.models import (
    ChatStoreError,
    RecoveryReport,
    StoreDamagedError,
    StoreLockedError,
)
from app.config import make_private_dirs, private_file

# Seconds a call waits for another program's write lock before it gives up (a backup tool
# copying the file, a second Ember started by hand); SQLite retries within that time.
BUSY_TIMEOUT = 10.0


class StoreConnection:
    """The store's connection and its re-entrant ``lock``; ``read``/``write`` hold both."""

    def __init__(self, path: Path, *, use_fts: bool | None, busy_timeout: float) -> None:
        """Open the database (see ``ChatStore.__init__``)."""
        self.path = path
        self.busy_timeout = busy_timeout
        self.recovery: RecoveryReport | None = None
        self.has_fts = False
        self.lock = threading.RLock()
        self._use_fts = use_fts
        self._conn: sqlite3.Connection | None = None
        self._unusable: str | None = None  # why later calls fail (closed, or not recoverable)
        try:
            make_private_dirs(self.path.parent)
        except OSError as error:
            raise ChatStoreError(f"Cannot open the chat history {self.path}: {error}.") from error
        self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        was_empty = self.path.is_file() and self.path.stat().st_size == 0
        try:
            problem = recovery.damage_of(self.path, was_empty, self.busy_timeout)
        except sqlite3.Error as error:
            raise self._open_error(error) from error
        if problem is not None:
            try:
                damaged = recovery.set_aside(self.path)
            except OSError as error:
                raise self._not_kept(problem, error) from error
            return self._recover(damaged, problem)
        conn = self._connect()
        self._configure(conn)
        return conn

    def _connect(self) -> sqlite3.Connection:
        try:
            if not self.path.exists():
                # SQLite gives the -wal and -shm files the mode of the database file.
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            for file in recovery.related_files(self.path):
                private_file(file)
            return sqlite3.connect(
                self.path,
                timeout=self.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except (OSError, sqlite3.Error) as error:
            raise ChatStoreError(f"Cannot open the chat history {self.path}: {error}.") from error

    def _configure(self, conn: sqlite3.Connection) -> None:
        """Pragmas, migrations and the search index; closes ``conn`` if any of them fails."""
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            schema.migrate(conn, self.path)
            available = schema.fts5_available(conn)
            self.has_fts = available if self._use_fts is None else self._use_fts and available
            schema.ensure_search_index(conn, self.has_fts)
        except sqlite3.Error as error:
            conn.close()
            raise self._open_error(error) from error
        except BaseException:  # SchemaVersionError, or a migration that failed
            conn.close()
            raise

    def _open_error(self, error: sqlite3.Error) -> ChatStoreError:
        if recovery.is_locked(error):
            return StoreLockedError(
                f"Cannot open the chat history {self.path}: another program kept it locked for "
                f"{self.busy_timeout:g} s. Is another copy of Ember running?"
            )
        return ChatStoreError(f"Cannot open the chat history {self.path}: {error}.")

    def _not_kept(self, problem: str, error: OSError) -> ChatStoreError:
        return ChatStoreError(
            f"The chat history {self.path} is damaged ({problem}), and it could not be kept "
            f"aside: {error}. Nothing was changed; make room on the disk and restart Ember, or "
            "move the file away yourself."
        )

    def _recover(self, damaged: Path, problem: str) -> sqlite3.Connection:
        """Start a fresh file and fill it with what can be read from the ``damaged`` one."""
        conn = self._connect()
        self._configure(conn)
        try:
            self.recovery = recovery.salvage(damaged, conn, problem)
        except BaseException:
            conn.close()
            raise
        return conn

    @property
    def connection(self) -> sqlite3.Connection | None:
        return self._conn

    def close(self) -> None:
        """Close the database. Idempotent; any later call raises ``ChatStoreError``."""
        with self.lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._unusable = "The chat store is closed."

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock; SQLite's errors become the store's own."""
        with self.lock:
            if self._conn is None or self._unusable is not None:
                raise ChatStoreError(self._unusable or "The chat store is closed.")
            try:
                yield self._conn
            except sqlite3.Error as error:
                failure = self._failure(error)
                if failure is error:
                    raise
                raise failure from error

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """``read``, in a ``BEGIN IMMEDIATE`` transaction committed at the end."""
        with self.read() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    with suppress(sqlite3.Error):  # the error being raised says more
                        conn.execute("ROLLBACK")
                raise

    def _failure(self, error: sqlite3.Error) -> Exception:
        """What a call that hit ``error`` raises. Hold the lock."""
        if recovery.is_locked(error):
            return StoreLockedError(
                f"The chat history is in use by another program (another copy of Ember, a "
                f"backup or a sync tool?), which kept it locked for {self.busy_timeout:g} s. "
                "Nothing was changed; try again in a moment."
            )
        if recovery.is_damage(error):
            return self._recover_in_session(recovery.describe(error))
        if recovery.result_code(error) in recovery.DISK_CODES:
            return ChatStoreError(
                f"The chat history {self.path} cannot be used: {error}. Nothing was changed; "
                "check that the disk has room and the file may be written, then try again."
            )
        return error  # a bug in a query: stays what it is

    def _recover_in_session(self, problem: str) -> ChatStoreError:
        """The file went bad while open: keep a copy of it as it is, stop using it, recover as
        at open, and tell the caller."""
        conn = self._conn
        assert conn is not None
        try:
            damaged = recovery.copy_aside(self.path)
        except OSError as error:
            # No copy: refuse every call rather than write into it; the next start keeps it
            # aside (a rename needs no room) and recovers it.
            failure = self._not_kept(problem, error)
            self._unusable = str(failure)
            return failure
        self._conn = None
        with suppress(sqlite3.Error):
            conn.close()
        try:
            recovery.discard(self.path)
            self._conn = self._recover(damaged, problem)
        except (OSError, ChatStoreError) as error:
            self._unusable = str(error)
            return error if isinstance(error, ChatStoreError) else ChatStoreError(str(error))
        assert self.recovery is not None
        return StoreDamagedError(f"{self.recovery.message} Try again.", self.recovery)
