"""The API server as the GUI sees it. (Being built.)"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.ui.services import Services


class ServerController(QObject):
    """Starts and stops the API server off the GUI thread; reports its state as signals."""

    state_changed = Signal(str)

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.services = services

    def restore(self) -> None:
        """At start-up: start the server if it was on when the app was last closed."""
