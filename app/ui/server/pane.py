"""The Server page: the API's switch, address, key, snippets and request log. (Being built.)"""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from app.ui.server.controller import ServerController


class ServerPane(QWidget):
    def __init__(self, controller: ServerController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ServerPane")
        self.controller = controller

    def activate(self) -> None:
        """The page was shown."""
