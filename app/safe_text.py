"""Text from files, configs and servers, made safe to show: control characters escaped visibly.

A file name, an MCP tool's name or schema, or an argument in mcp.json may hold anything: a
carriage return or ``ESC [2K`` that rewrites the terminal line it is printed on, a newline that
starts a fake line, a right-to-left override that shows the end of a text first. Shown through
these functions, each such character reads as its escape (``\\r``, ``\\x1b``, ``\\u202e``), so
what is shown is what is there, and no field can hide another.

- :func:`terminal_text` for the CLI's output (one line unless ``lines``);
- :func:`label_text` for Qt labels (lines kept, very long text shortened; the label must be
  plain text, as app/ui/chat/tool_card.py's are);
- :func:`shell_line` for a command line about to run: its exact argv, a shell's quoting, and
  bash's ``$'…'`` for an argument with a control character in it.

No Qt here: the CLI, the server and the GUI all use it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

# C0 and C1 controls, DEL, and the format characters that reorder or hide text (bidi
# overrides and isolates, zero-width characters, line and paragraph separators)
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]"
)
_UNSAFE_IN_LINES = re.compile(_UNSAFE.pattern.replace("\x00-\x1f", "\x00-\x08\x0b-\x1f"))
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
LABEL_MAX_CHARS = 4000  # a label's layout grows with its text: a megabyte froze the window


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_text(text: object, *, lines: bool = False) -> str:
    """``text`` for a terminal: every control character escaped (newlines and tabs kept when
    ``lines``; a carriage return never is)."""
    return (_UNSAFE_IN_LINES if lines else _UNSAFE).sub(_escape, str(text))


def label_text(text: object, *, lines: bool = True, limit: int = LABEL_MAX_CHARS) -> str:
    """``text`` for a plain-text Qt label: control characters escaped as for a terminal, and
    cut at ``limit`` characters (the rest counted)."""
    shown = terminal_text(text, lines=lines)
    if len(shown) > limit:
        shown = f"{shown[:limit]}… ({len(shown) - limit:,} more characters)"
    return shown


def _quoted(arg: str) -> str:
    if not _UNSAFE.search(arg):
        return shlex.quote(arg)
    escaped = arg.replace("\\", "\\\\").replace("'", "\\'")
    return "$'" + _UNSAFE.sub(_escape, escaped) + "'"


def shell_line(argv: Iterable[str]) -> str:
    """The exact command line ``argv`` is, as a shell would take it, on one line."""
    return " ".join(_quoted(arg) for arg in argv)
