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

Signal: ``hardware_read(object)`` with the :class:`~app.engine.backends.Hardware` shown.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.config import Settings
from app.engine import backends
from app.engine.backends import Device, Hardware
from app.engine.sizing import DEVICE_AUTO, DEVICE_CPU
from app.ui import theme
from app.ui.settings.provider_editor import text_label
from app.ui.tasks import run_in_background


class HardwarePage(QWidget):
    """The Hardware page; see the module doc. Built and updated on the GUI thread."""

    hardware_read = Signal(object)

    def __init__(self, settings: Settings | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
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

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        if not self._asked:
            self.refresh()

    def refresh(self) -> None:
        self._asked = True
        self.refresh_button.setEnabled(False)
        run_in_background(backends.hardware, self._on_read, self)

    @Slot()
    def _on_refresh_clicked(self) -> None:
        self.refresh()

    def _on_read(self, hw: Any, error: BaseException | None) -> None:
        self.refresh_button.setEnabled(True)
        if error is not None or not isinstance(hw, Hardware):
            self.status.setText(f"llama.cpp's back-ends could not be read: {error}")
            self.status.show()
            return
        self.show_hardware(hw)

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
