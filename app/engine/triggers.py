"""Grammar triggers: where a lazy grammar starts (llama.cpp's ``grammar_triggers``).

With ``SamplingParams.grammar_triggers``, a generation runs free until one of the trigger
patterns matches the answer so far; from the start of that match (of its first group, when
it has one and the group matched) the grammar constrains the text. A tool call's format opens
with its trigger (``<tool_call>``, ``[TOOL_CALLS]``): the words before it cost nothing.

llama.cpp has this in C (``llama_sampler_init_grammar_lazy_patterns``, exposed by
llama-cpp-python 0.3.36), but its patterns are C++ ``std::regex``: one it cannot parse throws
through the C API and ends the process, its matcher recurses once per character (a long answer
overflows the stack), it searches the whole answer again after every token, and a match the
grammar rejects throws again. So the patterns are Python's, checked and bounded here
(:func:`check_triggers`), and matched by :class:`TriggerWatch` on the last bytes of the answer
only: a token of free text costs one search of a few hundred bytes. The grammar itself stays
llama.cpp's; :class:`app.engine.sampling.Sampler` hands it the matched text.

Patterns are matched on the answer's UTF-8 bytes (as llama.cpp's are): ``\\s``, ``\\w`` and
``\\d`` mean their ASCII characters. Pure Python; thread-safe (compiled patterns are cached).
"""

from __future__ import annotations

import functools
import re
from re import _parser as _sre_parse  # type: ignore[attr-defined]  # (3.11+)
from typing import Any, Final

from app.engine.types import BadRequestError

MAX_TRIGGERS: Final = 32  # patterns of one request
MAX_TRIGGER_CHARS: Final = 256  # characters of one pattern
# Bytes a match may span: longer ones (an open-ended pattern) are looked for in the last
# WINDOW bytes of the answer only, which keeps each token's search short.
WINDOW: Final = 512
MAX_OPEN_REPEATS: Final = 3  # unbounded repetitions (*, +, {m,}) in one pattern

_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}


@functools.lru_cache(maxsize=64)
def check_triggers(patterns: tuple[str, ...]) -> tuple[re.Pattern[bytes], ...]:
    """The trigger patterns compiled (on bytes), or a BadRequestError that says which one is
    wrong and why: too many or too long, not a regular expression, one that can match
    nothing (an empty match), or a repetition inside a repetition (whose matching time can
    grow exponentially)."""
    if len(patterns) > MAX_TRIGGERS:
        raise BadRequestError(
            f"{len(patterns)} grammar triggers were given; the limit is {MAX_TRIGGERS}."
        )
    return tuple(_compiled(p) for p in patterns)


def _compiled(pattern: str) -> re.Pattern[bytes]:
    if not isinstance(pattern, str) or not pattern or len(pattern) > MAX_TRIGGER_CHARS:
        raise BadRequestError(
            f"A grammar trigger must be a regular expression of 1 to {MAX_TRIGGER_CHARS} "
            f"characters; got {str(pattern)[:40]!r}."
        )
    try:
        data = pattern.encode("utf-8")
        compiled = re.compile(data)
        tree = _sre_parse.parse(data)
    except (re.error, UnicodeEncodeError, RecursionError, OverflowError) as e:
        raise BadRequestError(
            f"The grammar trigger {pattern[:60]!r} is not a valid regular expression: {e}."
        ) from e
    if tree.getwidth()[0] == 0:
        raise BadRequestError(
            f"The grammar trigger {pattern[:60]!r} can match empty text; a trigger must match "
            "at least one character (the text where the grammar starts)."
        )
    _check_repeats(tree, pattern, nested=False, counts=[0])
    return compiled


def _check_repeats(items: Any, pattern: str, *, nested: bool, counts: list[int]) -> None:
    """Refuse a repetition inside another (``(a+)+``: exponential backtracking) and more than
    MAX_OPEN_REPEATS unbounded ones (each multiplies the work of a failed search)."""
    for op, av in items:
        name = str(op)
        if name in _REPEATS:
            _low, high, sub = av
            if nested and high > 1:
                raise BadRequestError(
                    f"The grammar trigger {pattern[:60]!r} repeats a repetition; write it "
                    "without nested repetitions."
                )
            if high == _sre_parse.MAXREPEAT:
                counts[0] += 1
                if counts[0] > MAX_OPEN_REPEATS:
                    raise BadRequestError(
                        f"The grammar trigger {pattern[:60]!r} has more than "
                        f"{MAX_OPEN_REPEATS} open-ended repetitions (*, +, {{m,}})."
                    )
            _check_repeats(sub, pattern, nested=nested or high > 1, counts=counts)
        elif name == "SUBPATTERN":
            _check_repeats(av[-1], pattern, nested=nested, counts=counts)
        elif name == "BRANCH":
            for branch in av[1]:
                _check_repeats(branch, pattern, nested=nested, counts=counts)
        elif name in {"ASSERT", "ASSERT_NOT"}:
            _check_repeats(av[1], pattern, nested=nested, counts=counts)
        elif name == "GROUPREF_EXISTS":
            for branch in av[1:]:
                if branch is not None:
                    _check_repeats(branch, pattern, nested=nested, counts=counts)
        elif name == "ATOMIC_GROUP":
            _check_repeats(av, pattern, nested=nested, counts=counts)


class TriggerWatch:
    """The answer's bytes so far, searched for the triggers after each token.

    ``feed(token, piece)`` returns None while no trigger has matched; once one matches, the
    offset in :attr:`text` where the grammar starts (the match's first group that matched,
    else the match itself). :attr:`tokens` holds each token with its span in :attr:`text`,
    so the caller can hand the grammar the text from there on, token by token."""

    def __init__(self, patterns: tuple[re.Pattern[bytes], ...]) -> None:
        self._patterns = patterns
        # how far back a match that ends in a new token may start
        self._reach = [min(_max_width(p), WINDOW) for p in patterns]
        self.text = bytearray()
        self.tokens: list[tuple[int, int, int]] = []  # (token, start, end) in text

    def feed(self, token: int, piece: bytes) -> int | None:
        start = len(self.text)
        self.text += piece
        self.tokens.append((token, start, len(self.text)))
        found: int | None = None
        for pattern, reach in zip(self._patterns, self._reach, strict=True):
            at = _start(pattern, self.text, max(0, start + 1 - reach), start)
            if at is not None:
                found = at if found is None else min(found, at)
        return found


def _start(pattern: re.Pattern[bytes], text: bytearray, pos: int, new: int) -> int | None:
    """Where the grammar starts for the first match of ``pattern`` in ``text[pos:]`` that
    ends after ``new`` (a match ending before it would have been found earlier)."""
    while pos <= new:
        m = pattern.search(text, pos)
        if m is None:
            return None
        if m.end() > new:
            groups = (i for i in range(1, pattern.groups + 1) if m.end(i) > m.start(i) >= 0)
            return m.start(next(groups, 0))
        pos = m.start() + 1
    return None


def _max_width(pattern: re.Pattern[bytes]) -> int:
    return int(_sre_parse.parse(pattern.pattern).getwidth()[1])
