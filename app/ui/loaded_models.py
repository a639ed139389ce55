"""The status bar's loaded models: a button ("2 models") that opens a small popup listing each
loaded model with the memory it holds, when it is unloaded if unused (its time-to-live, for
models loaded for API requests) and an **Unload** button.

The list comes from :class:`app.engine.residency.Residency` (``snapshot()``, which may read a
GGUF header: it runs on the task runner's quick lane, never on the GUI thread), refreshed when
the app loads or unloads a model and every few seconds (the API loads models just in time,
unseen by the app). An unload is a job on the engine worker; its end comes back through the
task runner, then the app's engine session catches up (``sync_with_worker``).

Signals: ``LoadedModelsButton.unloaded(str)`` once a model the popup unloaded is gone.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QPoint, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QLabel,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.gguf_format import human_bytes
from app.engine.residency import Residency, Resident
from app.ui.engine_session import EngineSession, model_name
from app.ui.task_runner import tasks

REFRESH_MS = 3000
POPUP_WIDTH = 340


def until_text(resident: Resident, now: float | None = None) -> str:
    """ "until 14:05 (in 58 min)", "unloads when its answers end", "stays loaded"."""
    if resident.expires_at is None:
        return "stays loaded"
    now = time.time() if now is None else now
    left = resident.expires_at - now
    if resident.ttl == 0:
        return "unloads when its answers end"
    when = time.strftime("%H:%M", time.localtime(resident.expires_at))
    if left < 60:
        return f"until {when} (in under a minute)"
    return f"until {when} (in {round(left / 60)} min)"


def detail_text(resident: Resident) -> str:
    """ "305 MB · 4,096-token context"."""
    return f"{human_bytes(resident.memory_bytes)} · {resident.model.n_ctx:,}-token context"


class LoadedModelsPopup(QFrame):
    """The list: one row per model (name, details, Unload). Signals: ``unload_requested(str)``."""

    unload_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        self.setObjectName("LoadedModelsPopup")
        self.setAccessibleName("Loaded models")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setMinimumWidth(POPUP_WIDTH)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 10, 12, 12)
        layout.setSpacing(8)
        title = QLabel("Loaded models", self)
        title.setObjectName("PopupTitle")
        layout.addWidget(title)
        self.rows = QWidget(self)
        self.grid = QGridLayout(self.rows)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setHorizontalSpacing(10)
        self.grid.setVerticalSpacing(8)
        self.grid.setColumnStretch(0, 1)
        layout.addWidget(self.rows)
        self.empty = QLabel("No model is loaded.", self)
        self.empty.setObjectName("FieldHelp")
        layout.addWidget(self.empty)
        self.unload_buttons: dict[str, QPushButton] = {}

    def show_models(self, residents: list[Resident]) -> None:
        while self.grid.count():
            item = self.grid.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:  # out of the popup now, deleted later
                widget.hide()
                widget.setParent(None)
                widget.deleteLater()
        self.unload_buttons = {}
        now = time.time()
        for row, resident in enumerate(reversed(residents)):  # the newest first
            model_id = resident.model.model_id
            name = QLabel(model_name(resident.model.path) or model_id, self.rows)
            name.setObjectName("LoadedModelName")
            name.setToolTip(f"{model_id}\n{resident.model.path}")
            name.setMinimumWidth(0)
            details = QLabel(detail_text(resident), self.rows)
            details.setObjectName("FieldHelp")
            until = QLabel("answering" if resident.busy else until_text(resident, now), self.rows)
            until.setObjectName("FieldHelp")
            unload = QPushButton("Unload", self.rows)
            unload.setObjectName("SmallButton")
            unload.setCursor(Qt.CursorShape.PointingHandCursor)
            unload.setAccessibleName(f"Unload {model_id}")
            unload.setToolTip("Unload it now (once the answers it is writing end)")
            unload.setProperty("model_id", model_id)
            unload.clicked.connect(self._on_unload_clicked)
            text = QWidget(self.rows)
            column = QVBoxLayout(text)
            column.setContentsMargins(0, 0, 0, 0)
            column.setSpacing(1)
            column.addWidget(name)
            column.addWidget(details)
            column.addWidget(until)
            self.grid.addWidget(text, row, 0)
            self.grid.addWidget(unload, row, 1, Qt.AlignmentFlag.AlignVCenter)
            self.unload_buttons[model_id] = unload
        self.empty.setVisible(not residents)
        self.adjustSize()

    @Slot()
    def _on_unload_clicked(self) -> None:
        button = self.sender()
        if isinstance(button, QPushButton):
            button.setEnabled(False)
            button.setText("Unloading…")
            self.unload_requested.emit(str(button.property("model_id")))


class LoadedModelsButton(QToolButton):
    """ "1 model" / "3 models" in the status bar (hidden while none is loaded); a click opens
    the popup above it."""

    unloaded = Signal(str)

    def __init__(
        self, engine: EngineSession, residency: Residency, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("LoadedModelsButton")
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setAccessibleName("Loaded models")
        self.setToolTip("The models loaded now, their memory and until when: click to see them")
        self.engine = engine
        self.residency = residency
        self.residents: list[Resident] = []
        self.popup = LoadedModelsPopup(self)
        self.popup.unload_requested.connect(self._on_unload_requested)
        self.clicked.connect(self.open_popup)
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self._timer.start()
        engine.model_loaded.connect(self.refresh)
        engine.model_unloaded.connect(self.refresh)
        self.setVisible(False)
        self.refresh()

    @Slot()
    def refresh(self) -> None:
        """Read the loaded models again, off the GUI thread."""
        tasks().submit(
            self.residency.snapshot,
            self._on_snapshot,
            key=(id(self), "loaded-models"),
            lane="quick",
            coalesce=True,
            name="list the loaded models",
        )

    def _on_snapshot(self, residents: list[Resident]) -> None:
        self.residents = residents
        count = len(residents)
        self.setText(f"{count} model{'s' if count != 1 else ''}")
        self.setVisible(count > 0)
        if self.popup.isVisible():
            self.popup.show_models(residents)

    @Slot()
    def open_popup(self) -> None:
        self.popup.show_models(self.residents)
        size = self.popup.sizeHint()
        below = self.mapToGlobal(QPoint(0, 0))
        x = below.x() + self.width() - size.width()
        screen = self.screen().availableGeometry() if self.screen() else None
        if screen is not None:
            x = max(screen.left(), min(x, screen.right() - size.width()))
        self.popup.move(x, below.y() - size.height() - 4)
        self.popup.show()
        self.refresh()

    @Slot(str)
    def _on_unload_requested(self, model_id: str) -> None:
        job = self.residency.unload(model_id)
        # waits for the answers being written: a long wait, on the lane for those
        tasks().submit(
            job.wait,
            lambda _final: self._on_unload_done(model_id),
            lane="tools",
            receiver=self,
            name=f"unload {model_id}",
        )

    def _on_unload_done(self, model_id: str) -> None:
        self.engine.sync_with_worker()
        self.unloaded.emit(model_id)
        self.refresh()
