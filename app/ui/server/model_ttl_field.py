"""How long a model loaded for an API request stays loaded unused (``server.model_ttl``): a
minutes field on the Server page, "Never" below 0 minutes, 0 = right after its answers.
Models the person loads in the app are not unloaded by it (app/engine/residency.py)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from app.engine.residency import ttl_setting
from app.ui.server.controller import ServerController

MAX_MINUTES = 7 * 24 * 60  # a week; longer is "Never"
NEVER = -1


class ModelTtlField(QWidget):
    """The field; saves through the controller as soon as the value changes."""

    def __init__(self, controller: ServerController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ModelTtlField")
        self.controller = controller
        self.minutes = QSpinBox(self)
        self.minutes.setObjectName("ModelTtlMinutes")
        self.minutes.setAccessibleName("Unload models loaded for API requests after, in minutes")
        self.minutes.setRange(NEVER, MAX_MINUTES)
        self.minutes.setSpecialValueText("Never")
        self.minutes.setSuffix(" min")
        self.minutes.setFixedWidth(110)
        self.minutes.setAccelerated(True)
        label = QLabel("Unload unused models after", self)
        label.setObjectName("FieldLabel")
        label.setBuddy(self.minutes)
        help_text = QLabel(
            "Models that load when a request names them (several can be loaded, as memory "
            "allows) are unloaded after this long unused; 0: right after their answers. "
            "Requests may ask otherwise (ttl, Ollama's keep_alive). Models you load here stay.",
            self,
        )
        help_text.setObjectName("FieldHelp")
        help_text.setWordWrap(True)
        row = QHBoxLayout()
        row.setSpacing(10)
        row.addWidget(label)
        row.addStretch(1)
        row.addWidget(self.minutes, 0, Qt.AlignmentFlag.AlignVCenter)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addLayout(row)
        layout.addWidget(help_text)
        self.load()
        self.minutes.valueChanged.connect(self._on_minutes_changed)
        controller.config_changed.connect(self.load)

    @Slot()
    def load(self) -> None:
        seconds = ttl_setting(self.controller.settings.get("server.model_ttl"))
        minutes = NEVER if seconds is None else min(MAX_MINUTES, round(seconds / 60))
        if minutes != self.minutes.value():
            self.minutes.blockSignals(True)
            self.minutes.setValue(minutes)
            self.minutes.blockSignals(False)

    @Slot(int)
    def _on_minutes_changed(self, minutes: int) -> None:
        self.controller.update_settings(model_ttl=-1.0 if minutes < 0 else minutes * 60.0)
