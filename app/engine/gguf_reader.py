"""The bounded byte reader under the GGUF parser, and the errors a bad header raises.

Every length and count a header states is checked before it is read, so a damaged or hostile
file fails with a sentence saying what is wrong instead of exhausting memory. Pure Python.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, BinaryIO, Final

_MAX_STRING: Final = 1 << 30  # 1 GiB: no real key, value or token comes close
_CHUNK: Final = 1 << 20  # read the header in 1 MiB chunks

# GGUF metadata value types.
SCALAR_FORMATS: Final = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
STRING: Final = 8
ARRAY: Final = 9


class GGUFError(ValueError):
    """A model file (or the head of one) cannot be used; the message says what to do."""


class GGUFNotFoundError(GGUFError):
    """There is no file at the given path."""


class NotGGUFError(GGUFError):
    """The file is something else (safetensors, a web page, a Git LFS pointer, ...)."""


class GGUFUnsupportedError(GGUFError):
    """A GGUF version or tensor type this version of Ember does not know."""


class GGUFCorruptError(GGUFError):
    """The header contains values no real model has (absurd counts or lengths)."""


class GGUFTruncatedError(GGUFError):
    """The file is shorter than its own header says: usually an interrupted download."""

    def __init__(self, name: str, expected: int, actual: int, *, at_least: bool = False) -> None:
        self.expected = expected
        self.actual = actual
        bound = "at least " if at_least else ""
        super().__init__(
            f"{name} is incomplete: expected {bound}{expected:,} bytes but the file has "
            f"{actual:,} (the download was probably interrupted); download it again"
        )


class GGUFNeedMoreData(GGUFError):  # noqa: N818 - a request, not a failure
    """The bytes given to :func:`parse_gguf_bytes` end before the header does.

    ``minimum`` is a true lower bound of the total bytes needed; ``needed`` is what to fetch
    next (at least ``minimum``, at least double what was given, at most the file size) so that
    a fetch loop finishes in a few round trips even when the vocabulary alone is megabytes.
    """

    def __init__(self, needed: int, *, minimum: int, have: int) -> None:
        self.needed = needed
        self.minimum = minimum
        self.have = have
        super().__init__(
            f"The header continues past the {have:,} bytes given; fetch at least "
            f"{minimum:,} bytes (try {needed:,})"
        )


class Reader:
    """Bounds-checked sequential reads of a binary stream, in chunks.

    ``size`` is how many bytes the stream holds (the file size, or the length of a downloaded
    head). A read past it calls ``short(total_bytes_needed)`` for the error to raise, so the
    same parser reports a truncated file or asks for more bytes of a remote one.
    """

    def __init__(
        self, stream: BinaryIO, size: int, name: str, short: Callable[[int], GGUFError]
    ) -> None:
        self.name = name
        self._stream = stream
        self._size = size
        self._short = short
        self._buf = b""
        self._base = 0  # absolute file position of _buf[0]
        self._off = 0
        self.set_byte_order("<")

    def set_byte_order(self, order: str) -> None:
        self.order = order
        self._u32 = struct.Struct(order + "I")
        self._u64 = struct.Struct(order + "Q")
        self._scalars = {t: struct.Struct(order + f) for t, f in SCALAR_FORMATS.items()}

    @property
    def pos(self) -> int:
        return self._base + self._off

    def _fill(self, n: int) -> None:
        rest = len(self._buf) - self._off
        if rest >= n:
            return
        pos = self.pos
        if pos + n > self._size:
            raise self._short(pos + n)
        data = self._read_up_to(min(max(n - rest, _CHUNK), self._size - pos - rest))
        if rest + len(data) < n:  # the file shrank while we read it
            raise self._short(pos + n)
        self._buf = self._buf[self._off :] + data
        self._base, self._off = pos, 0

    def _read_up_to(self, want: int) -> bytes:
        """Raw reads may return less than asked; keep reading until ``want`` bytes or EOF."""
        parts: list[bytes] = []
        got = 0
        while got < want:
            part = self._stream.read(want - got)
            if not part:
                break
            parts.append(part)
            got += len(part)
        return b"".join(parts)

    def peek(self, n: int) -> bytes:
        """Up to ``n`` bytes from here, fewer if the stream ends; never raises."""
        if len(self._buf) - self._off < n:
            self._fill(min(n, self._size - self.pos))
        return self._buf[self._off : self._off + n]

    def take(self, n: int) -> bytes:
        self._fill(n)
        start = self._off
        self._off += n
        return self._buf[start : self._off]

    def skip(self, n: int) -> None:
        if n <= len(self._buf) - self._off:
            self._off += n
            return
        target = self.pos + n
        if target > self._size:
            raise self._short(target)
        self._stream.seek(target)  # the data in between is never read
        self._buf, self._base, self._off = b"", target, 0

    def _unpack(self, st: struct.Struct) -> Any:
        self._fill(st.size)
        value = st.unpack_from(self._buf, self._off)[0]
        self._off += st.size
        return value

    def u32(self) -> int:
        return int(self._unpack(self._u32))

    def u64(self) -> int:
        return int(self._unpack(self._u64))

    def scalar(self, vtype: int) -> int | float | bool:
        return self._unpack(self._scalars[vtype])

    def scalars(self, vtype: int, count: int) -> list[Any]:
        st = struct.Struct(f"{self.order}{count}{SCALAR_FORMATS[vtype]}")
        return list(st.unpack(self.take(st.size)))

    def _string_length(self) -> int:
        at = self.pos
        n = self.u64()
        if n > _MAX_STRING:
            raise GGUFCorruptError(
                f"{self.name} is damaged: it claims a {n:,}-byte string at byte {at:,}; "
                "download it again"
            )
        return n

    def string(self) -> str:
        return self.take(self._string_length()).decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        self.skip(self._string_length())

    def skip_strings(self, count: int) -> None:
        """Skip ``count`` strings: the hot loop over 100k+ vocabulary entries, so it walks the
        buffer directly and falls back to the checked path only at chunk boundaries."""
        unpack = self._u64.unpack_from
        while count > 0:
            buf, off, end = self._buf, self._off, len(self._buf)
            while count > 0 and off + 8 <= end:
                n = unpack(buf, off)[0]
                if off + 8 + n > end:
                    break
                off += 8 + n
                count -= 1
            self._off = off
            if count > 0:
                self.skip_string()
                count -= 1
