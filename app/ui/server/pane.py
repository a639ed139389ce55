"""The Server page: the API's switch and address, its settings, ready-to-paste snippets and
the live request log.

Layout: a header card (switch, state, base URL with Copy, the model being served) over two
columns: settings and snippets on the left (scrolling), the request log on the right. On a
narrow page everything stacks in one scrolling column, the log last.
Nothing here blocks: the controller starts and stops the server off the GUI thread.
"""

from __future__ import annotations

import socket

from PySide6.QtCore import Qt, QTimer, Slot
from PySide6.QtGui import QGuiApplication, QResizeEvent
from PySide6.QtWidgets import (
    QBoxLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.engine.types import LoadedModel
from app.server import clients
from app.server.requestlog import RequestRecord
from app.server.status import ServerStatus
from app.ui import icons, theme
from app.ui.banner import Banner
from app.ui.engine_session import model_name
from app.ui.server.controller import ALL_INTERFACES, ServerController
from app.ui.server.request_log_view import RequestLogPanel
from app.ui.server.settings_form import ServerSettingsForm
from app.ui.server.snippet_view import SnippetView
from app.ui.server.snippets import ollama_url
from app.ui.server.switch import ToggleSwitch
from app.ui.task_runner import tasks
from app.ui.toast import Toast

# Wide pages: settings and snippets in a column of this share of the width, the log beside it.
# Narrower pages stack everything in one scrolling column, the log last.
LEFT_SHARE, LEFT_MIN, LEFT_MAX = 0.45, 392, 620
SIDE_BY_SIDE_WIDTH = 1000
STACKED_LOG_HEIGHT = 460
QWIDGETSIZE_MAX = (1 << 24) - 1

_STATE_TITLES = {
    "stopped": "Off",
    "starting": "Starting…",
    "running": "Running",
    "stopping": "Stopping…",
    "failed": "Could not start",
}


def lan_address() -> str | None:
    """This computer's address on the local network (no packet is sent), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            address = str(probe.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _card(parent: QWidget, title: str, subtitle: str | None = None) -> tuple[QFrame, QVBoxLayout]:
    card = QFrame(parent)
    card.setObjectName("ServerCard")
    card.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
    layout = QVBoxLayout(card)
    layout.setContentsMargins(18, 16, 18, 18)
    layout.setSpacing(8)
    heading = QLabel(title, card)
    heading.setObjectName("CardTitle")
    layout.addWidget(heading)
    if subtitle:
        sub = QLabel(subtitle, card)
        sub.setObjectName("FieldHelp")
        sub.setWordWrap(True)
        layout.addWidget(sub)
    layout.addSpacing(4)
    return card, layout


class ServerPane(QWidget):
    def __init__(self, controller: ServerController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ServerPane")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.controller = controller
        self.engine = controller.services.engine
        self._lan_checked = False
        self._lan: str | None = None

        # -- header: the switch and where the API is ------------------------------------
        self.hero = QFrame(self)
        self.hero.setObjectName("ServerHero")
        self.hero.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.switch = ToggleSwitch(self.hero, 48, 26)
        self.switch.setObjectName("ServerSwitch")
        self.switch.setToolTip("Serve the OpenAI-compatible API")
        self.switch.setAccessibleName("API server")
        self.switch.clicked.connect(self._on_switch_clicked)
        self.state_title = QLabel(self.hero)
        self.state_title.setObjectName("ServerStateTitle")
        self.state_detail = QLabel(self.hero)
        self.state_detail.setObjectName("FieldHelp")
        self.state_detail.setWordWrap(True)
        self.url_label = QLabel(self.hero)
        self.url_label.setObjectName("BaseUrl")
        self.url_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.copy_url = QPushButton("Copy", self.hero)
        self.copy_url.setObjectName("SmallButton")
        self.copy_url.setCursor(Qt.CursorShape.PointingHandCursor)
        self.copy_url.setToolTip("Copy the base URL for OpenAI clients")
        self.copy_url.setAccessibleName(icons.spoken("Copy the base URL for OpenAI clients"))
        icons.set_icon(self.copy_url, "copy", size=14)
        self.copy_url.clicked.connect(self._on_copy_url_clicked)
        # Ollama's clients use the same server without /v1 (and the Ollama port when it runs)
        self.ollama_label = QLabel(self.hero)
        self.ollama_label.setObjectName("FieldHelp")
        self.ollama_label.setWordWrap(True)
        self.ollama_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.model_label = QLabel(self.hero)
        self.model_label.setObjectName("FieldHelp")
        self.model_label.setWordWrap(True)
        self.model_label.setTextFormat(Qt.TextFormat.RichText)

        text_column = QVBoxLayout()
        text_column.setSpacing(2)
        title_row = QHBoxLayout()
        title_row.setSpacing(10)
        title = QLabel("API server", self.hero)
        title.setObjectName("PageTitle")
        title_row.addWidget(title)
        title_row.addWidget(self.state_title, 0, Qt.AlignmentFlag.AlignVCenter)
        title_row.addStretch(1)
        text_column.addLayout(title_row)
        text_column.addWidget(self.state_detail)
        url_row = QHBoxLayout()
        url_row.setSpacing(8)
        url_row.addWidget(self.url_label)
        url_row.addWidget(self.copy_url)
        url_row.addStretch(1)
        hero_layout = QHBoxLayout(self.hero)
        hero_layout.setContentsMargins(22, 18, 22, 18)
        hero_layout.setSpacing(18)
        hero_layout.addWidget(self.switch, 0, Qt.AlignmentFlag.AlignTop)
        right = QVBoxLayout()
        right.setSpacing(6)
        right.addLayout(url_row)
        right.addWidget(self.ollama_label)
        right.addWidget(self.model_label)
        # The state and the address side by side; one under the other on a narrow page.
        self.hero_columns = QBoxLayout(QBoxLayout.Direction.LeftToRight)
        self.hero_columns.setSpacing(18)
        self.hero_columns.addLayout(text_column, 1)
        self.hero_columns.addLayout(right, 1)
        hero_layout.addLayout(self.hero_columns, 1)

        self.banner = Banner(self)

        # -- left column: settings and snippets ---------------------------------------
        self.form = ServerSettingsForm(controller, self)
        self.form.key_copied.connect(self._on_key_copied)
        self.restart_notice = QFrame(self)
        self.restart_notice.setObjectName("RestartNotice")
        self.restart_notice.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        notice_text = QLabel("The server still runs with the previous settings.", self)
        notice_text.setObjectName("RestartNoticeText")
        notice_text.setWordWrap(True)
        self.restart_button = QPushButton("Restart now", self.restart_notice)
        self.restart_button.setObjectName("PrimaryButton")
        self.restart_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.restart_button.clicked.connect(self._on_restart_clicked)
        notice_layout = QHBoxLayout(self.restart_notice)
        notice_layout.setContentsMargins(12, 8, 8, 8)
        notice_layout.addWidget(notice_text, 1)
        notice_layout.addWidget(self.restart_button)
        self.restart_notice.hide()
        settings_card, settings_layout = _card(self, "Settings")
        settings_layout.addWidget(self.form)
        settings_layout.addWidget(self.restart_notice)

        self.snippets = SnippetView(self)
        self.snippets.copied.connect(self._on_snippet_copied)
        self.snippet_help = QLabel(self)
        self.snippet_help.setObjectName("FieldHelp")
        self.snippet_help.setWordWrap(True)
        # each coding agent's settings (app/server/clients.py), chosen from a list
        self.clients = SnippetView(
            self,
            names=clients.NAMES,
            source=clients.clients,
            chooser="combo",
            label="Connect a client",
        )
        self.clients.copied.connect(self._on_snippet_copied)
        connect_card, connect_layout = _card(
            self,
            "Connect",
            "Any OpenAI-, Anthropic- or Ollama-compatible client works: set its base URL and, "
            "if you set one, the key.",
        )
        connect_layout.addWidget(self.clients)
        connect_layout.addWidget(self.snippets)
        connect_layout.addWidget(self.snippet_help)

        left = QWidget(self)
        left.setObjectName("ServerLeft")
        self.left_layout = QVBoxLayout(left)
        self.left_layout.setContentsMargins(0, 0, 10, 0)
        self.left_layout.setSpacing(14)
        self.left_layout.addWidget(settings_card)
        self.left_layout.addWidget(connect_card)
        self.left_layout.addStretch(1)
        self.left_scroll = QScrollArea(self)
        self.left_scroll.setObjectName("ServerScroll")
        self.left_scroll.setWidget(left)
        self.left_scroll.setWidgetResizable(True)
        self.left_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.left_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.left_scroll.setMinimumWidth(0)

        # -- right column (or last, when stacked): the request log --------------------
        self.log_panel = RequestLogPanel(self)
        self.log_panel.clear_requested.connect(self._on_clear_requested)
        self.log_card = QFrame(self)
        self.log_card.setObjectName("ServerCard")
        self.log_card.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        log_layout = QVBoxLayout(self.log_card)
        log_layout.setContentsMargins(18, 16, 18, 18)
        log_layout.addWidget(self.log_panel)

        self.columns = QHBoxLayout()
        self.columns.setSpacing(14)
        self.columns.addWidget(self.left_scroll)
        self.columns.addWidget(self.log_card, 1)
        self._side_by_side = True
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 20, 24, 16)
        layout.setSpacing(14)
        layout.addWidget(self.hero)
        layout.addWidget(self.banner)
        layout.addLayout(self.columns, 1)
        self._arrange()

        self._snippet_timer = QTimer(self)
        self._snippet_timer.setSingleShot(True)
        self._snippet_timer.setInterval(0)
        self._snippet_timer.timeout.connect(self._refresh_snippets)

        controller.status_changed.connect(self._on_status_changed)
        controller.start_failed.connect(self._on_start_failed)
        controller.request_logged.connect(self._on_request_logged)
        controller.config_changed.connect(self._on_config_changed)
        controller.ollama_port_changed.connect(self._on_ollama_port_changed)
        self.form.show_key.toggled.connect(self._schedule_snippets)
        self.engine.model_loaded.connect(self._on_model_loaded)
        self.engine.model_unloaded.connect(self._schedule_snippets)
        self.log_panel.set_records(controller.request_log.records())
        self._show_status(controller.status)
        self._refresh_snippets()

    # -- layout ---------------------------------------------------------------------------

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._arrange()

    def _arrange(self) -> None:
        """Side by side when wide (the left column grows with the page, so the snippets show
        whole lines), one scrolling column when narrow (the log under the snippets)."""
        side_by_side = self.width() >= SIDE_BY_SIDE_WIDTH
        if side_by_side != self._side_by_side:
            self._side_by_side = side_by_side
            self.hero_columns.setDirection(
                QBoxLayout.Direction.LeftToRight
                if side_by_side
                else QBoxLayout.Direction.TopToBottom
            )
            self.hero_columns.setSpacing(18 if side_by_side else 8)
            if side_by_side:
                self.left_layout.removeWidget(self.log_card)
                self.columns.addWidget(self.log_card, 1)
                self.log_card.setMinimumHeight(0)
            else:
                self.columns.removeWidget(self.log_card)
                self.left_layout.insertWidget(self.left_layout.count() - 1, self.log_card)
                self.log_card.setMinimumHeight(STACKED_LOG_HEIGHT)
            self.log_card.show()
        if side_by_side:
            inner = self.width() - 48 - self.columns.spacing()
            share = max(LEFT_MIN, min(LEFT_MAX, int(inner * LEFT_SHARE)))
            # never narrower than the settings need beside a scroll bar (at 1,177 px, the
            # default window on a 1280x800 screen, the port field and "Generate" were cut)
            content = self.left_scroll.widget()
            bar = self.left_scroll.verticalScrollBar().sizeHint().width()
            needed = content.minimumSizeHint().width() + bar + 2 if content is not None else 0
            self.left_scroll.setFixedWidth(max(share, needed))
        else:
            self.left_scroll.setMinimumWidth(0)
            self.left_scroll.setMaximumWidth(QWIDGETSIZE_MAX)

    def activate(self) -> None:
        """The page was shown: find this computer's network address once (for the help)."""
        if not self._lan_checked:
            self._lan_checked = True
            tasks().submit(lan_address, self._on_lan_address, self._on_lan_address_failed)

    # -- showing state --------------------------------------------------------------------

    def _show_status(self, status: ServerStatus) -> None:
        state = status.state
        if state == "running":
            self.banner.hide()
        busy = state in ("starting", "stopping")
        wanted_on = self.controller.wanted or state in ("starting", "running")
        self.switch.set_checked_quietly(wanted_on if busy else state == "running")
        self.switch.set_busy(busy)
        for widget in (self.hero, self.state_title):
            theme.set_style_property(widget, "state", state)
        self.state_title.setText(_STATE_TITLES.get(state, state))
        config = self.controller.running_config or self.controller.config()
        url = status.base_url or _url_for(config.host, config.port)
        self.url_label.setText(url)
        self.url_label.setProperty("live", state == "running")
        self.url_label.style().unpolish(self.url_label)
        self.url_label.style().polish(self.url_label)
        if state == "running" and config.host == ALL_INTERFACES:
            where = f" at {_url_for(self._lan, config.port)}" if self._lan else ""
            detail = f"Serving your local network{where}; clients need the API key."
        elif state == "running":
            detail = "Serving apps on this computer. Turn it off to stop all API access."
        elif state == "starting":
            detail = "Opening the port…"
        elif state == "stopping":
            detail = "Finishing open requests…"
        elif state == "failed" and self.banner.isVisible():
            detail = "It is off. The message below says why."
        elif state == "failed":
            detail = status.error or "The server stopped unexpectedly."
        else:
            detail = "Turn it on to let editors, agents and scripts use your models."
        self.state_detail.setText(detail)
        self._show_ollama_urls(url)
        self._refresh_restart_notice()
        self._refresh_snippets()

    def _show_ollama_urls(self, base_url: str) -> None:
        running = self.controller.status.state == "running"
        urls = self.controller.ollama_urls if running else [ollama_url(base_url)]
        text = f"Ollama-compatible API: {' and '.join(urls)}"
        port = self.controller.ollama_port()
        if running and self.controller.ollama_error:
            text += f"\n{self.controller.ollama_error}"
        elif not running and port:
            text += f" and port {port}"
        self.ollama_label.setText(text)

    def _refresh_restart_notice(self) -> None:
        self.restart_notice.setVisible(self.controller.needs_restart())

    @Slot()
    def _schedule_snippets(self) -> None:
        self._snippet_timer.start()

    @Slot()
    def _refresh_snippets(self) -> None:
        config = self.controller.running_config or self.controller.config()
        base_url = self.controller.status.base_url or _url_for(config.host, config.port)
        loaded = self.engine.loaded
        model = _client_model_id(loaded) if loaded is not None else None
        self.snippets.set_context(base_url, model, config.api_key, self.form.show_key.isChecked())
        self.clients.set_context(base_url, model, config.api_key, self.form.show_key.isChecked())
        if loaded is not None and model is not None:
            self.model_label.setText(
                f"Model: <b>{model}</b> (loaded in Ember). Requests may also name any model "
                "in your library; it loads on first use."
            )
            self.snippet_help.setText("The snippets use the model loaded in Ember.")
        else:
            self.model_label.setText(
                "No model loaded. Requests name a model from your library "
                "(GET /v1/models lists them); it loads on first use."
            )
            self.snippet_help.setText(
                "Replace MODEL_ID with a model from GET /v1/models, or load one in Ember."
            )

    # -- events ---------------------------------------------------------------------------

    @Slot(bool)
    def _on_switch_clicked(self, checked: bool) -> None:
        self.form.flush()
        if checked:
            self.banner.hide()
        self.controller.set_enabled(checked)

    @Slot(object)
    def _on_status_changed(self, status: ServerStatus) -> None:
        self._show_status(status)

    @Slot(str)
    def _on_start_failed(self, message: str) -> None:
        if "API key" in message:
            actions = [("Generate a key and start", self._generate_and_start)]
        elif "already in use" in message:
            actions = [(f"Use port {self._spare_port()} and start", self._use_spare_port)]
        else:
            actions = []
        self.banner.show_message("error", message, actions)
        self._show_status(self.controller.status)

    @Slot()
    def _generate_and_start(self) -> None:
        self.form.generate_key()
        self.controller.set_enabled(True)

    def _spare_port(self) -> int:
        """The first free port after the configured one (binding is instant, no I/O)."""
        config = self.controller.config()
        for port in range(config.port + 1, min(config.port + 50, 65535)):
            if port_is_free(config.host, port):
                return port
        return config.port + 1

    @Slot()
    def _use_spare_port(self) -> None:
        self.form.port.setValue(self._spare_port())
        self.form.flush()
        self.controller.set_enabled(True)

    @Slot(object)
    def _on_request_logged(self, record: RequestRecord) -> None:
        self.log_panel.add_record(record)

    @Slot()
    def _on_config_changed(self) -> None:
        self._refresh_restart_notice()
        if self.controller.state != "running":
            self._show_status(self.controller.status)
        self._schedule_snippets()

    @Slot()
    def _on_ollama_port_changed(self) -> None:
        self._show_status(self.controller.status)

    @Slot(object)
    def _on_model_loaded(self, _loaded: LoadedModel) -> None:
        self._schedule_snippets()

    @Slot()
    def _on_restart_clicked(self) -> None:
        self.form.flush()
        self.controller.restart()

    @Slot()
    def _on_copy_url_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self.url_label.text())
        Toast.show_in(self, "Base URL copied", timeout_ms=2500)

    @Slot()
    def _on_key_copied(self) -> None:
        Toast.show_in(self, "API key copied", timeout_ms=2500)

    @Slot(str)
    def _on_snippet_copied(self, name: str) -> None:
        Toast.show_in(self, f"{name} snippet copied", timeout_ms=2500)

    @Slot()
    def _on_clear_requested(self) -> None:
        self.controller.request_log.clear()

    def _on_lan_address(self, address: object) -> None:
        self._lan = address if isinstance(address, str) else None
        self.form.set_lan_address(self._lan)
        self._show_status(self.controller.status)

    def _on_lan_address_failed(self, _error: BaseException) -> None:
        self._on_lan_address(None)


def _url_for(host: str, port: int) -> str:
    """The base URL a server with this config will have (what the runner reports)."""
    return ServerStatus("stopped", host, port).base_url or ""


def _client_model_id(loaded: LoadedModel) -> str:
    """What a client should send as ``model``: the id, or the file's stem when the id is the
    file's path (models the GUI loads); the server matches either."""
    if loaded.model_id == loaded.path:
        return model_name(loaded.path)
    return loaded.model_id
