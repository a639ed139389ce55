"""Stored responses (``store: true``, OpenAI's default): one SQLite file in EMBER_HOME.

``EMBER_HOME/responses.db`` (0600, like everything there: it holds prompts and answers) keeps,
per response, its input items, the response object (with its output items) and the id of the
response it continued. ``previous_response_id`` walks that chain back, so a conversation is
stored once, however long it grows. The store is bounded: responses older than ``max_age``
(30 days, as OpenAI keeps them) are neither read nor kept, and each write removes the oldest
responses past ``max_count`` or ``max_bytes``; a continuation whose chain lost a response
is a 404 naming it. Ids are looked up as SQL parameters, never as paths.

Reads and writes block, so the routes call them through :class:`ResponseKeeper`, which runs
them on worker threads and makes every read wait for the writes already started (a finishing
answer starts its write before its last event goes out, and a client continues at once).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.config import ember_home, make_private_dirs, private_file
from app.engine.gguf_format import MIB

log = logging.getLogger(__name__)

DAY = 24 * 3600.0
FILE_NAME = "responses.db"
BUSY_TIMEOUT = 10.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    previous_id TEXT,
    created REAL NOT NULL,
    size INTEGER NOT NULL,
    input TEXT NOT NULL,
    response TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_created ON responses (created);
"""


@dataclass(frozen=True, slots=True)
class StoreLimits:
    max_count: int = 10_000
    max_bytes: int = 256 * MIB
    max_age: float = 30 * DAY
    # a conversation read back for previous_response_id (its whole chain) at most
    max_conversation_bytes: int = 64 * MIB


class MissingResponseError(LookupError):
    """A response of the chain is not stored (never was, deleted, or expired)."""

    def __init__(self, response_id: str) -> None:
        super().__init__(response_id)
        self.response_id = response_id


class ConversationTooLargeError(ValueError):
    pass


class ResponseStore:
    """Blocking access to the file; ``path=None``: EMBER_HOME's, looked up at each use."""

    def __init__(
        self,
        path: Path | None = None,
        limits: StoreLimits | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._path = path
        self.limits = limits or StoreLimits()
        self._clock = clock
        self._lock = threading.Lock()  # one writer at a time in this process

    @property
    def path(self) -> Path:
        return self._path or ember_home() / FILE_NAME

    # ---- writes ---------------------------------------------------------------------------

    def put(
        self, previous_id: str | None, input_items: list[dict[str, Any]], response: dict[str, Any]
    ) -> bool:
        """Keep ``response`` (False if it alone is larger than the store may be)."""
        input_json = json.dumps(input_items, ensure_ascii=False, separators=(",", ":"))
        response_json = json.dumps(response, ensure_ascii=False, separators=(",", ":"))
        size = len(input_json.encode()) + len(response_json.encode())
        if size > self.limits.max_bytes:
            log.warning("Response %s (%d bytes) is too large to store", response["id"], size)
            return False
        with self._lock, self._connect() as conn, conn:
            conn.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?)",
                (response["id"], previous_id, self._clock(), size, input_json, response_json),
            )
            self._prune(conn)
        return True

    def delete(self, response_id: str) -> bool:
        with self._lock, self._connect() as conn, conn:
            cursor = conn.execute(
                "DELETE FROM responses WHERE id = ? AND created >= ?",
                (response_id, self._cutoff()),
            )
            return cursor.rowcount > 0

    def _prune(self, conn: sqlite3.Connection) -> None:
        conn.execute("DELETE FROM responses WHERE created < ?", (self._cutoff(),))
        count, total = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM responses"
        ).fetchone()
        limits = self.limits
        if count <= limits.max_count and total <= limits.max_bytes:
            return
        drop: list[tuple[str]] = []
        for response_id, size in conn.execute(
            "SELECT id, size FROM responses ORDER BY created, rowid"
        ):
            if count <= limits.max_count and total <= limits.max_bytes:
                break
            drop.append((response_id,))
            count, total = count - 1, total - size
        conn.executemany("DELETE FROM responses WHERE id = ?", drop)

    # ---- reads ----------------------------------------------------------------------------

    def get(self, response_id: str) -> dict[str, Any] | None:
        row = self._row("response", response_id)
        return None if row is None else dict(json.loads(row))

    def input_items(self, response_id: str) -> list[dict[str, Any]] | None:
        row = self._row("input", response_id)
        return None if row is None else list(json.loads(row))

    def conversation(self, response_id: str) -> list[dict[str, Any]]:
        """Every item up to and including ``response_id``'s output, oldest first: each
        response's input items then its output items, back along the chain."""
        chain: list[tuple[str, str]] = []
        total = 0
        current: str | None = response_id
        with self._connect() as conn:
            while current is not None:
                row = conn.execute(
                    "SELECT previous_id, size, input, response FROM responses "
                    "WHERE id = ? AND created >= ?",
                    (current, self._cutoff()),
                ).fetchone()
                if row is None:
                    raise MissingResponseError(current)
                current, size, input_json, response_json = row
                total += size
                if total > self.limits.max_conversation_bytes or len(chain) > self.limits.max_count:
                    raise ConversationTooLargeError(response_id)
                chain.append((input_json, response_json))
        items: list[dict[str, Any]] = []
        for input_json, response_json in reversed(chain):
            items += json.loads(input_json)
            items += json.loads(response_json)["output"]
        return items

    def _row(self, column: str, response_id: str) -> str | None:
        with self._connect() as conn:
            row = conn.execute(
                f"SELECT {column} FROM responses WHERE id = ? AND created >= ?",
                (response_id, self._cutoff()),
            ).fetchone()
        return None if row is None else str(row[0])

    def _cutoff(self) -> float:
        return self._clock() - self.limits.max_age

    # ---- the file -------------------------------------------------------------------------

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        path = self.path
        conn = self._open(path)
        try:
            yield conn
        finally:
            conn.close()

    def _open(self, path: Path) -> sqlite3.Connection:
        make_private_dirs(path.parent)
        if not path.exists():
            # SQLite gives the -wal and -shm files the mode of the database file
            with suppress(FileExistsError):
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        private_file(path)
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(SCHEMA)
        except sqlite3.DatabaseError as error:
            conn.close()
            if isinstance(error, sqlite3.OperationalError):
                raise  # locked, or no room: not damage
            # not a database (or damaged): responses are a cache of conversations; start afresh
            aside = path.with_name(f"{path.name}.damaged-{int(self._clock())}")
            log.warning(
                "The stored responses in %s are damaged (%s); moved to %s", path, error, aside
            )
            path.replace(aside)
            return self._open(path)
        return conn


class ResponseKeeper:
    """The store seen from the event loop (see the module's docstring)."""

    def __init__(self, store: ResponseStore | None = None) -> None:
        self.store = store or ResponseStore()
        self._pending: set[asyncio.Future[Any]] = set()

    def save_soon(
        self, previous_id: str | None, input_items: list[dict[str, Any]], response: dict[str, Any]
    ) -> None:
        """Start writing ``response`` (called on the loop; later reads wait for it)."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, self.store.put, previous_id, input_items, response)
        self._pending.add(future)
        future.add_done_callback(self._written)

    def _written(self, future: asyncio.Future[Any]) -> None:
        self._pending.discard(future)
        if not future.cancelled() and (error := future.exception()) is not None:
            log.warning("A response could not be stored: %s", error)

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._pending:
            await asyncio.wait(set(self._pending))
        return await asyncio.to_thread(fn, *args)
