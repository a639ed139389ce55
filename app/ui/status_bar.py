"""The status bar: what the engine is doing, the memory Ember uses, the API server's state."""

from __future__ import annotations

import psutil
from PySide6.QtCore import Qt, QTimer, Slot
from PySide6.QtWidgets import QHBoxLayout, QLabel, QStatusBar, QWidget

from app.engine.gguf import human_bytes
from app.engine.types import LoadedModel
from app.ui.engine_session import GENERATING, LOADING, EngineSession, model_name

MEMORY_INTERVAL_MS = 2000


class _Dot(QLabel):
    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("StateDot")
        self.setFixedSize(8, 8)

    def set_state(self, state: str) -> None:
        self.setProperty("state", state)
        self.style().unpolish(self)
        self.style().polish(self)


class StatusBar(QStatusBar):
    """Engine state (idle / loading / generating at N tok/s), memory, API server."""

    def __init__(self, engine: EngineSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("StatusBar")
        self.setSizeGripEnabled(False)
        self.engine = engine
        self._rate = 0.0
        self._process = psutil.Process()

        left = QWidget(self)
        left_layout = QHBoxLayout(left)
        left_layout.setContentsMargins(12, 0, 0, 0)
        left_layout.setSpacing(8)
        self.dot = _Dot(left)
        self.state_label = QLabel(left)
        self.state_label.setObjectName("StatusText")
        left_layout.addWidget(self.dot, 0, Qt.AlignmentFlag.AlignVCenter)
        left_layout.addWidget(self.state_label)
        self.addWidget(left, 1)

        self.memory_label = QLabel(self)
        self.memory_label.setObjectName("StatusText")
        self.memory_label.setToolTip("Memory used by Ember, including the loaded model")
        self.server_label = QLabel("API server · off", self)
        self.server_label.setObjectName("StatusText")
        self.server_label.setToolTip("The OpenAI-compatible API server")
        self.addPermanentWidget(self.memory_label)
        self.addPermanentWidget(_separator(self))
        self.addPermanentWidget(self.server_label)
        self.addPermanentWidget(QLabel(" ", self))

        self._memory_timer = QTimer(self)
        self._memory_timer.setInterval(MEMORY_INTERVAL_MS)
        self._memory_timer.timeout.connect(self.refresh_memory)
        self._memory_timer.start()
        engine.state_changed.connect(self._on_state_changed)
        engine.rate_changed.connect(self._on_rate_changed)
        engine.model_loaded.connect(self._on_model_loaded)
        engine.model_unloaded.connect(self.refresh_state)
        self.refresh_state()
        self.refresh_memory()

    def set_server_state(self, text: str) -> None:
        """For the API server pane: "API server · on, port 8434" and the like."""
        self.server_label.setText(text)

    @Slot()
    def refresh_memory(self) -> None:
        try:
            rss = self._process.memory_info().rss
        except psutil.Error:
            return
        self.memory_label.setText(f"Memory {human_bytes(rss)}")

    @Slot()
    def refresh_state(self) -> None:
        state = self.engine.state
        loaded = self.engine.loaded
        if state == LOADING:
            text = f"Loading {model_name(self.engine.loading_path or '')}…"
        elif state == GENERATING:
            rate = f" at {self._rate:.1f} tok/s" if self._rate > 0 else "…"
            text = f"Generating{rate}"
        elif loaded is not None:
            text = f"Idle · {model_name(loaded.path)} · {loaded.n_ctx:,}-token context"
        else:
            text = "Idle · no model loaded"
        self.state_label.setText(text)
        self.dot.set_state(state if loaded is not None or state != "idle" else "none")

    @Slot(str)
    def _on_state_changed(self, state: str) -> None:
        if state == GENERATING:
            self._rate = 0.0
        self.refresh_state()
        self.refresh_memory()

    @Slot(float)
    def _on_rate_changed(self, rate: float) -> None:
        self._rate = rate
        if self.engine.state == GENERATING:
            self.refresh_state()

    @Slot(object)
    def _on_model_loaded(self, _loaded: LoadedModel) -> None:
        self.refresh_state()
        self.refresh_memory()


def _separator(parent: QWidget) -> QLabel:
    label = QLabel("·", parent)
    label.setObjectName("StatusText")
    return label
