"""Settings → Hardware: the CPU, the CPU variant llama.cpp picked, each device with its memory
and the back-end that drives it, and llama.cpp's system info: what ``ember info --hardware``
prints (the rows come from :func:`app.engine.backends.describe`).

Above them, the back-end choice (as LM Studio's runtimes): "Automatic" (the GPUs llama.cpp
finds, else the CPU), "CPU only", or one GPU device; saved as ``load.device`` and applied the
next time a model loads (``ember run/serve --device`` is the same choice). A device chosen
before but not found now stays chosen, marked "not found", so the choice is never changed
behind the person's back (the load then runs on the CPU and says so in the fit badge).

Loading the back-ends may take a moment (a GPU driver starts): it runs off the GUI thread when
the page is first shown; "Refresh" reads the devices' free memory again.

Below, "In use" graphs RAM, swap, CPU and each GPU's memory over the last minutes, Ember's share
dashed, from the app's :class:`~app.ui.machine_monitor.MachineMonitor` (sampled off the GUI
thread, every second while the page is shown).

Signal: ``hardware_read(object)`` with the :class:`~app.engine.backends.Hardware` shown.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.config import Settings
from app.engine import backends
from app.engine.backends import Device, Hardware
from app.engine.gguf_format import human_bytes
from app.engine.monitor import HISTORY_SECONDS, Sample
from app.engine.sizing import DEVICE_AUTO, DEVICE_CPU
from app.ui import theme
from app.ui.machine_monitor import MachineMonitor
from app.ui.settings.provider_editor import text_label
from app.ui.settings.usage_graph import UsageGraph
from app.ui.task_runner import tasks


class HardwarePage(QWidget):
    """The Hardware page; see the module doc. Built and updated on the GUI thread."""

    hardware_read = Signal(object)

    def __init__(
        self,
        settings: Settings | None = None,
        parent: QWidget | None = None,
        monitor: MachineMonitor | None = None,
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.monitor = monitor
        self.graphs: dict[str, UsageGraph] = {}
        layout = QVBoxLayout(self)
        layout.setContentsMargins(28, 22, 28, 22)
        layout.setSpacing(12)
        layout.addWidget(text_label("Hardware", "PageTitle", self))
        layout.addWidget(
            text_label(
                "What llama.cpp found on this computer: the CPU code it runs, the GPUs it can "
                "offload layers to, and their free memory.",
                "FieldHelp",
                self,
                wrap=True,
            )
        )
        # the machine now, first: the status bar's memory figure opens this page for it
        self.usage = QGridLayout()
        self.usage.setHorizontalSpacing(16)
        self.usage.setVerticalSpacing(10)
        self.usage.setColumnStretch(0, 1)
        self.usage.setColumnStretch(1, 1)
        if monitor is not None:
            layout.addWidget(text_label("In use", "SectionTitle", self))
            for name in ("RAM", "CPU", "Swap"):
                self._graph(name)
            layout.addLayout(self.usage)
            layout.addSpacing(6)
            monitor.sampled.connect(self._on_sampled)
        self.backend = QComboBox(self)
        self.backend.setObjectName("load_device")
        theme.shrinking_combo(self.backend, 18)
        self.backend.setMinimumWidth(220)
        self.backend.setMaximumWidth(420)
        self.backend.setToolTip(
            "Where models run. Automatic offloads as many layers as fit to the GPUs llama.cpp "
            "finds, and uses the CPU when there is none. Applies the next time a model loads."
        )
        self._fill_backends(())
        self.backend.currentIndexChanged.connect(self._on_backend_changed)
        # one form, so the choice and what was found share a column: the choice is row 0
        self.form = QFormLayout()
        self.form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.form.setVerticalSpacing(10)
        self.form.addRow(theme.form_label("Run models on", self.backend, self), self.backend)
        layout.addLayout(self.form)
        self.status = text_label("Reading the hardware…", "FieldHelp", self, wrap=True)
        layout.addWidget(self.status)
        row = QHBoxLayout()
        self.refresh_button = QPushButton("Refresh", self)
        self.refresh_button.clicked.connect(self._on_refresh_clicked)
        row.addWidget(self.refresh_button)
        row.addStretch(1)
        layout.addLayout(row)
        layout.addStretch(1)
        self._asked = False
        self._watching = False

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        if not self._asked:
            self.refresh()
        if self.monitor is not None and not self._watching:
            self._watching = True
            self.monitor.watch()
            self.show_usage()

    def hideEvent(self, event: QHideEvent) -> None:  # noqa: N802 (Qt's name)
        super().hideEvent(event)
        if self.monitor is not None and self._watching:
            self._watching = False
            self.monitor.unwatch()

    def _graph(self, name: str) -> UsageGraph:
        if name not in self.graphs:
            graph = UsageGraph(name, HISTORY_SECONDS, self)
            count = len(self.graphs)
            self.graphs[name] = graph
            self.usage.addWidget(graph, count // 2, count % 2)  # two a row
        return self.graphs[name]

    @Slot(object)
    def _on_sampled(self, _sample: Sample) -> None:
        if self.isVisible():
            self.show_usage()

    def show_usage(self) -> None:
        """Draw the monitor's history: each resource's share of its total over time."""
        if self.monitor is None or self.monitor.latest is None:
            return
        samples = list(self.monitor.history)
        last = samples[-1]
        times = [s.time for s in samples]

        def share(used: int, total: int) -> float:
            return used / total if total else 0.0

        ram = self._graph("RAM")
        ram.show_values(
            times,
            [share(s.ram_used, s.ram_total) for s in samples],
            [share(s.ram_ember, s.ram_total) for s in samples],
            f"RAM · {share(last.ram_used, last.ram_total):.0%} of {human_bytes(last.ram_total)}"
            f" · Ember {human_bytes(last.ram_ember)}",
        )
        self._graph("CPU").show_values(
            times,
            [s.cpu / 100 for s in samples],
            [s.cpu_ember / 100 for s in samples],
            f"CPU · {last.cpu:.0f}% · Ember {last.cpu_ember:.0f}%",
        )
        swap = self._graph("Swap")
        swap.show_values(
            times if last.swap_total else [],
            [share(s.swap_used, s.swap_total) for s in samples],
            [],
            f"Swap · {human_bytes(last.swap_used)} of {human_bytes(last.swap_total)}"
            if last.swap_total
            else "Swap · none on this computer",
        )
        for gpu in last.gpus:
            values = [share(g.used, g.total) for s in samples for g in s.gpus if g.name == gpu.name]
            self._graph(f"{gpu.name} memory").show_values(
                times[-len(values) :] if values else [],
                values,
                [],
                f"{gpu.name} memory · {human_bytes(gpu.used)} of {human_bytes(gpu.total)}",
            )

    def refresh(self) -> None:
        self._asked = True
        self.refresh_button.setEnabled(False)
        tasks().submit(backends.hardware, self._on_read, self._on_read_failed)

    @Slot()
    def _on_refresh_clicked(self) -> None:
        self.refresh()

    def _on_read(self, hw: Hardware) -> None:
        self.refresh_button.setEnabled(True)
        self.show_hardware(hw)

    def _on_read_failed(self, error: BaseException) -> None:
        self.refresh_button.setEnabled(True)
        self.status.setText(f"llama.cpp's back-ends could not be read: {error}")
        self.status.show()

    def _chosen(self) -> str:
        return str(self.settings.get("load.device")) if self.settings else DEVICE_AUTO

    def _fill_backends(self, gpus: tuple[Device, ...]) -> None:
        """Automatic, CPU only, each GPU; the saved choice selected (kept if not found)."""
        chosen = self._chosen() or DEVICE_AUTO
        self.backend.blockSignals(True)
        self.backend.clear()
        self.backend.addItem("Automatic (the GPU, else the CPU)", DEVICE_AUTO)
        self.backend.addItem("CPU only", DEVICE_CPU)
        for dev in gpus:
            self.backend.addItem(f"{dev.name}: {dev.description}", dev.name)
        if self.backend.findData(chosen) < 0:
            self.backend.addItem(f"{chosen} (not found)", chosen)
        self.backend.setCurrentIndex(self.backend.findData(chosen))
        self.backend.blockSignals(False)

    @Slot(int)
    def _on_backend_changed(self, _index: int) -> None:
        if self.settings is not None:
            self.settings.set("load.device", str(self.backend.currentData()))

    def show_hardware(self, hw: Hardware) -> None:
        self._fill_backends(hw.gpus)
        while self.form.rowCount() > 1:  # what was found before; the choice stays
            self.form.removeRow(1)
        top = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop
        for key, value in backends.describe(hw):
            label = QLabel(value, self)
            label.setWordWrap(True)
            label.setAlignment(top)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            # read-only text, not inputs: each name level with its value's first line (a
            # form_label as tall as a wrapped value's size hint left uneven gaps)
            name = QLabel(key, self)
            name.setAlignment(top)
            self.form.addRow(name, label)
        self.status.hide()
        self.hardware_read.emit(hw)
