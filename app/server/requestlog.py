"""The request log: every API request, kept in memory for the GUI (and optionally on disk).

:class:`RequestLog` is a ring buffer of :class:`RequestRecord` s with subscribers. Records are
appended on the server thread and subscribers are called there, right after the append: a
GUI must hand them to its own thread (a queued signal). Thread-safe.

Routes add what only they know (model, tokens) through the :class:`LogNote` that the
middleware puts in the ASGI scope under ``"ember.log"``. A request the security middleware
refused (no key, wrong Host or Origin, too large) is recorded without its request body.

The file (``--log-requests``) holds prompts and answers: it is created readable by this user
only, and an older one is made so.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.config import make_private_dirs, private_file, private_opener

log = logging.getLogger(__name__)

SCOPE_KEY = "ember.log"


@dataclass(frozen=True, slots=True)
class RequestRecord:
    id: int
    time: float  # when the request arrived (unix seconds)
    method: str
    path: str
    status: int
    duration: float  # seconds until the response was complete
    model: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    stream: bool
    client: str | None
    request_body: str  # truncated
    response_body: str  # truncated (head and tail of a long stream)
    error: str | None  # the error message of a failed request


@dataclass(slots=True)
class LogNote:
    """Filled in by the routes while a request runs."""

    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    stream: bool = False
    error: str | None = None
    refused: bool = False  # by the security middleware, before the app saw the request


def note_of(scope: Scope) -> LogNote:
    """The request's note (a throwaway one when the request log is not installed)."""
    note = scope.get(SCOPE_KEY)
    return note if isinstance(note, LogNote) else LogNote()


Subscriber = Callable[[RequestRecord], None]


class RequestLog:
    def __init__(
        self, capacity: int = 1000, file: Path | None = None, max_file_bytes: int = 20_000_000
    ) -> None:
        self._records: deque[RequestRecord] = deque(maxlen=capacity)
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.file = file
        self.max_file_bytes = max_file_bytes
        self._private: Path | None = None  # the file last made private (once per file)

    def next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def append(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)
            subscribers = list(self._subscribers)
        if self.file is not None:
            self._write(record)
        for callback in subscribers:
            try:
                callback(record)
            except Exception:
                log.exception("A request log subscriber raised")

    def records(self) -> list[RequestRecord]:
        """The kept records, oldest first."""
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(record)`` for each new record; returns the unsubscribe function."""
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def _write(self, record: RequestRecord) -> None:
        file = self.file
        assert file is not None
        line = json.dumps(asdict(record), ensure_ascii=False) + "\n"
        try:
            make_private_dirs(file.parent)
            if self._private != file:
                private_file(file)  # written by an Ember that did not make it private yet
                private_file(file.with_suffix(file.suffix + ".1"))
                self._private = file
            if file.exists() and file.stat().st_size > self.max_file_bytes:
                file.replace(file.with_suffix(file.suffix + ".1"))
            with open(file, "a", encoding="utf-8", opener=private_opener) as f:
                f.write(line)
        except OSError as e:
            log.warning("Could not write the request log %s: %s", file, e)


class _Capture:
    """Keeps the head and the tail of a byte stream."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail = (self.tail + data)[-(self.limit // 4) :]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        if not self.tail:
            return head
        skipped = self.total - len(self.head) - len(self.tail)
        tail = self.tail.decode("utf-8", errors="replace")
        return f"{head}\n… ({skipped} bytes not kept) …\n{tail}"


class RequestLogMiddleware:
    """Pure ASGI (no BaseHTTPMiddleware: it would break streaming and disconnect detection)."""

    def __init__(self, app: ASGIApp, request_log: RequestLog, body_chars: int = 4000) -> None:
        self.app = app
        self.log = request_log
        self.body_chars = body_chars

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started_wall, started = time.time(), time.perf_counter()
        note = LogNote()
        scope[SCOPE_KEY] = note
        request_body, response_body = _Capture(self.body_chars), _Capture(self.body_chars)
        status = 0

        async def logged_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                request_body.add(message.get("body", b""))
            return message

        async def logged_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body":
                response_body.add(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, logged_receive, logged_send)
        except BaseException:
            status = status or 500
            raise
        finally:
            self._record(scope, note, status, started_wall, started, request_body, response_body)

    def _record(  # noqa: PLR0917
        self,
        scope: Scope,
        note: LogNote,
        status: int,
        started_wall: float,
        started: float,
        request_body: _Capture,
        response_body: _Capture,
    ) -> None:
        client: Any = scope.get("client")
        error = note.error
        if error is None and status >= 400:
            error = _error_message(bytes(response_body.head))
        self.log.append(
            RequestRecord(
                id=self.log.next_id(),
                time=started_wall,
                method=str(scope.get("method", "")),
                path=str(scope.get("path", "")),
                status=status or 499,  # no response at all: the client went away first
                duration=time.perf_counter() - started,
                model=note.model,
                prompt_tokens=note.prompt_tokens,
                completion_tokens=note.completion_tokens,
                stream=note.stream,
                client=f"{client[0]}:{client[1]}" if client else None,
                request_body="" if note.refused else request_body.text(),
                response_body=response_body.text(),
                error=error,
            )
        )


def _error_message(body: bytes) -> str | None:
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return None
