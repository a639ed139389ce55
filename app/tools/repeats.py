"""A model stuck repeating a tool call, seen as it writes.

Small models given tools sometimes write the same ``<tool_call>…</tool_call>`` again and again
until the answer's token limit (2,048 tokens of it, once, after a denied call); the calls
are held back from the chat until they are complete, so the person saw "Thinking…" for
minutes, then all of it at once. :class:`RepeatWatch` reads the round's raw text as it comes
(each character once) and says when a complete call block repeats one written before in the
round; the loop then stops the round and keeps the calls up to there, each once.

:func:`call_key` names a call by its tool and its arguments (as parsed JSON, so spacing and key
order do not matter): the same call made again in one turn keeps the person's answer (allowed
once, it runs again; denied, it is refused) without a second question.
"""

from __future__ import annotations

import json

OPEN = "<tool_call>"
CLOSE = "</tool_call>"


class RepeatWatch:
    """``feed(text)`` → True once a complete call block repeats an earlier one; ``cut`` is then
    the text up to the end of the last new block (what to read the calls from)."""

    def __init__(self) -> None:
        self.raw = ""
        self.cut = 0
        self._scanned = 0  # raw[:_scanned] holds no CLOSE that is not counted yet
        self._prev = 0  # the end of the last complete block
        self._blocks: set[str] = set()
        self.writing_call = False  # a call block has begun

    def feed(self, text: str) -> bool:
        self.raw += text
        if not self.writing_call and OPEN in self.raw[max(0, self._scanned - len(OPEN)) :]:
            self.writing_call = True
        while True:
            end = self.raw.find(CLOSE, max(0, self._scanned - len(CLOSE) + 1))
            if end < 0:
                self._scanned = len(self.raw)
                return False
            start = self.raw.rfind(OPEN, self._prev, end)
            block = self.raw[start + len(OPEN) : end].strip() if start >= 0 else ""
            self._scanned = self._prev = end + len(CLOSE)
            if block in self._blocks:
                return True
            self._blocks.add(block)
            self.cut = self._scanned


def call_key(name: str, arguments: str) -> str:
    """The tool and its arguments, spelled one way."""
    try:
        value = json.loads(arguments or "{}")
        spelled = json.dumps(value, sort_keys=True, separators=(",", ":"))
    except ValueError:
        spelled = arguments.strip()
    return f"{name}\0{spelled}"
