"""What an answer that has no text yet is waiting for, in its message.

``THINKING`` (the default: the model reads the prompt or writes something it does not show yet;
its dots move), or what the answer does first: "Loading gemma-3-4b…" (the chat's model),
"Reading report.pdf… 40%" (its attached files being indexed and embedded), "Starting time…"
(the chat's MCP servers). Empty: nothing, because
a card above the composer says it (a server's command line waiting for "Run it").
"""

from __future__ import annotations

from PySide6.QtCore import QTimer, Slot
from PySide6.QtWidgets import QLabel, QWidget

THINKING = "Thinking"
WRITING_CALL = "Writing a tool call"  # held back until complete (dots move, as THINKING's)
TICK_MS = 400


def reading_text(names: list[str], done: int, total: int) -> str:
    """'Reading report.pdf… 40%' ('Reading 3 files… 40%'; no percent before a total)."""
    what = names[0] if len(names) == 1 else f"{len(names)} files" if names else "the files"
    percent = f" {min(100, done * 100 // total)}%" if total > 0 else ""
    return f"Reading {what}…{percent}"


class WaitingLabel(QLabel):
    """See the module docstring. ``what`` is the text; ``run(waiting)`` shows it while the
    message waits (and moves the dots of ``THINKING``)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(THINKING, parent)
        self.setObjectName("Thinking")
        self.what = THINKING
        self._dots = 0
        self._timer = QTimer(self)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._on_tick)

    def set_what(self, text: str) -> None:
        if text != self.what:
            self.what, self._dots = text, 0
            self.setText(text)

    def run(self, waiting: bool) -> None:
        shown = waiting and bool(self.what)
        self.setVisible(shown)
        moving = shown and self.what in (THINKING, WRITING_CALL)
        if moving and not self._timer.isActive():
            self._timer.start()
        elif not moving:
            self._timer.stop()

    @property
    def moving(self) -> bool:
        return self._timer.isActive()

    @Slot()
    def _on_tick(self) -> None:
        self._dots = (self._dots + 1) % 4
        self.setText(self.what + "." * self._dots)
