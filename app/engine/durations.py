"""Durations a person or a client writes: a number of seconds or a Go duration ("5m",
"1h30m", "-1"), as Ollama's ``keep_alive`` and ``OLLAMA_KEEP_ALIVE`` take them. One parser for
every place that reads one (``keep_alive``, the API's ``ttl``, ``ember serve --model-ttl``,
the setting), bounded and linear in the text.
"""

from __future__ import annotations

import math
import re
from typing import Final

# one piece of a Go duration ("1h30m" is two), matched only where the previous one ended: a
# scan over the whole text retried the digits at every start, quadratic in their number
_DURATION_PIECE = re.compile(r"(-?\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
MAX_DURATION_CHARS: Final = 64  # "-9223372036.854775807s" is 22; a longer one is no duration
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
# Go's longest duration (what Ollama accepts): about 292 years. Longer is refused, not clamped.
MAX_SECONDS: Final = 9_223_372_036.0
USAGE: Final = 'a number of seconds or a duration such as "30s", "5m" or "1h30m"'


class DurationError(ValueError):
    """A value that is no duration; the message says what it was (shortened) and what to use."""


def parse_duration(text: str) -> float | None:
    """Seconds, from a number or a Go duration's pieces added up; None if it is neither (or
    longer than :data:`MAX_DURATION_CHARS`). Linear in ``text``."""
    text = text.strip()
    if not text or len(text) > MAX_DURATION_CHARS:
        return None
    try:
        seconds = float(text)
    except ValueError:
        total, at = 0.0, 0
        while at < len(text):
            piece = _DURATION_PIECE.match(text, at)
            if piece is None:
                return None
            total += float(piece[1]) * _UNIT_SECONDS[piece[2]]
            at = piece.end()
        seconds = total
    return seconds if math.isfinite(seconds) and abs(seconds) <= MAX_SECONDS else None


def seconds_of(value: object) -> float | None:
    """A time-to-live in seconds from a JSON value or a command-line word: None when not
    given; 0 means "unload after this answer", negative "keep it loaded". Raises
    :class:`DurationError` for anything else (a bool, a list, NaN, more than
    :data:`MAX_SECONDS`, text that is no duration)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise DurationError(f"{value!r} is no duration; use {USAGE}.")
    if isinstance(value, int | float):
        # compared before any conversion: a 30,000-digit int stays exact and is refused
        if isinstance(value, float) and not math.isfinite(value):
            raise DurationError(f"{value!r} is no duration; use {USAGE}.")
        if abs(value) > MAX_SECONDS:
            raise DurationError(
                f"{_number(value)} seconds is longer than Ember keeps a model for "
                f"({MAX_SECONDS:.0f} s at most); use -1 to keep it loaded."
            )
        return float(value)
    if isinstance(value, str):
        seconds = parse_duration(value)
        if seconds is None:
            raise DurationError(f"{_shown(value.strip())} is no duration; use {USAGE}.")
        return seconds
    raise DurationError(f"a {type(value).__name__} is no duration; use {USAGE}.")


def _number(value: float) -> str:
    """A number for a message: never ``str()`` of a huge int (Python refuses over 4,300
    digits); comparing an int with a float is exact, so the clip is safe."""
    return f"{float(max(-1e300, min(1e300, value))):.6g}"


def _shown(text: str) -> str:
    return repr(text) if len(text) <= MAX_DURATION_CHARS else f"a value of {len(text)} characters"


def describe(seconds: float | None) -> str:
    """ "5 min", "1 h 30 min", "45 s", "never" (negative or None: kept loaded)."""
    if seconds is None or seconds < 0:
        return "never"
    if seconds < 60:
        return f"{seconds:g} s"
    minutes = round(seconds / 60)
    hours, minutes = divmod(minutes, 60)
    if not hours:
        return f"{minutes} min"
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"
