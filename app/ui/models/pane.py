"""The Models page: Discover (the Hub), Downloads, My models. (Being built.)"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.ui.services import Services


class ModelsPane(QWidget):
    """Signals: ``load_requested(str path)``: the user chose "Load" on a model;
    ``downloads_active(int)``: how many downloads are queued or running (for the rail badge)."""

    load_requested = Signal(str)
    downloads_active = Signal(int)

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ModelsPane")
        self.services = services
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Models", self))

    def activate(self) -> None:
        """The page was shown: refresh what may be stale (cheap; work runs off the GUI thread)."""
