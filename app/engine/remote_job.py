"""A remote job's own state: what it has received (for its final event's usage and timings) and
the sockets its thread reads from, so that a cancel from another thread can close them."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from app.engine.types import FinishReason, Timings, Usage
from app.engine.worker import Job


@dataclass(slots=True)
class Progress:
    """What a job has received so far; the source of its final event's usage and timings."""

    started: float
    parts: list[str] = field(default_factory=list)
    chunks: int = 0
    first_at: float | None = None
    last_at: float | None = None
    finish_reason: str | None = None
    server_usage: Usage | None = None
    responded: bool = False  # the server answered with a status line
    done: bool = False  # [DONE] or a complete non-streamed body arrived

    def output(self, text: str, chunks: int = 1) -> None:
        now = time.perf_counter()
        if self.first_at is None:
            self.first_at = now
        self.last_at = now
        self.chunks += chunks
        if text:
            self.parts.append(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def usage(self) -> Usage:
        if self.server_usage is not None:
            return self.server_usage
        return Usage(completion_tokens=self.chunks)  # servers stream about one token a chunk

    def timings(self) -> Timings:
        end = time.perf_counter()
        if self.first_at is None:
            return Timings(prompt_seconds=end - self.started)
        usage = self.usage()
        prompt_s = self.first_at - self.started
        gen_s = (self.last_at or end) - self.first_at
        n_out = usage.completion_tokens
        if gen_s > 0 and n_out > 1:
            gen_tps = (n_out - 1) / gen_s
        elif n_out and prompt_s > 0 and self.chunks <= 1:  # one body: the overall rate
            gen_tps = n_out / prompt_s
        else:
            gen_tps = 0.0
        return Timings(
            time_to_first_token=prompt_s,
            prompt_seconds=prompt_s,
            generation_seconds=gen_s,
            prompt_tokens_per_second=usage.prompt_tokens / prompt_s if prompt_s > 0 else 0.0,
            generation_tokens_per_second=gen_tps,
        )

    def reason(self) -> FinishReason:
        if self.finish_reason == "length":
            return "length"
        if self.finish_reason in ("tool_calls", "function_call"):
            return "tool_calls"
        return "stop"


class Call:
    """One running job and the sockets its thread reads from.

    The job's thread emits and finishes while a cancel timer may finish it too: ``Job`` itself
    keeps that ordered (one final event, nothing after it), so no lock is needed here."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self._sockets: list[socket.socket] = []
        self._sock_lock = threading.Lock()
        self._aborted = False

    def trace(self, name: str, info: dict[str, Any]) -> None:
        """httpcore's trace hook: keep a duplicate of each new connection's socket, so that
        ``abort`` can shut it down from another thread (and after TLS wraps the original)."""
        if name != "connection.connect_tcp.complete":
            return
        sock = info["return_value"].get_extra_info("socket")
        if sock is None:
            return
        dup = sock.dup()
        with self._sock_lock:
            self._sockets.append(dup)
            aborted = self._aborted
        if aborted:
            _shutdown(dup)

    def abort(self) -> None:
        with self._sock_lock:
            self._aborted = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shutdown(sock)

    def release(self) -> None:
        with self._sock_lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            sock.close()


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed by the other side
        sock.shutdown(socket.SHUT_RDWR)
