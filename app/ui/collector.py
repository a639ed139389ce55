"""Python's cyclic garbage collector, run on the GUI thread only (``GuiCollector``).

Left automatic, a collection runs on whichever thread allocates past a threshold: a download,
a Hub request, the engine's thread. The garbage it frees may hold Qt objects: a closed page's
widgets and timers kept alive by a reference cycle. A Qt object destroyed off its own thread
corrupts Qt's state, and a timer later fires into freed memory. That was a segfault in the
test suite: a full collection on the Hub thread freed an earlier window while the GUI thread
waited in its event loop. So the GUI app turns automatic collection off and ``GuiCollector``
collects on the GUI thread from a timer, with the interpreter's own thresholds
(``gc.get_threshold``), which ``collect_if_due`` compares with ``gc.get_count``.

While answers stream, full (generation 2) collections wait: a full collection walks every
object the app made since start-up, tens of milliseconds in a long session, a visible stall in
the middle of an answer. Younger generations still run (they are short). A second after the last
answer ends, if nothing started meanwhile, the held full collection runs. Connect
``on_answers_changed`` to ``EngineSession.answers_changed``.

Headless commands (``ember serve``, ``ember run``) have no Qt objects and keep Python's
automatic collection.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer, Slot

CHECK_MS = 250  # how often the GUI thread looks at the allocation counts
FULL_COLLECTION_DELAY_MS = 1000  # after the last answer ends, before the held full collection


def generation_due(*, hold_full: bool = False) -> int | None:
    """The oldest generation the interpreter would collect now (its thresholds against its
    counts), or None. ``hold_full`` caps it at generation 1."""
    first, second, third = gc.get_threshold()
    young, middle, old = gc.get_count()
    if first <= 0 or young <= first:
        return None  # as the interpreter: allocations past the first threshold trigger it
    if old > third and not hold_full:
        return 2
    return 1 if middle > second else 0


def collect_if_due(*, hold_full: bool = False) -> int | None:
    """Collect what ``generation_due`` says is due; the generation collected, or None."""
    generation = generation_due(hold_full=hold_full)
    if generation is not None:
        gc.collect(generation)
    return generation


class GuiCollector(QObject):
    """See the module docstring. Create it on the GUI thread; it turns automatic collection
    off until ``stop()`` (or its deletion)."""

    def __init__(self, parent: QObject | None = None, interval_ms: int = CHECK_MS) -> None:
        super().__init__(parent)
        self.holding_full = False
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.check)
        self._timer.start()
        self._full_later = QTimer(self)
        self._full_later.setSingleShot(True)
        self._full_later.setInterval(FULL_COLLECTION_DELAY_MS)
        self._full_later.timeout.connect(self._collect_full)
        was_enabled = self._was_enabled
        self.destroyed.connect(lambda *_: gc.enable() if was_enabled else None)

    def stop(self) -> None:
        """Give collection back to the interpreter."""
        self._timer.stop()
        self._full_later.stop()
        if self._was_enabled:
            gc.enable()

    @Slot()
    def check(self) -> None:
        collect_if_due(hold_full=self.holding_full)

    @Slot(int)
    def on_answers_changed(self, running: int) -> None:
        if running:
            self.holding_full = True
            self._full_later.stop()
        elif self.holding_full:
            self.holding_full = False
            self._full_later.start()

    @Slot()
    def _collect_full(self) -> None:
        gc.collect()
