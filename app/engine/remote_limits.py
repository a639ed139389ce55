"""How much of a remote provider's answer is read: a bound on everything held in memory.

A provider (or anything answering at its address) could send an endless body. Both places
that read one — the remote engine (app/engine/remote.py) and the API's forwarder
(app/server/forward.py) — read through these helpers, so at most:

- ``MAX_ANSWER_BYTES`` of a non-streamed answer (and of a model list), beyond which the read
  stops and the request fails with :class:`AnswerTooLargeError` naming the provider;
- ``MAX_ERROR_BYTES`` of an error body (the rest is dropped: only its message is shown);
- ``MAX_SSE_LINE_BYTES`` of one line of a stream (a stream itself may run as long as the
  answer does, one bounded line at a time).

The limits count decoded bytes (after gzip), which is what memory holds. Module-level, so
tests can shrink them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING

from app.engine.gguf_format import MIB, mib_text

if TYPE_CHECKING:
    import httpx

MAX_ANSWER_BYTES = 32 * MIB
MAX_ERROR_BYTES = 1 * MIB
MAX_SSE_LINE_BYTES = 8 * MIB


class AnswerTooLargeError(Exception):
    """A provider's answer (or one line of its stream) exceeded ``limit`` bytes."""

    def __init__(self, provider: str, limit: int, where: str = "") -> None:
        self.provider = provider
        self.limit = limit
        size = mib_text(limit)
        super().__init__(
            f"{provider} answered more than {size}{where}; Ember reads at most {size} of it."
        )


def _take(chunks: Iterable[bytes], limit: int, provider: str, *, truncate: bool) -> bytes:
    buf = bytearray()
    for chunk in chunks:
        buf += chunk
        if len(buf) > limit:
            if truncate:
                return bytes(buf[:limit])
            raise AnswerTooLargeError(provider, limit)
    return bytes(buf)


def read_capped(response: httpx.Response, provider: str) -> httpx.Response:
    """Read a streamed ``response`` into a new, read response with the same status and
    headers (so ``.json()``/``.text`` work): an error (status >= 400) up to
    ``MAX_ERROR_BYTES`` (the rest dropped), an answer up to ``MAX_ANSWER_BYTES`` (beyond it,
    :class:`AnswerTooLargeError`)."""
    error = response.status_code >= 400
    limit = MAX_ERROR_BYTES if error else MAX_ANSWER_BYTES
    body = _take(response.iter_bytes(), limit, provider, truncate=error)
    return _replaced(response, body)


async def aread_capped(response: httpx.Response, provider: str) -> bytes:
    """The async form of :func:`read_capped`; returns the (decoded) body."""
    error = response.status_code >= 400
    limit = MAX_ERROR_BYTES if error else MAX_ANSWER_BYTES
    buf = bytearray()
    async for chunk in response.aiter_bytes():
        buf += chunk
        if len(buf) > limit:
            if error:
                return bytes(buf[:limit])
            raise AnswerTooLargeError(provider, limit)
    return bytes(buf)


def _replaced(response: httpx.Response, body: bytes) -> httpx.Response:
    import httpx

    # the body is decoded already: drop the headers that describe the wire form
    headers = [
        (k, v)
        for k, v in response.headers.multi_items()
        if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
    ]
    return httpx.Response(
        response.status_code,
        headers=headers,
        content=body,
        request=response.request,
        extensions=response.extensions,
    )


class LineSplitter:
    """Bytes in, lines out (split at ``\\n``, ``\\r\\n`` or ``\\r``, as SSE and httpx do), with
    no line longer than ``limit`` bytes held: beyond it, :class:`AnswerTooLargeError`."""

    def __init__(self, provider: str, limit: int | None = None) -> None:
        self.provider = provider
        self.limit = MAX_SSE_LINE_BYTES if limit is None else limit
        self._line = bytearray()
        self._cr = False  # the last chunk ended with \r: a \n first in the next one is its pair

    def feed(self, chunk: bytes) -> list[str]:
        if self._cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._cr = chunk.endswith(b"\r")
        parts = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        self._line += parts[0]
        lines: list[bytes] = []
        if len(parts) > 1:
            lines.append(bytes(self._line))
            lines.extend(parts[1:-1])
            self._line = bytearray(parts[-1])
        if len(self._line) > self.limit or any(len(line) > self.limit for line in lines):
            raise AnswerTooLargeError(self.provider, self.limit, " in one line of its stream")
        return [line.decode("utf-8", errors="replace") for line in lines]

    def flush(self) -> list[str]:
        line, self._line = bytes(self._line), bytearray()
        return [line.decode("utf-8", errors="replace")] if line else []


def iter_lines_capped(
    response: httpx.Response, provider: str, limit: int | None = None
) -> Iterator[str]:
    splitter = LineSplitter(provider, limit)
    for chunk in response.iter_bytes():
        yield from splitter.feed(chunk)
    yield from splitter.flush()


async def aiter_lines_capped(
    response: httpx.Response, provider: str, limit: int | None = None
) -> AsyncIterator[str]:
    splitter = LineSplitter(provider, limit)
    async for chunk in response.aiter_bytes():
        for line in splitter.feed(chunk):
            yield line
    for line in splitter.flush():
        yield line
