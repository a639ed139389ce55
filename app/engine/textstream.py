"""Turning a stream of token bytes into clean text: UTF-8 reassembly and stop strings."""

from __future__ import annotations

import codecs


class StopMatcher:
    """Holds back text that might be the start of a stop string, so a stop string never
    reaches the output, not even in part.

    ``feed`` returns the text that is safe to emit; ``stopped`` turns true once a stop string
    was seen (everything from it on is dropped). ``flush`` returns what was held back when the
    generation ends for another reason.
    """

    def __init__(self, stops: tuple[str, ...] | list[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._pending = ""
        self.stopped = False
        self.stop_string: str | None = None

    def feed(self, text: str) -> str:
        if self.stopped:
            return ""
        if not self._stops:
            return text
        buf = self._pending + text
        first_at = -1
        for stop in self._stops:
            at = buf.find(stop)
            if at != -1 and (first_at == -1 or at < first_at):
                first_at, self.stop_string = at, stop
        if first_at != -1:
            self.stopped = True
            self._pending = ""
            return buf[:first_at]
        hold = self._longest_partial(buf)
        self._pending = buf[len(buf) - hold :] if hold else ""
        return buf[: len(buf) - hold]

    def flush(self) -> str:
        out, self._pending = self._pending, ""
        return "" if self.stopped else out

    def _longest_partial(self, buf: str) -> int:
        """Length of the longest suffix of ``buf`` that is a proper prefix of a stop string."""
        best = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(buf)), best, -1):
                if buf.endswith(stop[:n]):
                    best = n
                    break
        return best


class Utf8Stream:
    """Token pieces are bytes and a character may span tokens; emit only whole characters."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        return self._decoder.decode(data)

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)
