"""Settings → Providers: remote OpenAI-compatible servers whose models Ember can chat with.

The page lists the providers (name, URL, preset, where the key is kept) with Edit and Remove;
"Add provider" and Edit open the editor (``provider_editor``). Reading the registry and removing
run off the GUI thread.

Signal: ``providers_changed()`` after a provider was added, edited or removed.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.provider_ids import PRESETS
from app.engine.providers import Provider, ProviderRegistry
from app.ui import icons, theme
from app.ui.header.remote_models import ProviderModels, RemoteCatalog
from app.ui.settings.provider_editor import ProviderEditor, key_storage_note, text_label
from app.ui.task_runner import tasks


def key_source_text(provider: Provider) -> str:
    if provider.api_key_env:
        return f"key from ${provider.api_key_env}"
    return {"keyring": "key in keyring", "file": "key in file"}.get(provider.key_source, "no key")


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
        self.name_label = text_label(provider.name, "ProviderRowName", self)
        preset = PRESETS[provider.preset].label if provider.preset else "Custom server"
        details = " · ".join((provider.base_url, preset, key_source_text(provider)))
        self.detail_label = text_label(details, "ProviderRowDetail", self)
        self.detail_label.setToolTip(details)
        self.status_label = text_label("", "ProviderStatus", self)
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

        title = text_label("Providers", "PageTitle", self)
        self.subtitle = subtitle = text_label(
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
        self.error_label = text_label("", "TestResult", self.list_view, wrap=True)
        self.error_label.setProperty("kind", "error")
        self.error_label.hide()
        self.note = text_label(key_storage_note(registry), "FieldHelp", self.list_view, wrap=True)
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
        heading = text_label("No providers yet", "StepTitle", card)
        heading.setAlignment(Qt.AlignmentFlag.AlignCenter)
        hint = text_label(
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
        tasks().submit(self.registry.list, self._on_listed, self._on_list_failed)

    def _on_list_failed(self, error: BaseException) -> None:
        self.loaded = True
        self.error_label.setText(str(error))
        self.error_label.show()

    def _on_listed(self, result: list[Provider]) -> None:
        self.loaded = True
        self.error_label.hide()
        self.providers = list(result)
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
        self._show(self.list_view)

    @Slot()
    def add_provider(self) -> None:
        self.editor.start(None)
        self._show(self.editor)

    @Slot(object)
    def edit_provider(self, provider: Provider) -> None:
        self.editor.start(provider)
        self._show(self.editor)

    def _show(self, page: QWidget) -> None:
        # The editor is tall: the page's introduction makes way for it.
        self.subtitle.setVisible(page is self.list_view)
        self.stack.setCurrentWidget(page)

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
        registry = self.registry
        tasks().submit(lambda: registry.remove(name), self._on_changed, self._on_change_failed)

    def _on_change_failed(self, error: BaseException) -> None:
        self.error_label.setText(str(error))
        self.error_label.show()

    def _on_changed(self, _result: object = None) -> None:
        self.providers_changed.emit()
        self.reload()

    @Slot(object)
    def _on_saved(self, _provider: Provider) -> None:
        self.show_list()
        self._on_changed()

    @Slot()
    def _on_catalog_changed(self) -> None:
        if self.catalog is not None:
            for row in self.rows:
                row.set_status(self.catalog.entry(row.provider.name))
