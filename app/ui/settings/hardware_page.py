"""Settings → Hardware: the CPU, the CPU variant llama.cpp picked, each device with its memory
and the back-end that drives it, and llama.cpp's system info: what ``ember info --hardware``
prints (the rows come from :func:`app.engine.backends.describe`).

Loading the back-ends may take a moment (a GPU driver starts): it runs off the GUI thread when
the page is first shown; "Refresh" reads the devices' free memory again.

Signal: ``hardware_read(object)`` with the :class:`~app.engine.backends.Hardware` shown.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QFormLayout, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.engine import backends
from app.engine.backends import Hardware
from app.ui import theme
from app.ui.settings.provider_editor import text_label
from app.ui.tasks import run_in_background


class HardwarePage(QWidget):
    """The Hardware page; see the module doc. Built and updated on the GUI thread."""

    hardware_read = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
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
        self.status = text_label("Reading the hardware…", "FieldHelp", self, wrap=True)
        layout.addWidget(self.status)
        self.form = QFormLayout()
        self.form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        layout.addLayout(self.form)
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

    def show_hardware(self, hw: Hardware) -> None:
        while self.form.rowCount():
            self.form.removeRow(0)
        for key, value in backends.describe(hw):
            label = QLabel(value, self)
            label.setWordWrap(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.form.addRow(theme.form_label(key, label, self), label)
        self.status.hide()
        self.hardware_read.emit(hw)
