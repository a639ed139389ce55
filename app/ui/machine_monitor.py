"""The app's view of the machine over time: one :class:`MachineMonitor` samples RAM, swap, CPU
and GPU memory (app/engine/monitor.py) on the task runner's ``quick`` lane, never on the GUI
thread, and keeps the last minutes for the Hardware page's graphs and the status bar's memory
figure.

It samples every :data:`IDLE_INTERVAL_MS` while nobody watches the graphs and every
:data:`WATCH_INTERVAL_MS` while the Hardware page is shown (``watch``/``unwatch``).

Signal: ``sampled(object)`` with each new :class:`~app.engine.monitor.Sample`, on the GUI
thread.
"""

from __future__ import annotations

import logging
import threading

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.engine.monitor import History, Sample, Sampler
from app.ui.task_runner import tasks

log = logging.getLogger(__name__)

IDLE_INTERVAL_MS = 2000
WATCH_INTERVAL_MS = 1000


class MachineMonitor(QObject):
    """See the module doc. Lives on the GUI thread."""

    sampled = Signal(object)

    def __init__(self, parent: QObject | None = None, sampler: Sampler | None = None) -> None:
        super().__init__(parent)
        self.history = History()
        self._sampler = sampler or Sampler()
        self._lock = threading.Lock()  # the sampler keeps the last CPU times: one at a time
        self._watchers = 0
        self._timer = QTimer(self)
        self._timer.setInterval(IDLE_INTERVAL_MS)
        self._timer.timeout.connect(self.sample_now)
        self._timer.start()
        self.sample_now()

    @property
    def latest(self) -> Sample | None:
        return self.history.latest

    def watch(self) -> None:
        """Someone shows the graphs: sample more often until :meth:`unwatch`."""
        self._watchers += 1
        self._timer.setInterval(WATCH_INTERVAL_MS)

    def unwatch(self) -> None:
        self._watchers = max(0, self._watchers - 1)
        if not self._watchers:
            self._timer.setInterval(IDLE_INTERVAL_MS)

    @Slot()
    def sample_now(self) -> None:
        tasks().submit(
            self._sample, self._on_sampled, self._on_failed, key=(id(self), "sample"), lane="quick"
        )

    def _sample(self) -> Sample:
        with self._lock:
            return self._sampler.sample()

    def _on_sampled(self, sample: Sample) -> None:
        self.history.add(sample)
        self.sampled.emit(sample)

    def _on_failed(self, error: BaseException) -> None:
        # a failed reading (a process table the OS would not show) skips one point
        log.debug("Reading the machine's use failed: %s", error)
