"""Settings → Providers → Add/Edit: the editor of one remote provider.

A preset (fills in the usual URL), name, base URL, API key, optional extra headers, and "Test
connection", which lists the models found or says what went wrong. Writing the registry (and
the keyring) and testing run off the GUI thread.

Signals: ``saved(Provider)``, ``cancelled()``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from PySide6.QtCore import QEvent, QObject, QPoint, QRegularExpression, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QRegularExpressionValidator
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QScrollBar,
    QVBoxLayout,
    QWidget,
)

from app.engine.provider_ids import PRESETS, validate_provider_name
from app.engine.providers import Provider, ProviderRegistry, engine_for, make_provider
from app.engine.remote import ProbeResult
from app.ui import icons, theme
from app.ui.task_runner import tasks

MAX_LISTED_MODELS = 6
TEST_NAME = "provider"  # stands in for a name not typed yet while testing


def key_storage_note(registry: ProviderRegistry) -> str:
    """Where typed API keys go, for people."""
    if registry.secrets.kind == "keyring":
        return "API keys you type here are kept in your system's keyring."
    where = getattr(registry.secrets, "path", registry.path.parent / "secrets.json")
    return (
        f"No system keyring is available, so API keys are kept in {where}, a file only your "
        "user account can read."
    )


def parse_headers(text: str) -> dict[str, str]:
    """``Name: value`` lines; raises ValueError naming the first bad line."""
    headers: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
            raise ValueError(f"Header line {number} should look like “Name: value”.")
        headers[name.strip()] = value.strip()
    return headers


def models_summary(result: ProbeResult) -> str:
    models = result.models
    if not models:
        return f"Connected in {result.seconds:.2f} s, but the server lists no models."
    shown = ", ".join(models[:MAX_LISTED_MODELS])
    more = len(models) - MAX_LISTED_MODELS
    if more > 0:
        shown += f" and {more} more"
    noun = "model" if len(models) == 1 else "models"
    return f"Connected in {result.seconds:.2f} s · {len(models)} {noun}: {shown}"


def text_label(text: str, name: str, parent: QWidget, wrap: bool = False) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName(name)
    label.setWordWrap(wrap)
    return label


class ProviderEditor(QWidget):
    """Add or edit one provider. Signals: ``saved(Provider)``, ``cancelled()``."""

    saved = Signal(object)
    cancelled = Signal()

    def __init__(self, registry: ProviderRegistry, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ProviderEditor")
        self.registry = registry
        self.editing: Provider | None = None
        self._test_key = (object(), "test")  # a newer test (or form) drops the older's answer
        self._saving = False

        self.heading = text_label("Add a provider", "SectionTitle", self)
        self.preset = QComboBox(self)
        self.preset.setObjectName("ProviderPreset")
        self.preset.addItem("Custom server", "")
        for preset in PRESETS.values():
            self.preset.addItem(preset.label, preset.name)
        self.preset.currentIndexChanged.connect(self._on_preset_changed)
        self.name = QLineEdit(self)
        self.name.setObjectName("ProviderName")
        self.name.setPlaceholderText("e.g. gpu-box")
        self.name.setValidator(
            QRegularExpressionValidator(QRegularExpression("[a-z0-9-]{0,40}"), self.name)
        )
        name_help = text_label(
            "Lowercase letters, digits and dashes. Its models show as name::model.",
            "FieldHelp",
            self,
            wrap=True,
        )
        self.url = QLineEdit(self)
        self.url.setObjectName("ProviderUrl")
        self.url.setPlaceholderText("http://host:port/v1")
        self.key = QLineEdit(self)
        self.key.setObjectName("ProviderKey")
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.forget_key = QCheckBox("Forget the saved key", self)
        self.forget_key.setObjectName("ForgetKey")
        self.forget_key.hide()
        self.headers = QPlainTextEdit(self)
        self.headers.setObjectName("ProviderHeaders")
        self.headers.setPlaceholderText("Optional, one per line, e.g. X-Team: research")
        self.headers.setFixedHeight(64)
        self.key_note = text_label(key_storage_note(registry), "FieldHelp", self, wrap=True)
        self.key_note.setObjectName("KeyStorageNote")

        form = QFormLayout()
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        form.setHorizontalSpacing(18)
        form.setVerticalSpacing(10)
        form.addRow(theme.form_label("Server type", self.preset, self), self.preset)
        name_box = QVBoxLayout()
        name_box.setSpacing(3)
        name_box.addWidget(self.name)
        name_box.addWidget(name_help)
        form.addRow(theme.form_label("Name", self.name, self), name_box)
        form.addRow(theme.form_label("Base URL", self.url, self), self.url)
        key_box = QVBoxLayout()
        key_box.setSpacing(4)
        key_box.addWidget(self.key)
        key_box.addWidget(self.forget_key)
        key_box.addWidget(self.key_note)
        form.addRow(theme.form_label("API key", self.key, self), key_box)
        form.addRow(theme.form_label("Extra headers", self.headers, self), self.headers)

        self.result = text_label("", "TestResult", self, wrap=True)
        self.result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.result.hide()
        self.result.installEventFilter(self)
        self._reveal = False  # a result is shown: keep it in view as it takes its size
        self._watched_bar: QScrollBar | None = None
        self.test_button = QPushButton("Test connection", self)
        self.test_button.setObjectName("SecondaryButton")
        icons.set_icon(self.test_button, "server", size=16)
        self.test_button.clicked.connect(self.test_connection)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.clicked.connect(self.cancelled)
        self.save_button = QPushButton("Add provider", self)
        self.save_button.setObjectName("PrimaryButton")
        self.save_button.setDefault(True)
        self.save_button.clicked.connect(self.save)
        buttons = QHBoxLayout()
        buttons.setSpacing(8)
        buttons.addWidget(self.test_button)
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.save_button)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(12)
        layout.addWidget(self.heading)
        layout.addLayout(form)
        # The result goes under the buttons: a long error grows downwards and never pushes
        # Test, Cancel and Add out of reach.
        layout.addLayout(buttons)
        layout.addWidget(self.result)
        layout.addStretch(1)

    # -- starting ---------------------------------------------------------------------------

    def start(self, provider: Provider | None) -> None:
        """Show an empty form (add) or ``provider``'s settings (edit)."""
        self.editing = provider
        tasks().cancel_key(self._test_key)  # a test still running is forgotten, and so
        self.test_button.setEnabled(True)  # its button comes back for the new form
        self._saving = False
        self.heading.setText(f"Edit {provider.name}" if provider else "Add a provider")
        self.save_button.setText("Save" if provider else "Add provider")
        self.save_button.setEnabled(True)
        self.preset.blockSignals(True)
        self.preset.setCurrentIndex(
            max(0, self.preset.findData(provider.preset or "")) if provider else 0
        )
        self.preset.blockSignals(False)
        self.name.setText(provider.name if provider else "")
        self.name.setReadOnly(provider is not None)
        self.name.style().unpolish(self.name)  # :read-only is not re-evaluated by itself
        self.name.style().polish(self.name)
        self.name.setToolTip(
            "A provider keeps its name; remove it and add it again to rename." if provider else ""
        )
        self.url.setText(provider.base_url if provider else "")
        self.key.clear()
        self.forget_key.setChecked(False)
        stored = provider is not None and provider.key_ref in ("keyring", "file")
        self.forget_key.setVisible(stored)
        self.headers.setPlainText(
            "\n".join(f"{k}: {v}" for k, v in provider.headers.items()) if provider else ""
        )
        self._update_key_placeholder()
        self.show_result("", "")
        (self.url if provider else self.name).setFocus()

    def _update_key_placeholder(self) -> None:
        provider = self.editing
        if provider is not None and provider.api_key_env:
            text = f"Read from ${provider.api_key_env}; type a key to store one instead"
        elif provider is not None and provider.key_ref in ("keyring", "file"):
            where = "keyring" if provider.key_ref == "keyring" else "key file"
            text = f"Saved in the {where}; type a new key to replace it"
        elif (
            PRESETS.get(str(self.preset.currentData()))
            and PRESETS[str(self.preset.currentData())].needs_key
        ):
            text = "Required by this service"
        else:
            text = "Optional; most servers on your own machines need none"
        self.key.setPlaceholderText(text)

    # -- values -----------------------------------------------------------------------------

    def values(self, *, for_test: bool = False) -> tuple[Provider, str | None]:
        """The provider and the typed key. Raises ValueError with a message for people."""
        name = self.name.text().strip()
        if for_test and not name:
            name = TEST_NAME
        if not name:
            raise ValueError("Give the provider a name, like gpu-box.")
        validate_provider_name(name)
        url = self.url.text().strip()
        if not url:
            raise ValueError("Give the server's base URL, like http://localhost:8000/v1.")
        if "://" not in url:
            url = "http://" + url
        preset = str(self.preset.currentData()) or None
        provider = make_provider(
            name, url, preset, headers=parse_headers(self.headers.toPlainText())
        )
        if self.editing is not None:
            provider = dataclasses.replace(provider, key_ref=self.editing.key_ref)
        return provider, self.key.text().strip() or None

    def show_result(self, kind: str, text: str) -> None:
        """``kind``: ok, error, busy, or "" to hide. A result is scrolled into view."""
        self.result.setVisible(bool(text))
        self.result.setText(f"✓  {text}" if kind == "ok" else text)
        theme.set_style_property(self.result, "kind", kind)
        self._reveal = bool(text)
        if text:
            QTimer.singleShot(0, self, self._reveal_result)

    @Slot(int, int)
    def _on_scroll_range_changed(self, _low: int, _high: int) -> None:
        if self._reveal:
            QTimer.singleShot(0, self, self._reveal_result)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        # The result's height is known only once the layouts above it have run: reveal it
        # when it takes its size (a wrapped message grows in steps).
        if watched is self.result and event.type() == QEvent.Type.Resize and self._reveal:
            QTimer.singleShot(0, self, self._reveal_result)
        return False

    @Slot()
    def _reveal_result(self) -> None:
        """Scroll the Settings page so the buttons and the result under them are in view."""
        scroll = self.parentWidget()
        while scroll is not None and not isinstance(scroll, QScrollArea):
            scroll = scroll.parentWidget()
        body = scroll.widget() if scroll is not None else None
        if scroll is None or body is None or not self.result.isVisible():
            return
        # The buttons and the result below them in view; the buttons first if both do not fit.
        top = self.test_button.mapTo(body, QPoint(0, 0)).y() - 8
        bottom = self.result.mapTo(body, QPoint(0, self.result.height())).y() + 8
        bar = scroll.verticalScrollBar()
        if bar is not self._watched_bar:  # the page grows after the result: follow it
            self._watched_bar = bar
            bar.rangeChanged.connect(self._on_scroll_range_changed)
        height = scroll.viewport().height()
        if bar.value() > top or bottom - top > height:
            bar.setValue(top)
        elif bar.value() + height < bottom:
            bar.setValue(bottom - height)

    # -- testing ----------------------------------------------------------------------------

    @Slot()
    def test_connection(self) -> None:
        try:
            provider, key = self.values(for_test=True)
        except ValueError as e:
            self.show_result("error", str(e))
            return
        forget = self.forget_key.isChecked()
        registry = self.registry
        self.test_button.setEnabled(False)
        self.show_result("busy", f"Connecting to {provider.base_url}…")

        def probe() -> ProbeResult:  # a pool thread
            api_key = key
            if api_key is None and not forget and provider.key_ref is not None:
                api_key = registry.api_key(provider)
            engine = engine_for(dataclasses.replace(provider, key_ref=None), api_key)
            try:
                return engine.probe()
            finally:
                engine.shutdown()

        tasks().submit(
            probe, self._on_tested, self._on_test_failed, key=self._test_key, lane="network"
        )

    def _on_tested(self, result: ProbeResult) -> None:
        self.test_button.setEnabled(True)
        self.show_result("ok", models_summary(result))

    def _on_test_failed(self, error: BaseException) -> None:
        self.test_button.setEnabled(True)
        self.show_result("error", str(error))

    # -- saving -----------------------------------------------------------------------------

    @Slot()
    def save(self) -> None:
        if self._saving:
            return
        try:
            provider, key = self.values()
        except ValueError as e:
            self.show_result("error", str(e))
            return
        editing = self.editing
        forget = self.forget_key.isChecked()
        registry = self.registry
        self._saving = True
        self.save_button.setEnabled(False)

        def write() -> Provider:  # a pool thread: the keyring may take its time
            if editing is None:
                return registry.add(provider, key)
            changes: dict[str, Any] = {
                "base_url": provider.base_url,
                "preset": provider.preset,
                "headers": provider.headers,
            }
            if key:
                changes["api_key"] = key
            elif forget:
                changes["api_key"] = None
            return registry.update(editing.name, **changes)

        tasks().submit(write, self._on_written, self._on_write_failed)

    def _on_written(self, result: Provider) -> None:
        self._saving = False
        self.save_button.setEnabled(True)
        self.saved.emit(result)

    def _on_write_failed(self, error: BaseException) -> None:
        self._saving = False
        self.save_button.setEnabled(True)
        self.show_result("error", str(error))

    # -- events -----------------------------------------------------------------------------

    @Slot(int)
    def _on_preset_changed(self, _index: int) -> None:
        preset = PRESETS.get(str(self.preset.currentData()))
        if preset is not None:
            url = self.url.text().strip()
            if not url or url in {p.base_url for p in PRESETS.values()}:
                self.url.setText(preset.base_url)
            name = self.name.text().strip()
            if self.editing is None and (not name or name in PRESETS):
                self.name.setText(preset.name)
        self._update_key_placeholder()
