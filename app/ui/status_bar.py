"""The status bar: what the engine is doing, the memory Ember uses, the API server's state.

"Generating at 41.0 tok/s" for one answer, "2 answers running · 80.5 tok/s" for several (each
chat writes its own), "3 answers running (2 for API clients)" when the API server's clients
share the engine. In a narrow window the engine's text is cut short with "…" and the
memory goes, so the API switch always stays whole.

An answer with tools (``attach_answers``: the chats' ``AnswerRunner``) is not one engine job:
between its rounds it says what it waits for, "Waiting for your approval to run NAME" (the
dot amber, as for a load: it needs you), "Running NAME…", "Starting SERVER…", and it counts
as generating while the model reads or writes (its rounds run on the engine worker directly,
so they are not taken for an API client's).

The loaded models (``attach_residency``: app/ui/loaded_models.py) sit left of the memory: "2
models" opens a popup with each one's memory, until when it stays loaded, and Unload.

The memory figure is Ember's resident memory from the app's :class:`MachineMonitor` (read off
the GUI thread); clicking it opens Settings → Hardware, whose graphs show the machine.

Signals: ``server_page_requested()`` when the API server's label is clicked,
``hardware_page_requested()`` when the memory figure is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QSize, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QPainter, QPaintEvent, QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QStatusBar,
    QToolButton,
    QWidget,
)

from app.engine.gguf_format import human_bytes
from app.engine.monitor import Sample
from app.engine.provider_ids import parse_remote_id
from app.engine.types import LoadedModel
from app.ui import theme
from app.ui.engine_session import GENERATING, LOADING, EngineSession, model_name
from app.ui.machine_monitor import MachineMonitor
from app.ui.server.switch import ToggleSwitch

if TYPE_CHECKING:
    from app.engine.residency import Residency
    from app.server.status import ServerStatus
    from app.ui.chat.answers import AnswerRunner
    from app.ui.loaded_models import LoadedModelsButton
    from app.ui.server.controller import ServerController

API_POLL_MS = 500
MEMORY_MIN_WIDTH = 620  # px of status bar below which the memory label hides


class _ElidedLabel(QLabel):
    """A label that asks for no width of its own and shows what fits, ending in "…" (its
    ``text()`` stays whole; the tooltip shows it when cut)."""

    def setText(self, text: str) -> None:  # noqa: N802 (Qt override)
        super().setText(text)
        self._refresh_tip()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(0, super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._refresh_tip()

    def _shown_text(self) -> str:
        width = self.contentsRect().width()
        return self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, width)

    def _refresh_tip(self) -> None:
        self.setToolTip(self.text() if self._shown_text() != self.text() else "")

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        painter = QPainter(self)
        self.style().drawItemText(
            painter,
            self.contentsRect(),
            int(self.alignment()),
            self.palette(),
            self.isEnabled(),
            self._shown_text(),
            self.foregroundRole(),
        )
        painter.end()


class _Dot(QLabel):
    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("StateDot")
        self.setFixedSize(8, 8)

    def set_state(self, state: str) -> None:
        theme.set_style_property(self, "state", state)


class ServerToggle(QWidget):
    """The API server in the status bar: a small switch and a clickable state label
    ("API server · off", "API · http://127.0.0.1:8434", "starting…", "error")."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("ServerToggle")
        self.dot = _Dot(self)
        self.dot.setObjectName("ServerDot")
        self.dot.set_state("stopped")
        self.label = QToolButton(self)
        self.label.setObjectName("ServerStatusButton")
        self.label.setText("API server · off")
        self.label.setCursor(Qt.CursorShape.PointingHandCursor)
        self.label.setToolTip("The OpenAI-compatible API server: open its page")
        self.switch = ToggleSwitch(self, 28, 16)
        self.switch.setObjectName("ServerBarSwitch")
        self.switch.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.switch.setToolTip("Turn the API server on or off")
        self.switch.setAccessibleName("API server")
        self.switch.setEnabled(False)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.dot, 0, Qt.AlignmentFlag.AlignVCenter)
        layout.addWidget(self.label, 0, Qt.AlignmentFlag.AlignVCenter)
        layout.addWidget(self.switch, 0, Qt.AlignmentFlag.AlignVCenter)

    def show_status(self, status: ServerStatus, wanted: bool) -> None:
        state = status.state
        url = status.base_url
        if state == "running" and url:
            text = f"API · {url.removesuffix('/v1')}"
            tip = f"Serving the OpenAI-compatible API at {url}"
        elif state == "starting":
            text, tip = "API server · starting…", "The API server is starting"
        elif state == "stopping":
            text, tip = "API server · stopping…", "The API server is stopping"
        elif state == "failed":
            text, tip = "API server · error", status.error or "The API server failed"
        else:
            text, tip = "API server · off", "The OpenAI-compatible API server is off"
        self.label.setText(text)
        self.label.setToolTip(f"{tip}. Click to open the Server page.")
        self.dot.set_state(state)
        busy = state in ("starting", "stopping")
        self.switch.set_checked_quietly(wanted if busy else state == "running")
        self.switch.set_busy(busy)


class StatusBar(QStatusBar):
    """Engine state (idle / loading / generating at N tok/s), memory, API server."""

    server_page_requested = Signal()
    hardware_page_requested = Signal()

    def __init__(
        self,
        engine: EngineSession,
        parent: QWidget | None = None,
        monitor: MachineMonitor | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("StatusBar")
        self.setSizeGripEnabled(False)
        self.engine = engine
        self._rate = 0.0

        left = QWidget(self)
        left_layout = QHBoxLayout(left)
        left_layout.setContentsMargins(12, 0, 0, 0)
        left_layout.setSpacing(8)
        self.dot = _Dot(left)
        self.state_label = _ElidedLabel(left)
        self.state_label.setObjectName("StatusText")
        left_layout.addWidget(self.dot, 0, Qt.AlignmentFlag.AlignVCenter)
        left_layout.addWidget(self.state_label)
        self.addWidget(left, 1)

        self.memory_label = QToolButton(self)
        self.memory_label.setObjectName("MemoryButton")
        self.memory_label.setCursor(Qt.CursorShape.PointingHandCursor)
        self.memory_label.setToolTip(
            "Memory used by Ember, including the loaded model. Click to see the computer's "
            "memory and CPU over the last minutes (Settings → Hardware)."
        )
        self.memory_label.setAccessibleName("Memory used by Ember")
        self.memory_label.clicked.connect(self.hardware_page_requested)
        self.memory_separator = _separator(self)
        self.server_toggle = ServerToggle(self)
        self.server_toggle.label.clicked.connect(self.server_page_requested)
        self.server_toggle.switch.clicked.connect(self._on_server_switch_clicked)
        self.server: ServerController | None = None
        self.answers: AnswerRunner | None = None
        self.loaded_models: LoadedModelsButton | None = None
        self.addPermanentWidget(self.memory_label)
        self.addPermanentWidget(self.memory_separator)
        self.addPermanentWidget(self.server_toggle)
        self.addPermanentWidget(QLabel(" ", self))

        self.monitor = monitor if monitor is not None else MachineMonitor(self)
        self.monitor.sampled.connect(self._on_sampled)
        # API clients' answers run on the same engine: their count is read from the worker
        # (an int) a few times a second, not signalled per job to the GUI thread.
        self._api_answers = 0
        self._api_timer = QTimer(self)
        self._api_timer.setInterval(API_POLL_MS)
        self._api_timer.timeout.connect(self._poll_api_answers)
        self._api_timer.start()
        engine.state_changed.connect(self._on_state_changed)
        engine.rate_changed.connect(self._on_rate_changed)
        engine.answers_changed.connect(self.refresh_state)
        engine.model_loaded.connect(self._on_model_loaded)
        engine.model_unloaded.connect(self.refresh_state)
        engine.remote_selected.connect(self.refresh_state)
        self.refresh_state()
        self.refresh_memory()

    def attach_server(self, controller: ServerController) -> None:
        """Show the API server's state and let the switch turn it on and off. Idempotent."""
        if self.server is controller:
            return
        self.server = controller
        controller.status_changed.connect(self._on_server_status_changed)
        self.server_toggle.switch.setEnabled(True)
        self._on_server_status_changed(controller.status)

    def attach_residency(self, residency: Residency) -> None:
        """Show the loaded models (a button left of the memory figure). Once."""
        if self.loaded_models is not None:
            return
        from app.ui.loaded_models import LoadedModelsButton

        self.loaded_models = LoadedModelsButton(self.engine, residency, self)
        self.loaded_models.unloaded.connect(self.refresh_memory)
        self.insertPermanentWidget(1, self.loaded_models)  # after the state (index 0)

    def attach_answers(self, runner: AnswerRunner) -> None:
        """Say what the chats' answers do, also between the rounds of one with tools.
        Idempotent."""
        if self.answers is runner:
            return
        self.answers = runner
        runner.activity_changed.connect(self.refresh_state)
        self.refresh_state()

    @Slot(bool)
    def _on_server_switch_clicked(self, checked: bool) -> None:
        if self.server is not None:
            self.server.set_enabled(checked)

    @Slot(object)
    def _on_server_status_changed(self, status: ServerStatus) -> None:
        wanted = self.server.wanted if self.server is not None else False
        self.server_toggle.show_status(status, wanted)

    @Slot()
    def refresh_memory(self) -> None:
        """Show the newest sample's figure and ask for a fresh one (after a load, say)."""
        latest = self.monitor.latest
        if latest is not None:
            self.memory_label.setText(f"Memory {human_bytes(latest.ram_ember)}")
        self.monitor.sample_now()

    @Slot(object)
    def _on_sampled(self, sample: Sample) -> None:
        self.memory_label.setText(f"Memory {human_bytes(sample.ram_ember)}")

    @Slot()
    def refresh_state(self) -> None:
        state = self.engine.state
        loaded = self.engine.loaded
        remote = parse_remote_id(self.engine.remote_model or "")
        answers, waiting = self._answers_text()
        if state == LOADING:
            text = f"Loading {model_name(self.engine.loading_path or '')}…"
            text += f" · {answers}" if answers else ""
        elif answers:
            text = answers
        elif remote is not None:
            text = f"Idle · {remote.model} on {remote.provider}"
        elif loaded is not None:
            text = f"Idle · {model_name(loaded.path)} · {loaded.n_ctx:,}-token context"
        else:
            text = "Idle · no model loaded"
        self.state_label.setText(text)
        ready = loaded is not None or remote is not None
        if waiting:  # a tool waits for the person: amber, as while a model loads
            self.dot.set_state(LOADING)
        elif answers and state == "idle":  # between an answer's rounds: no engine job now
            self.dot.set_state(GENERATING)
        else:
            self.dot.set_state(state if ready or state != "idle" else "none")

    def _activities(self) -> list[tuple[str, str]]:
        return [a.activity() for a in self.answers.all()] if self.answers is not None else []

    def _answers_text(self) -> tuple[str, bool]:
        """What the answers do, and whether one waits for the person."""
        activities = self._activities()
        # The app's answers generating: its engine jobs, or (with tools) answers between
        # calls, whose rounds the engine session does not see.
        generating = sum(kind == "generating" for kind, _ in activities)
        running, api = max(self.engine.running_answers, generating), self._api_answers
        parts = [_tools_text(activities)] if activities else []
        rate = f"{self._rate:.1f} tok/s" if self._rate > 0 else ""
        if api:  # the rate is the app's answers' alone: not shown beside the API's
            clients = "1 for an API client" if api == 1 else f"{api} for API clients"
            total = running + api
            parts.append(f"{total} answer{'s' if total > 1 else ''} running ({clients})")
        elif running == 1 and (read := [n for k, n in activities if k == "generating" and n]):
            parts.append(f"Reading the prompt… {read[0]}")
        elif running == 1:
            parts.append(f"Generating at {rate}" if rate else "Generating…")
        elif running > 1:
            parts.append(f"{running} answers running" + (f" · {rate}" if rate else "…"))
        waiting = any(kind == "approval" for kind, _ in activities)
        return " · ".join(p for p in parts if p), waiting

    @Slot()
    def _poll_api_answers(self) -> None:
        engine = self.engine
        # the app's answers with tools write their rounds on the worker, unseen by the session
        answers = self.answers.all() if self.answers is not None else []
        app = engine.running_answers + sum(
            a.turn is not None and a.activity()[0] == "generating" for a in answers
        )
        api = 0 if engine.remote_model else max(0, engine.worker.running - app)
        if api != self._api_answers:
            self._api_answers = api
            self.refresh_state()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        wide = event.size().width() >= MEMORY_MIN_WIDTH
        if self.memory_label.isVisibleTo(self) != wide:
            self.memory_label.setVisible(wide)
            self.memory_separator.setVisible(wide)

    @Slot(str)
    def _on_state_changed(self, state: str) -> None:
        if state == GENERATING:
            self._rate = 0.0
        self.refresh_state()
        self.refresh_memory()

    @Slot(float)
    def _on_rate_changed(self, rate: float) -> None:
        self._rate = rate
        if self.engine.running_answers:
            self.refresh_state()

    @Slot(object)
    def _on_model_loaded(self, _loaded: LoadedModel) -> None:
        self.refresh_state()
        self.refresh_memory()


def _tools_text(activities: list[tuple[str, str]]) -> str:
    """What the answers with tools wait for: "Waiting for your approval to run NAME",
    "Running NAME…", "Starting SERVER…" (or how many, for several)."""
    parts: list[str] = []
    for kind, one, many in (
        ("approval", "Waiting for your approval to run {}", "{} tools waiting for your approval"),
        ("tool", "Running {}…", "Running {} tools…"),
        ("starting", "Starting {}…", "Starting the tools of {} chats…"),
    ):
        names = [name for k, name in activities if k == kind]
        if len(names) == 1:
            parts.append(one.format(names[0]))
        elif names:
            parts.append(many.format(len(names)))
    return " · ".join(parts)


def _separator(parent: QWidget) -> QFrame:
    """A thin vertical rule between permanent items (a "·" read as a second status dot)."""
    line = QFrame(parent)
    line.setObjectName("StatusSeparator")
    line.setFixedSize(1, 14)
    return line
