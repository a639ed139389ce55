"""Settings → Providers: remote OpenAI-compatible servers whose models Ember can chat with.

The page lists the providers (name, URL, preset, where the key is kept) with Edit and Remove,
and "Add provider" opens the editor: a preset (fills in the usual URL), name, base URL, API key,
optional extra headers, and "Test connection", which lists the models found or says what went
wrong. Reading and writing the registry (and the keyring), and testing, run off the GUI thread.

Signal: ``providers_changed()`` after a provider was added, edited or removed.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from PySide6.QtCore import QRegularExpression, Qt, Signal, Slot
from PySide6.QtGui import QRegularExpressionValidator
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.providers import (
    PRESETS,
    Provider,
    ProviderRegistry,
    engine_for,
    make_provider,
    validate_provider_name,
)
from app.engine.remote import ProbeResult
from app.ui import icons, theme
from app.ui.header.remote_models import ProviderModels, RemoteCatalog
from app.ui.tasks import run_in_background

log = logging.getLogger(__name__)

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


def key_source_text(provider: Provider) -> str:
    if provider.api_key_env:
        return f"key from ${provider.api_key_env}"
    return {"keyring": "key in keyring", "file": "key in file"}.get(provider.key_source, "no key")


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


def _label(text: str, name: str, parent: QWidget, wrap: bool = False) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName(name)
    label.setWordWrap(wrap)
    return label


# ---- the editor ---------------------------------------------------------------------------------


class ProviderEditor(QWidget):
    """Add or edit one provider. Signals: ``saved(Provider)``, ``cancelled()``."""

    saved = Signal(object)
    cancelled = Signal()

    def __init__(self, registry: ProviderRegistry, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ProviderEditor")
        self.registry = registry
        self.editing: Provider | None = None
        self._test_generation = 0
        self._saving = False

        self.heading = _label("Add a provider", "SectionTitle", self)
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
        name_help = _label(
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
        self.key_note = _label(key_storage_note(registry), "FieldHelp", self, wrap=True)
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

        self.result = _label("", "TestResult", self, wrap=True)
        self.result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.result.hide()
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
        layout.addWidget(self.result)
        layout.addLayout(buttons)
        layout.addStretch(1)

    # -- starting ---------------------------------------------------------------------------

    def start(self, provider: Provider | None) -> None:
        """Show an empty form (add) or ``provider``'s settings (edit)."""
        self.editing = provider
        self._test_generation += 1
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
        """``kind``: ok, error, busy, or "" to hide."""
        self.result.setVisible(bool(text))
        self.result.setText(f"✓  {text}" if kind == "ok" else text)
        theme.set_style_property(self.result, "kind", kind)

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
        self._test_generation += 1
        generation = self._test_generation
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

        def done(result: Any, error: BaseException | None) -> None:
            if generation != self._test_generation:
                return
            self.test_button.setEnabled(True)
            if error is not None:
                self.show_result("error", str(error))
            elif isinstance(result, ProbeResult):
                self.show_result("ok", models_summary(result))

        run_in_background(probe, done, self)

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

        run_in_background(write, self._on_written, self)

    def _on_written(self, result: Any, error: BaseException | None) -> None:
        self._saving = False
        self.save_button.setEnabled(True)
        if error is not None:
            self.show_result("error", str(error))
        elif isinstance(result, Provider):
            self.saved.emit(result)

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


# ---- the list ---------------------------------------------------------------------------------


class ProviderRow(QFrame):
    """One provider in the list. Signals: ``edit_requested(Provider)``,
    ``remove_requested(Provider)``."""

    edit_requested = Signal(object)
    remove_requested = Signal(object)

    def __init__(self, provider: Provider, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ProviderRow")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.provider = provider
        p = theme.current()
        icon = QLabel(self)
        icon.setPixmap(icons.pixmap("cloud", p.accent, 22, self.devicePixelRatioF()))
        icon.setFixedWidth(26)
        self.name_label = _label(provider.name, "ProviderRowName", self)
        preset = PRESETS[provider.preset].label if provider.preset else "Custom server"
        details = " · ".join((provider.base_url, preset, key_source_text(provider)))
        self.detail_label = _label(details, "ProviderRowDetail", self)
        self.detail_label.setToolTip(details)
        self.status_label = _label("", "ProviderStatus", self)
        self.status_label.hide()
        self.edit_button = QPushButton("Edit", self)
        self.edit_button.setObjectName("SecondaryButton")
        self.edit_button.clicked.connect(self._on_edit_clicked)
        self.remove_button = QPushButton(self)
        self.remove_button.setObjectName("ProviderRemove")
        self.remove_button.setToolTip(f"Remove {provider.name}")
        self.remove_button.setAccessibleName(f"Remove {provider.name}")
        icons.set_icon(self.remove_button, "trash", role="danger", size=16)
        self.remove_button.clicked.connect(self._on_remove_clicked)
        text = QVBoxLayout()
        text.setSpacing(2)
        text.addWidget(self.name_label)
        text.addWidget(self.detail_label)
        text.addWidget(self.status_label)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(14, 12, 12, 12)
        layout.setSpacing(12)
        layout.addWidget(icon, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(text, 1)
        layout.addWidget(self.edit_button, 0, Qt.AlignmentFlag.AlignVCenter)
        layout.addWidget(self.remove_button, 0, Qt.AlignmentFlag.AlignVCenter)

    def set_status(self, entry: ProviderModels | None) -> None:
        if entry is None or entry.provider != self.provider:
            self.status_label.hide()
            return
        if entry.status == "checking":
            kind, text = "busy", "Checking…"
        elif entry.status == "error":
            kind, text = "error", entry.problem
        else:
            count = len(entry.models)
            kind, text = "ok", f"{count} model{'s' if count != 1 else ''}"
        self.status_label.setText(f"● {text}")
        self.status_label.setToolTip(entry.error)
        theme.set_style_property(self.status_label, "kind", kind)
        self.status_label.show()

    @Slot()
    def _on_edit_clicked(self) -> None:
        self.edit_requested.emit(self.provider)

    @Slot()
    def _on_remove_clicked(self) -> None:
        self.remove_requested.emit(self.provider)


class _CurrentPageStack(QWidget):
    """One page at a time, sized by the page shown: a QStackedWidget takes its tallest page's
    height, so the short provider list scrolled because the hidden editor is tall. The hidden
    pages are hidden widgets, which a layout leaves out."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._pages: list[QWidget] = []
        self._current: QWidget | None = None

    def addWidget(self, page: QWidget) -> None:  # noqa: N802 (QStackedWidget's name)
        self._layout.addWidget(page)
        self._pages.append(page)
        if self._current is None:
            self._current = page
        else:
            page.hide()

    def setCurrentWidget(self, page: QWidget) -> None:  # noqa: N802 (QStackedWidget's name)
        self._current = page
        for each in self._pages:
            each.setVisible(each is page)

    def currentWidget(self) -> QWidget | None:  # noqa: N802 (QStackedWidget's name)
        return self._current


class ProvidersPage(QWidget):
    """See the module docstring. ``catalog`` (optional) adds each provider's status."""

    providers_changed = Signal()

    def __init__(
        self,
        registry: ProviderRegistry,
        catalog: RemoteCatalog | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ProvidersPage")
        self.registry = registry
        self.catalog = catalog
        self.providers: list[Provider] = []
        self.rows: list[ProviderRow] = []
        self.confirm_box: QMessageBox | None = None
        self.loaded = False

        title = _label("Providers", "PageTitle", self)
        subtitle = _label(
            "Chat with models on other machines: any OpenAI-compatible server (vLLM, SGLang, "
            "TGI, Ollama, LM Studio, llama.cpp's server) or OpenAI itself. Their models appear "
            "in the model picker, under the provider's name.",
            "FieldHelp",
            self,
            wrap=True,
        )
        self.stack = _CurrentPageStack(self)
        self.list_view = QWidget(self.stack)
        self.rows_layout = QVBoxLayout()
        self.rows_layout.setSpacing(8)
        self.empty = self._empty_card(self.list_view)
        self.add_button = QPushButton("Add provider", self.list_view)
        self.add_button.setObjectName("PrimaryButton")
        icons.set_icon(self.add_button, "plus", role="accent_text", size=16)
        self.add_button.clicked.connect(self.add_provider)
        self.error_label = _label("", "TestResult", self.list_view, wrap=True)
        self.error_label.setProperty("kind", "error")
        self.error_label.hide()
        self.note = _label(key_storage_note(registry), "FieldHelp", self.list_view, wrap=True)
        add_row = QHBoxLayout()
        add_row.addWidget(self.add_button)
        add_row.addStretch(1)
        list_layout = QVBoxLayout(self.list_view)
        list_layout.setContentsMargins(0, 0, 0, 0)
        list_layout.setSpacing(12)
        list_layout.addWidget(self.empty)
        list_layout.addLayout(self.rows_layout)
        list_layout.addLayout(add_row)
        list_layout.addWidget(self.error_label)
        list_layout.addWidget(self.note)
        list_layout.addStretch(1)
        self.editor = ProviderEditor(registry, self.stack)
        self.editor.saved.connect(self._on_saved)
        self.editor.cancelled.connect(self.show_list)
        self.stack.addWidget(self.list_view)
        self.stack.addWidget(self.editor)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(28, 22, 28, 22)
        layout.setSpacing(12)
        layout.addWidget(title)
        layout.addWidget(subtitle)
        layout.addSpacing(6)
        layout.addWidget(self.stack, 1)
        if catalog is not None:
            catalog.changed.connect(self._on_catalog_changed)
        self.reload()

    def _empty_card(self, parent: QWidget) -> QFrame:
        card = QFrame(parent)
        card.setObjectName("Card")
        card.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        icon = QLabel(card)
        icon.setPixmap(icons.pixmap("cloud", theme.current().muted, 28, self.devicePixelRatioF()))
        icon.setAlignment(Qt.AlignmentFlag.AlignCenter)
        heading = _label("No providers yet", "StepTitle", card)
        heading.setAlignment(Qt.AlignmentFlag.AlignCenter)
        hint = _label(
            "Add one to use a bigger machine, a GPU server on your network, or a hosted API, "
            "next to the models on this computer.",
            "StepHint",
            card,
            wrap=True,
        )
        hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout = QVBoxLayout(card)
        layout.setContentsMargins(24, 22, 24, 22)
        layout.setSpacing(6)
        layout.addWidget(icon)
        layout.addWidget(heading)
        layout.addWidget(hint)
        card.hide()
        return card

    # -- the list ---------------------------------------------------------------------------

    def reload(self) -> None:
        run_in_background(self.registry.list, self._on_listed, self)

    def _on_listed(self, result: Any, error: BaseException | None) -> None:
        self.loaded = True
        self.error_label.setVisible(error is not None)
        if error is not None:
            self.error_label.setText(str(error))
            return
        self.providers = list(result) if isinstance(result, list) else []
        for row in self.rows:
            self.rows_layout.removeWidget(row)
            row.deleteLater()
        self.rows = []
        for provider in self.providers:
            row = ProviderRow(provider, self.list_view)
            row.edit_requested.connect(self.edit_provider)
            row.remove_requested.connect(self.confirm_remove)
            if self.catalog is not None:
                row.set_status(self.catalog.entry(provider.name))
            self.rows_layout.addWidget(row)
            self.rows.append(row)
        self.empty.setVisible(not self.providers)
        self.add_button.setText("Add another provider" if self.providers else "Add provider")

    def row(self, name: str) -> ProviderRow | None:
        return next((r for r in self.rows if r.provider.name == name), None)

    @Slot()
    def show_list(self) -> None:
        self.stack.setCurrentWidget(self.list_view)

    @Slot()
    def add_provider(self) -> None:
        self.editor.start(None)
        self.stack.setCurrentWidget(self.editor)

    @Slot(object)
    def edit_provider(self, provider: Provider) -> None:
        self.editor.start(provider)
        self.stack.setCurrentWidget(self.editor)

    @Slot(object)
    def confirm_remove(self, provider: Provider) -> None:
        box = QMessageBox(
            QMessageBox.Icon.Question,
            "Remove provider",
            f"Remove {provider.name}?",
            QMessageBox.StandardButton.Cancel,
            self,
        )
        box.setInformativeText(
            "Its saved API key is deleted too. Chats with its models keep their messages."
        )
        remove = box.addButton("Remove", QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.setProperty("provider", provider.name)
        remove.clicked.connect(self._on_remove_confirmed)
        self.confirm_box = box
        box.open()

    @Slot()
    def _on_remove_confirmed(self) -> None:
        box = self.confirm_box
        if box is None:
            return
        name = str(box.property("provider"))
        self.confirm_box = None
        run_in_background(lambda: self.registry.remove(name), self._on_changed, self)

    def _on_changed(self, _result: Any, error: BaseException | None) -> None:
        if error is not None:
            self.error_label.setText(str(error))
            self.error_label.show()
            return
        self.providers_changed.emit()
        self.reload()

    @Slot(object)
    def _on_saved(self, _provider: Provider) -> None:
        self.show_list()
        self._on_changed(None, None)

    @Slot()
    def _on_catalog_changed(self) -> None:
        if self.catalog is not None:
            for row in self.rows:
                row.set_status(self.catalog.entry(row.provider.name))
