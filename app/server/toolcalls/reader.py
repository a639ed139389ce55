"""The streaming reader every tool-call format is parsed with.

A format's syntax is a generator function over a :class:`Reader` (see ``syntaxes.py``): it
asks for text with the reader's primitives (``text_until``, ``literal``, ``until``,
``json_args``…), which ``yield`` when they need more of the answer, and it reports what it
found (``begin_call``, ``args``, ``end_call``, content, reasoning). ``feed`` runs it as far
as the text allows; ``finish`` runs it to the end.

Bounded and linear, because it runs on the event loop over text a model may be led to write:
- Every primitive looks at each character a bounded number of times: text is scanned from
  where the last scan stopped, and only a bounded tail (a marker's beginning) is looked at
  again. :attr:`Reader.work` counts the characters examined (tests assert it is linear).
- What is held back is capped: a name (:data:`NAME_CAP`), whitespace (:data:`SPACE_CAP`),
  other values in a call's head (:data:`HEAD_CAP`), a value read whole (:data:`VALUE_CAP`).
  Past a cap the call is not a call: its text is content.
- A call whose name is not one of the request's tools, or whose syntax breaks before its
  name, is content, exactly as written. After the name, arguments stream as they arrive.
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Callable, Generator, Mapping
from typing import Any, Final, Literal

from app.server.pieces import Piece

HEAD_CAP: Final = 512  # a value in a call's head that is neither its name nor arguments
NAME_CAP: Final = 128  # a function name (OpenAI allows 64)
KEY_CAP: Final = 128  # a key in a call object or a parameter name
VALUE_CAP: Final = 16 * 1024  # a value read whole before it is emitted
SPACE_CAP: Final = 64  # whitespace inside a call's syntax (models write a few)

Step = Generator[None, None, Any]
Syntax = Callable[["Reader"], Step]
Kind = Literal["content", "reasoning"]

_ALPHABET = string.ascii_letters + string.digits


def new_call_id() -> str:
    return "call_" + "".join(secrets.choice(_ALPHABET) for _ in range(24))


class Broken(Exception):  # noqa: N818 (control flow inside a syntax, never shown)
    """The text is not (or no longer) a call in this format."""


class Reader:
    """Runs one syntax over one answer: ``feed(text)`` and ``finish()`` return Pieces.

    ``tools`` maps each tool's name to its parameters' JSON schema (formats whose arguments
    are not JSON use it to type them)."""

    def __init__(self, syntax: Syntax, tools: Mapping[str, Any]) -> None:
        self.tools = tools
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.work = 0
        self.out: list[Piece] = []
        self.index = 0  # the next call's index
        self.open = False  # a call has begun (its name was accepted) and not ended
        self.args_sent = False
        self.after_call = False  # drop whitespace between and after calls
        self.holds = 0  # positions remembered across a yield: no trimming meanwhile
        self.call_start = 0  # where the call being read began (its text, if it is none)
        self.pinned = False  # reading a call's head: keep its text until its name is accepted
        self.current_name = ""
        self._gen = syntax(self)
        self._done = False

    # -- driving ---------------------------------------------------------------------------

    def feed(self, text: str) -> list[Piece]:
        self.buf += text
        return self._run()

    def finish(self) -> list[Piece]:
        self.eof = True
        out = self._run()
        if not self._done:  # a syntax that waits past the end of the answer: flush it
            self.flush_rest()
            out += self._take()
        return out

    def _run(self) -> list[Piece]:
        if not self._done:
            try:
                next(self._gen)
            except StopIteration:
                self._done = True
                self.flush_rest()
            except Broken:  # a syntax that let one through: the rest is text, never an error
                self._done, self.pinned = True, False
                self.flush_rest()
        self._trim()
        return self._take()

    def _take(self) -> list[Piece]:
        out, self.out = self.out, []
        return out

    def _trim(self) -> None:
        # Positions held across a yield (a call's start, a value's start) pin the buffer.
        if self.holds == 0 and not self.pinned and self.pos > 4096 and self.pos * 2 > len(self.buf):
            self.buf, self.pos = self.buf[self.pos :], 0

    def flush_rest(self) -> None:
        if self.open:
            self.end_call()
        self.emit("content", self.buf[self.pos :])
        self.pos = len(self.buf)

    def wait(self) -> Step:
        """Wait for more text: False at the end of the answer."""
        if self.eof:
            return False
        yield
        return True

    # -- output ----------------------------------------------------------------------------

    def emit(self, kind: Kind, text: str) -> None:
        if kind == "content" and self.after_call:
            text = text.lstrip()
            if text:
                self.after_call = False
        if text:
            self.out.append(Piece(kind, text))

    def mark(self) -> None:
        """A call's head starts here (the next call of a section)."""
        self.call_start, self.pinned = self.pos, True

    def begin_call(self, name: str) -> bool:
        """Start a call of ``name``; False (nothing emitted) if it is not one of the tools."""
        if name not in self.tools:
            return False
        if self.open:
            self.end_call()
        self.out.append(Piece("tool", "", self.index, new_call_id(), name))
        self.current_name = name
        self.open, self.args_sent, self.pinned = True, False, False
        return True

    def args(self, text: str) -> None:
        if text:
            self.args_sent = True
            self.out.append(Piece("tool", text, self.index))

    def end_call(self) -> None:
        if not self.open:
            return
        if not self.args_sent:
            self.out.append(Piece("tool", "{}", self.index))
        self.open = False
        self.index += 1
        self.after_call = True

    # -- primitives ------------------------------------------------------------------------

    def text_until(self, markers: tuple[str, ...], kind: Kind = "content") -> Step:
        """Emit text as ``kind`` up to the first of ``markers``; consume the marker and return
        ``(marker, where it began)``, or None at the end of the answer (all text emitted)."""
        while True:
            found, at = _earliest(self.buf, self.pos, markers)
            self.work += (len(self.buf) - self.pos) * len(markers)
            if found is not None:
                self.emit(kind, self.buf[self.pos : at])
                self.pos = at + len(found)
                return found, at
            end = len(self.buf) - _partial_tail(self.buf, self.pos, markers)
            self.emit(kind, self.buf[self.pos : end])
            self.pos = end
            if not (yield from self.wait()):
                self.emit(kind, self.buf[self.pos :])
                self.pos = len(self.buf)
                return None

    def peek(self, n: int) -> Step:
        """The next ``n`` characters (fewer at the end of the answer), not consumed."""
        while len(self.buf) - self.pos < n:
            if not (yield from self.wait()):
                break
        return self.buf[self.pos : self.pos + n]

    def literal(self, text: str) -> Step:
        """Consume ``text`` if it comes next; False (nothing consumed) if something else does."""
        while True:
            have = self.buf[self.pos : self.pos + len(text)]
            self.work += len(have)
            if not text.startswith(have):
                return False
            if len(have) == len(text):
                self.pos += len(text)
                return True
            if not (yield from self.wait()):
                return False

    def expect(self, text: str) -> Step:
        if not (yield from self.literal(text)):
            raise Broken(text)

    def first_of(self, options: tuple[str, ...]) -> Step:
        """Consume whichever of ``options`` comes next (the first listed wins a tie); None
        if none does."""
        for option in options:
            if (yield from self.literal(option)):
                return option
        return None

    def space(self, cap: int = SPACE_CAP) -> Step:
        """Skip whitespace (at most ``cap`` characters of it)."""
        skipped = 0
        while True:
            buf, i = self.buf, self.pos
            while i < len(buf) and buf[i].isspace():
                i += 1
            skipped += i - self.pos
            self.work += i - self.pos + 1
            self.pos = i
            if skipped > cap:
                raise Broken("too much whitespace")
            if i < len(buf) or not (yield from self.wait()):
                return

    def until(self, markers: tuple[str, ...], cap: int) -> Step:
        """The text up to the first of ``markers`` (both consumed): ``(text, marker)``.
        Broken past ``cap`` characters or at the end of the answer."""
        start = self.pos
        self.holds += 1
        try:
            return (yield from self._until(start, markers, cap))
        finally:
            self.holds -= 1

    def _until(self, start: int, markers: tuple[str, ...], cap: int) -> Step:
        while True:
            found, at = _earliest(self.buf, self.pos, markers)
            self.work += (len(self.buf) - self.pos) * len(markers)
            if found is not None and at - start <= cap:
                self.pos = at + len(found)
                return self.buf[start:at], found
            if found is not None or len(self.buf) - start > cap + max(map(len, markers)):
                raise Broken("over the cap")
            self.pos = max(start, len(self.buf) - _partial_tail(self.buf, start, markers))
            if not (yield from self.wait()):
                raise Broken("the answer ended")

    def name_until(self, markers: tuple[str, ...]) -> Step:
        """A function name up to one of ``markers``, accepted as a call: the marker."""
        name, marker = yield from self.until(markers, NAME_CAP)
        self.accept(name.strip())
        return marker

    def accept(self, name: str) -> None:
        """Begin a call of ``name``; Broken if it is not one of the tools."""
        if not self.begin_call(name):
            raise Broken("not a tool")

    def json_string(self, cap: int) -> Step:
        """A JSON string (decoded). Broken if it is not one, or longer than ``cap``."""
        yield from self.expect('"')
        self.holds += 1
        try:
            return (yield from self._json_string(self.pos - 1, cap))
        finally:
            self.holds -= 1

    def _json_string(self, start: int, cap: int) -> Step:
        escaped = False
        while True:
            buf, i = self.buf, self.pos
            while i < len(buf):
                c = buf[i]
                i += 1
                if escaped:
                    escaped = False
                elif c == "\\":
                    escaped = True
                elif c == '"':
                    self.work += i - self.pos
                    self.pos = i
                    try:
                        value = json.loads(buf[start:i])
                    except ValueError:
                        raise Broken("bad string") from None
                    return value
            self.work += i - self.pos
            self.pos = i
            if self.pos - start > cap:
                raise Broken("string over the cap")
            if not (yield from self.wait()):
                raise Broken("the answer ended")

    def json_value(self, stream: bool, cap: int = VALUE_CAP) -> Step:
        """A JSON value: streamed as arguments as it arrives (``stream``), else returned
        whole (Broken past ``cap``). Broken at once if it does not begin like JSON."""
        head = yield from self.peek(1)
        if not head or head not in '{["-0123456789tfn':
            raise Broken("not JSON")
        self.holds += 1
        try:
            return (yield from self._json_value(JsonScan(), self.pos, stream, cap))
        finally:
            self.holds -= 1

    def _json_value(self, scan: JsonScan, start: int, stream: bool, cap: int) -> Step:
        while True:
            n = scan.scan(self.buf, self.pos)
            self.work += n - self.pos
            if stream:
                self.args(self.buf[self.pos : n])
            self.pos = n
            if scan.ended:
                return None if stream else self.buf[start:n]
            if not stream and self.pos - start > cap:
                raise Broken("value over the cap")
            if not (yield from self.wait()):
                if stream:
                    return None
                raise Broken("the answer ended")

    def string_until(self, markers: tuple[str, ...], quoted: bool = True) -> Step:
        """Stream the text up to the first of ``markers`` (consumed) as arguments: as a JSON
        string (``quoted``), or as it is (JSON already); the marker, or None at the end."""
        quote, escape = ('"', _escape) if quoted else ("", _same)
        self.args(quote)
        while True:
            found, at = _earliest(self.buf, self.pos, markers)
            self.work += (len(self.buf) - self.pos) * len(markers)
            end = at if found is not None else len(self.buf)
            if found is None:
                end -= _partial_tail(self.buf, self.pos, markers)
            self.args(escape(self.buf[self.pos : end]))
            self.pos = end
            if found is not None:
                self.pos += len(found)
                self.args(quote)
                return found
            if not (yield from self.wait()):
                self.args(escape(self.buf[self.pos :]) + quote)
                self.pos = len(self.buf)
                return None

    def json_args(self) -> Step:
        """A call's arguments: a JSON object, streamed; or a JSON string holding one."""
        head = yield from self.peek(1)
        if head == '"':
            text = yield from self.json_string(VALUE_CAP)
            self.args(text)
        elif head == "{":
            yield from self.json_value(stream=True)
        else:
            raise Broken("arguments are not an object")


class JsonScan:
    """Finds where a JSON value ends, in text that arrives in pieces (not a validator)."""

    __slots__ = ("depth", "ended", "escaped", "in_string", "scalar", "started")

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = self.escaped = self.started = self.ended = self.scalar = False

    def scan(self, text: str, i: int) -> int:
        """Scan ``text`` from ``i``; return where the value ends (or ``len(text)``)."""
        n = len(text)
        while i < n:
            c = text[i]
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif c == "\\":
                    self.escaped = True
                elif c == '"':
                    self.in_string = False
                    if self.depth == 0:
                        self.ended = True
                        return i + 1
            elif self.scalar:
                if c in ",}] \t\r\n<[":
                    self.ended = True
                    return i
            elif c == '"':
                self.in_string = self.started = True
            elif c in "{[":
                self.depth += 1
                self.started = True
            elif c in "}]":
                self.depth -= 1
                if self.depth <= 0:
                    self.ended = True
                    return i + 1
            elif not self.started and not c.isspace():
                self.scalar = self.started = True
            i += 1
        return n


def _same(text: str) -> str:
    return text


def _escape(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1] if text else ""


def _earliest(buf: str, start: int, markers: tuple[str, ...]) -> tuple[str | None, int]:
    found: str | None = None
    best = -1
    for marker in markers:
        at = buf.find(marker, start)
        if at != -1 and (best == -1 or at < best):
            found, best = marker, at
    return found, best


def _partial_tail(buf: str, start: int, markers: tuple[str, ...]) -> int:
    """Length of the longest end of ``buf[start:]`` that begins one of ``markers``."""
    best = 0
    room = len(buf) - start
    for marker in markers:
        for n in range(min(len(marker) - 1, room), best, -1):
            if buf.endswith(marker[:n]):
                best = n
                break
    return best


def attempt(r: Reader, start: int, step: Step, rewind: bool = False) -> Step:
    """Run ``step`` (one call, or a section of calls, from ``start``): if it breaks before
    a call begins, its text from ``r.call_start`` is content (or, with ``rewind``, read
    again as text: for an attempt made once, at the start of the answer); a call it began
    ends."""
    r.call_start, r.pinned = start, True
    try:
        yield from step
    except Broken:
        if rewind and not r.open:
            r.pos = r.call_start
        elif not r.open:
            r.emit("content", r.buf[r.call_start : r.pos])
    finally:
        r.pinned = False
    r.end_call()


def calls_in_text(opens: tuple[str, ...], call: Callable[[Reader, str], Step]) -> Syntax:
    """The usual shape of an answer: text, and calls that begin with one of ``opens``;
    ``call(reader, opener)`` reads what follows an opener."""

    def run(r: Reader) -> Step:
        while True:
            found = yield from r.text_until(opens)
            if found is None:
                return
            yield from attempt(r, found[1], call(r, found[0]))

    return run
