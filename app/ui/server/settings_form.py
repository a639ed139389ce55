"""The server's settings: who may connect (this computer or the local network), the port (and
Ollama's, optionally), the API key (hidden, show, copy, generate, clear), CORS origins and
whether images may be fetched from the URLs requests name.

Edits are saved through the controller a moment after typing stops (``flush()`` saves at once).
Choosing the local network shows a warning and, without a key, offers to generate one.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.image_bounds import MAX_IMAGE_BYTES
from app.server.aliases import MAX_ALIAS_CHARS, MAX_ALIASES, aliases_text
from app.server.ollama import OLLAMA_PORT
from app.ui import icons, theme
from app.ui.server.controller import ALL_INTERFACES, LOOPBACK, ServerController
from app.ui.server.model_ttl_field import ModelTtlField

SAVE_DELAY_MS = 350


def _help(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName("FieldHelp")
    label.setWordWrap(True)
    return label


def _tool(parent: QWidget, icon: str, tip: str) -> QToolButton:
    button = QToolButton(parent)
    button.setObjectName("FieldButton")
    button.setToolTip(tip)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    icons.set_icon(button, icon, size=16)
    return button


class ServerSettingsForm(QWidget):
    """Signals: ``key_copied()`` (for a confirmation toast)."""

    key_copied = Signal()

    def __init__(self, controller: ServerController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ServerSettingsForm")
        self.controller = controller
        self._lan_address: str | None = None
        self._save_timer = QTimer(self)
        self._save_timer.setSingleShot(True)
        self._save_timer.setInterval(SAVE_DELAY_MS)
        self._save_timer.timeout.connect(self.flush)

        # who may connect
        self.host_group = QButtonGroup(self)
        self.host_group.setExclusive(True)
        self.local_button = self._segment("This computer", "first", LOOPBACK)
        self.network_button = self._segment("Local network", "last", ALL_INTERFACES)
        host_row = QHBoxLayout()
        host_row.setSpacing(0)
        host_row.addWidget(self.local_button, 1)
        host_row.addWidget(self.network_button, 1)
        self.host_help = _help("", self)
        self.network_warning = QFrame(self)
        self.network_warning.setObjectName("NetworkWarning")
        self.network_warning.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.warning_icon = QLabel(self.network_warning)
        self.warning_icon.setFixedSize(18, 18)
        self.warning_text = QLabel(self.network_warning)
        self.warning_text.setObjectName("NetworkWarningText")
        self.warning_text.setWordWrap(True)
        self.warning_generate = QPushButton("Generate a key", self.network_warning)
        self.warning_generate.setObjectName("SmallButton")
        self.warning_generate.setCursor(Qt.CursorShape.PointingHandCursor)
        self.warning_generate.clicked.connect(self.generate_key)
        warning_layout = QGridLayout(self.network_warning)
        warning_layout.setContentsMargins(12, 10, 12, 10)
        warning_layout.setHorizontalSpacing(10)
        warning_layout.setVerticalSpacing(8)
        warning_layout.addWidget(self.warning_icon, 0, 0, Qt.AlignmentFlag.AlignTop)
        warning_layout.addWidget(self.warning_text, 0, 1)
        warning_layout.addWidget(self.warning_generate, 1, 1, Qt.AlignmentFlag.AlignLeft)
        warning_layout.setColumnStretch(1, 1)

        # port
        self.port = QSpinBox(self)
        self.port.setObjectName("PortField")
        self.port.setAccessibleName("Port")
        self.port.setRange(1, 65535)
        self.port.setGroupSeparatorShown(False)
        self.port.setFixedWidth(110)
        self.port.setAccelerated(True)
        self.port.valueChanged.connect(self._schedule_save)
        self.ollama_port = QCheckBox(f"Also listen on Ollama's port, {OLLAMA_PORT}", self)
        self.ollama_port.setObjectName("OllamaPortBox")
        self.ollama_port.toggled.connect(self._on_host_clicked)

        # images by URL
        self.image_urls = QCheckBox("Fetch images from http(s) URLs in requests", self)
        self.image_urls.setObjectName("ImageUrlsBox")
        self.image_urls.toggled.connect(self._on_image_urls_toggled)
        self.image_urls_local = QCheckBox("Also from this computer and your local network", self)
        self.image_urls_local.setObjectName("ImageUrlsLocalBox")
        self.image_urls_local.toggled.connect(self._on_image_urls_local_toggled)

        # API key
        self.key = QLineEdit(self)
        self.key.setObjectName("KeyField")
        self.key.setAccessibleName("API key")
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("None")
        self.key.textEdited.connect(self._on_key_edited)
        self.show_key = _tool(self, "eye", "Show the key")
        self.show_key.setCheckable(True)
        self.show_key.toggled.connect(self._on_show_key_toggled)
        self.copy_key = _tool(self, "copy", "Copy the key")
        self.copy_key.clicked.connect(self._on_copy_key_clicked)
        self.clear_key = _tool(self, "close", "Remove the key")
        self.clear_key.clicked.connect(self._on_clear_key_clicked)
        self.generate_button = QPushButton("Generate", self)
        self.generate_button.setObjectName("SmallButton")
        self.generate_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.generate_button.setToolTip("Make a new random key (clients need the new one)")
        self.generate_button.clicked.connect(self.generate_key)
        key_row = QHBoxLayout()
        key_row.setSpacing(4)
        key_row.addWidget(self.key, 1)
        key_row.addWidget(self.show_key)
        key_row.addWidget(self.copy_key)
        key_row.addWidget(self.clear_key)
        key_row.addSpacing(4)
        key_row.addWidget(self.generate_button)

        # CORS
        self.cors = QPlainTextEdit(self)
        self.cors.setObjectName("CorsField")
        self.cors.setPlaceholderText("http://localhost:3000")
        self.cors.setTabChangesFocus(True)
        self.cors.setFixedHeight(64)
        self.cors.textChanged.connect(self._schedule_save)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self._label("Who can connect"))
        layout.addLayout(host_row)
        layout.addWidget(self.host_help)
        layout.addWidget(self.network_warning)
        layout.addSpacing(10)
        port_row = QHBoxLayout()
        port_row.setSpacing(10)
        port_label = self._label("Port")
        port_row.addWidget(port_label)
        port_row.addStretch(1)
        port_row.addWidget(self.port)
        layout.addLayout(port_row)
        layout.addWidget(self.ollama_port)
        layout.addWidget(
            _help(
                "For tools that only call Ollama at localhost:11434. The port above answers "
                "Ollama's API too; quit Ollama first if it runs.",
                self,
            )
        )
        layout.addSpacing(10)
        self.model_ttl = ModelTtlField(controller, self)
        layout.addWidget(self.model_ttl)
        layout.addSpacing(10)
        layout.addWidget(self._label("API key"))
        layout.addLayout(key_row)
        self.key_help = _help("", self)
        layout.addWidget(self.key_help)
        layout.addSpacing(6)
        self.cors_toggle = QToolButton(self)
        self.cors_toggle.setObjectName("DisclosureButton")
        self.cors_toggle.setCheckable(True)
        self.cors_toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        self.cors_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.cors_toggle.toggled.connect(self._on_cors_toggled)
        layout.addWidget(self.cors_toggle, 0, Qt.AlignmentFlag.AlignLeft)
        self.cors_box = QWidget(self)
        cors_layout = QVBoxLayout(self.cors_box)
        cors_layout.setContentsMargins(0, 0, 0, 0)
        cors_layout.setSpacing(6)
        cors_layout.addWidget(self.cors)
        cors_layout.addWidget(
            _help(
                "Other web pages allowed to call the API, one per line (pages on this "
                "computer and app webviews always may). * allows every page.",
                self.cors_box,
            )
        )
        layout.addWidget(self.cors_box)
        self._add_aliases(layout)
        layout.addSpacing(10)
        layout.addWidget(self._label("Images"))
        layout.addWidget(self.image_urls)
        layout.addWidget(
            _help(
                "Off: clients send images inline (data URLs). On: the server downloads an image "
                f"a request links to (up to {MAX_IMAGE_BYTES >> 20} MB, PNG or JPEG) from a "
                "public address.",
                self,
            )
        )
        # a choice within the one above: indented under it, and greyed out while it is off
        local = QWidget(self)
        local_layout = QVBoxLayout(local)
        local_layout.setContentsMargins(26, 0, 0, 0)
        local_layout.setSpacing(layout.spacing())
        self.image_urls_local.setParent(local)
        local_layout.addWidget(self.image_urls_local)
        local_layout.addWidget(
            _help(
                "Lets clients' image links reach this computer and your network (other services "
                "there included): turn it on only for clients you trust.",
                local,
            )
        )
        layout.addWidget(local)
        theme.tab_in_layout_order(self)  # the key's field was made after the boxes below it
        self.load()
        self.cors_toggle.setChecked(bool(self.cors_origins()))
        self._on_cors_toggled(self.cors_toggle.isChecked())
        self.aliases_toggle.setChecked(bool(self.model_aliases()))
        self._on_aliases_toggled(self.aliases_toggle.isChecked())
        controller.config_changed.connect(self._on_config_changed)

    def _add_aliases(self, layout: QVBoxLayout) -> None:
        """Model aliases (app/server/aliases.py): a disclosure like the CORS origins'."""
        self.aliases_toggle = QToolButton(self)
        self.aliases_toggle.setObjectName("DisclosureButton")
        self.aliases_toggle.setCheckable(True)
        self.aliases_toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        self.aliases_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.aliases_toggle.toggled.connect(self._on_aliases_toggled)
        layout.addWidget(self.aliases_toggle, 0, Qt.AlignmentFlag.AlignLeft)
        self.aliases_box = QWidget(self)
        box = QVBoxLayout(self.aliases_box)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(6)
        self.aliases = QPlainTextEdit(self.aliases_box)
        self.aliases.setObjectName("AliasesField")
        self.aliases.setAccessibleName("Model aliases")
        self.aliases.setPlaceholderText("claude-sonnet-4-5=MODEL_ID")
        self.aliases.setTabChangesFocus(True)
        self.aliases.setFixedHeight(64)
        self.aliases.textChanged.connect(self._schedule_save)
        box.addWidget(self.aliases)
        box.addWidget(
            _help(
                "Model names clients send, each given to one of your models: NAME=MODEL, one "
                "per line (Claude Code asks for claude-… models). A NAME ending in * matches "
                "every name that starts so.",
                self.aliases_box,
            )
        )
        layout.addWidget(self.aliases_box)

    def model_aliases(self) -> dict[str, str]:
        """The complete NAME=MODEL lines (a line still being typed is left out)."""
        out: dict[str, str] = {}
        for line in self.aliases.toPlainText().splitlines():
            name, sep, model = line.partition("=")
            if sep and name.strip() and model.strip():
                out[name.strip()[:MAX_ALIAS_CHARS]] = model.strip()[:MAX_ALIAS_CHARS]
        return dict(list(out.items())[:MAX_ALIASES])

    def _label(self, text: str) -> QLabel:
        label = QLabel(text, self)
        label.setObjectName("FieldLabel")
        return label

    def _segment(self, text: str, position: str, host: str) -> QPushButton:
        button = theme.segment_button(text, position, self)
        button.setProperty("host", host)
        button.clicked.connect(self._on_host_clicked)
        self.host_group.addButton(button)
        return button

    # -- values ---------------------------------------------------------------------------

    @property
    def host(self) -> str:
        return ALL_INTERFACES if self.network_button.isChecked() else LOOPBACK

    def cors_origins(self) -> list[str]:
        lines = (line.strip() for line in self.cors.toPlainText().replace(",", "\n").splitlines())
        return [line.rstrip("/") for line in lines if line]

    def load(self) -> None:
        """Show the saved settings."""
        config = self.controller.config()
        network = config.host not in (LOOPBACK, "localhost", "::1", "")
        widgets = (
            self.port,
            self.key,
            self.cors,
            self.aliases,
            self.ollama_port,
            self.image_urls,
            self.image_urls_local,
        )
        for widget in widgets:
            widget.blockSignals(True)
        (self.network_button if network else self.local_button).setChecked(True)
        self.port.setValue(config.port)
        self.ollama_port.setChecked(bool(self.controller.ollama_port()))
        self.image_urls.setChecked(config.image_urls)
        self.image_urls_local.setChecked(config.image_urls_local)
        self.image_urls_local.setEnabled(config.image_urls)
        if self.key.text() != config.api_key:
            self.key.setText(config.api_key)
        if self.cors_origins() != list(config.cors_origins):
            self.cors.setPlainText("\n".join(config.cors_origins))
        if self.model_aliases() != dict(config.model_aliases):
            self.aliases.setPlainText(aliases_text(config.model_aliases))
        for widget in widgets:
            widget.blockSignals(False)
        self._refresh()

    def set_lan_address(self, address: str | None) -> None:
        self._lan_address = address
        self._refresh()

    @Slot()
    def flush(self) -> None:
        """Save what the fields show now."""
        self._save_timer.stop()
        self.controller.update_settings(
            host=self.host,
            port=self.port.value(),
            api_key=self.key.text().strip(),
            cors_origins=self.cors_origins(),
            model_aliases=self.model_aliases(),
            ollama_port=self._ollama_port(),
        )

    def _ollama_port(self) -> int:
        if not self.ollama_port.isChecked():
            return 0
        return self.controller.ollama_port() or OLLAMA_PORT  # a port set in settings.json stays

    @Slot()
    def generate_key(self) -> None:
        self._save_timer.stop()
        self.flush()
        self.controller.generate_key()
        self.load()

    def _refresh(self) -> None:
        network = self.network_button.isChecked()
        has_key = bool(self.key.text().strip())
        port = self.port.value()
        if network:
            where = f"http://{self._lan_address}:{port}/v1" if self._lan_address else None
            self.host_help.setText(
                f'Other devices on your network use <span style="white-space:nowrap">{where}</span>'
                if where
                else "Other devices on your network can reach it at this computer's address."
            )
        else:
            self.host_help.setText("Only apps on this computer can reach the API.")
        self.network_warning.setVisible(network)
        if network:
            palette = theme.current()
            role = "warning" if has_key else "danger"
            theme.set_style_property(self.network_warning, "severe", not has_key)
            self.warning_icon.setPixmap(
                icons.pixmap("alert", palette.role(role), 18, self.devicePixelRatioF())
            )
            self.warning_text.setText(
                "Anyone on your network who has the key can use your models and read their "
                "answers. Share the key only with people you trust."
                if has_key
                else "An API key is required to serve the local network; Ember will not "
                "start without one."
            )
            self.warning_generate.setVisible(not has_key)
        self.key_help.setText(
            "Clients send it as the header Authorization: Bearer <key> (or x-api-key)."
            if has_key
            else "Optional on this computer; required on the local network."
        )
        for button in (self.show_key, self.copy_key, self.clear_key):
            button.setEnabled(has_key)
        count = len(self.cors_origins())
        self.cors_toggle.setText(f"Allowed web origins (CORS){f' · {count}' if count else ''}")
        count = len(self.model_aliases())
        self.aliases_toggle.setText(f"Model aliases{f' · {count}' if count else ''}")

    # -- events ---------------------------------------------------------------------------

    @Slot()
    def _schedule_save(self) -> None:
        self._save_timer.start()
        self._refresh()

    @Slot()
    def _on_host_clicked(self) -> None:
        self.flush()
        self._refresh()

    @Slot(str)
    def _on_key_edited(self, _text: str) -> None:
        self._schedule_save()

    @Slot(bool)
    def _on_image_urls_toggled(self, on: bool) -> None:
        self.controller.set_image_urls(on)
        self.image_urls_local.setEnabled(on)

    @Slot(bool)
    def _on_image_urls_local_toggled(self, on: bool) -> None:
        self.controller.set_image_urls_local(on)

    @Slot(bool)
    def _on_show_key_toggled(self, shown: bool) -> None:
        self.key.setEchoMode(QLineEdit.EchoMode.Normal if shown else QLineEdit.EchoMode.Password)
        icons.set_icon(self.show_key, "eye-off" if shown else "eye", size=16)
        self.show_key.setToolTip("Hide the key" if shown else "Show the key")
        self.show_key.setAccessibleName(icons.spoken("Hide the key" if shown else "Show the key"))

    @Slot()
    def _on_copy_key_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self.key.text().strip())
        self.key_copied.emit()

    @Slot()
    def _on_clear_key_clicked(self) -> None:
        self.key.clear()
        self.flush()
        self._refresh()

    @Slot(bool)
    def _on_cors_toggled(self, shown: bool) -> None:
        self.cors_box.setVisible(shown)
        icons.set_icon(self.cors_toggle, "chevron-down" if shown else "chevron-right", size=14)

    @Slot(bool)
    def _on_aliases_toggled(self, shown: bool) -> None:
        self.aliases_box.setVisible(shown)
        icons.set_icon(self.aliases_toggle, "chevron-down" if shown else "chevron-right", size=14)

    @Slot()
    def _on_config_changed(self) -> None:
        if not self._save_timer.isActive():
            self.load()
