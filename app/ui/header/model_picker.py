"""The model picker: shows the chat's model and its context, loads another, unloads.

A pill-shaped button in the header opens a menu of every model in the library, then the models
of each remote provider under the provider's name (asked off-thread and cached; a provider that
is down says so), plus "Open GGUF file…" and "Unload". While a model loads the pill shows how
much of its weights are read (the elapsed time until llama.cpp reports it) and a bar. Picking a
remote model selects it (``provider::model``) without unloading the local one.

Signal: ``manage_providers_requested()`` ("Add a remote provider…" / "Manage providers…"; the
window opens Settings on the Providers page).
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import QSize, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QAction, QPainter, QPaintEvent, QPalette, QResizeEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMenu,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
    QWidgetAction,
)

from app.engine.provider_ids import parse_remote_id
from app.engine.types import EngineError, LoadedModel
from app.ui import icons, theme
from app.ui.engine_session import EngineSession, model_name
from app.ui.header.model_list import BASE_NOTICE, ModelChoices
from app.ui.header.remote_models import ProviderModels

MAX_INLINE_MODELS = 8  # a provider with more lists them in a submenu
DETAIL_MIN_WIDTH = 280  # a narrower pill shows the model's name without its context chip


class _NameLabel(QLabel):
    """The model's name: drawn ending in "…" when the pill is narrow (``text()`` stays whole),
    so a narrow header shrinks the pill instead of cutting the name off."""

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(40, super().minimumSizeHint().height())

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        painter = QPainter(self)
        painter.setPen(self.palette().color(QPalette.ColorRole.WindowText))
        rect = self.contentsRect()
        elided = self.fontMetrics().elidedText(
            self.text(), Qt.TextElideMode.ElideRight, rect.width()
        )
        painter.drawText(rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, elided)


class ModelPicker(QWidget):
    """See the module docstring. Uses the EngineSession's signals for its state."""

    manage_providers_requested = Signal()

    def __init__(
        self, engine: EngineSession, catalog: ModelChoices, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ModelPicker")
        self.engine = engine
        self.catalog = catalog
        self.button = QPushButton(self)
        self.button.setObjectName("ModelPickerButton")
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.button.setMinimumWidth(180)
        self.button.setMaximumWidth(460)
        self.name_label = _NameLabel(self.button)
        self.name_label.setObjectName("ModelPickerName")
        self.detail_label = QLabel(self.button)
        self.detail_label.setObjectName("ModelPickerDetail")
        self.chip_icon = QLabel(self.button)
        self.vision_icon = QLabel(self.button)  # an eye: the loaded model takes images
        self.vision_icon.setObjectName("ModelPickerVision")
        self.vision_icon.hide()
        self.chevron = QLabel(self.button)
        labels = (self.name_label, self.detail_label, self.chip_icon, self.vision_icon)
        for label in (*labels, self.chevron):
            label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        inner = QHBoxLayout(self.button)
        inner.setContentsMargins(14, 0, 12, 0)
        inner.setSpacing(8)
        inner.addWidget(self.chip_icon)
        inner.addWidget(self.name_label, 1)
        inner.addWidget(self.vision_icon, 0, Qt.AlignmentFlag.AlignVCenter)
        inner.addWidget(self.detail_label, 0, Qt.AlignmentFlag.AlignVCenter)
        inner.addWidget(self.chevron)
        self.progress = QProgressBar(self)
        self.progress.setObjectName("LoadingBar")
        self.progress.setRange(0, 0)
        self.progress.setTextVisible(False)
        self.progress.setFixedHeight(3)
        self.progress.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.button)
        layout.addWidget(self.progress)

        self.menu = QMenu(self)
        self.menu.setObjectName("ModelMenu")
        self.menu.setToolTipsVisible(True)
        self.menu.aboutToShow.connect(self._on_menu_about_to_show)
        self.button.clicked.connect(self.open_menu)
        self._load_started_at = 0.0
        self._tick = QTimer(self)
        self._tick.setInterval(500)
        self._tick.timeout.connect(self._refresh)
        self.last_error: str | None = None

        engine.load_started.connect(self._on_load_started)
        engine.load_progress.connect(self._refresh)
        engine.model_loaded.connect(self._on_model_loaded)
        engine.load_failed.connect(self._on_load_failed)
        engine.model_unloaded.connect(self._refresh)
        engine.remote_selected.connect(self._on_remote_selected)
        self.remote = engine.remote_catalog
        if self.remote is not None:
            self.remote.changed.connect(self._on_remote_changed)
        self._refresh()

    # -- actions --------------------------------------------------------------------------

    @Slot()
    def open_menu(self) -> None:
        self.catalog.refresh()
        if self.remote is not None:
            self.remote.refresh()
        self.menu.setMinimumWidth(self.button.width())
        self.menu.popup(self.button.mapToGlobal(self.button.rect().bottomLeft()))

    @Slot()
    def open_file(self) -> None:
        start = str(Path.home())
        chosen, _ = QFileDialog.getOpenFileName(
            self, "Open a model", start, "GGUF models (*.gguf);;All files (*)"
        )
        if chosen:
            self.load(chosen)

    def load(self, path: str) -> None:
        """Chat with a local model: load it (unless it is loaded already)."""
        self.engine.select_remote(None)
        self.catalog.add_file(path)
        loaded = self.engine.loaded
        if loaded is None or loaded.path != path or self.engine.loading_path:
            self.engine.load(path)

    def select_remote(self, model_id: str) -> None:
        """Chat with a remote model; the local one stays loaded."""
        self.engine.select_remote(model_id)

    @Slot()
    def refresh_remote(self) -> None:
        if self.remote is not None:
            self.remote.refresh(max_age=0)

    @Slot()
    def unload(self) -> None:
        self.engine.unload()

    # -- menu -----------------------------------------------------------------------------

    @Slot()
    def _on_menu_about_to_show(self) -> None:
        self.menu.clear()
        loaded = self.engine.loaded
        local = self.engine.remote_model is None
        models = self.catalog.models
        providers = self.remote.providers if self.remote is not None else []
        if providers:  # sections: this computer, then each provider
            self._add_section("chip", "Models on this computer", "")
            if not models:
                self._add_note("No models found yet", "", "")
        else:
            header = self.menu.addAction("Models on this computer" if models else "No models found")
            header.setEnabled(False)
        for entry in models:
            action = QAction(f"{entry.name}\t{entry.detail}", self.menu)
            action.setCheckable(True)
            action.setChecked(local and loaded is not None and loaded.path == entry.path)
            action.setData(entry.path)
            action.setToolTip(entry.tooltip)
            action.triggered.connect(self._on_model_action)
            self.menu.addAction(action)
        for provider in providers:
            self.menu.addSeparator()
            self._add_provider(provider)
        self.menu.addSeparator()
        self.menu.addAction(theme.icon("folder"), "Open GGUF file…", self.open_file)
        if providers:
            self.menu.addAction(
                theme.icon("regenerate"), "Refresh remote models", self.refresh_remote
            )
        text = "Manage providers…" if providers else "Add a remote provider…"
        self.menu.addAction(theme.icon("cloud"), text, self.manage_providers_requested)
        unload = self.menu.addAction(theme.icon("eject"), "Unload model", self.unload)
        unload.setEnabled(loaded is not None and not self.engine.loading_path)

    def _add_provider(self, provider: ProviderModels) -> None:
        """The provider's name, then its models (or why there are none)."""
        header = self._add_section("cloud", provider.name, provider.host)
        header.setToolTip(provider.provider.base_url)
        if provider.status != "ok" or not provider.models:
            if provider.status == "checking":
                text, kind = "Checking…", "busy"
            elif provider.status == "error":
                text, kind = provider.problem, "error"
            else:
                text, kind = "Serves no models", ""
            self._add_note(text, kind, provider.error or provider.provider.base_url)
            return
        target = self.menu
        if len(provider.models) > MAX_INLINE_MODELS:
            target = self.menu.addMenu(f"All {len(provider.models)} models")
            target.setToolTipsVisible(True)
        for model in provider.models:
            remote_id = provider.remote_id(model)
            action = QAction(model, target)
            action.setCheckable(True)
            action.setChecked(self.engine.remote_model == remote_id)
            action.setData(remote_id)
            action.setToolTip(remote_id)
            action.triggered.connect(self._on_remote_action)
            target.addAction(action)

    def _add_section(self, icon: str, name: str, detail: str) -> QWidgetAction:
        """A heading in the menu: an icon, a name and a muted detail (not clickable)."""
        p = theme.current()
        box = QWidget(self.menu)
        box.setObjectName("MenuSection")
        glyph = QLabel(box)
        glyph.setPixmap(icons.pixmap(icon, p.muted, 15, self.devicePixelRatioF()))
        glyph.setFixedWidth(16)
        title = QLabel(name, box)
        title.setObjectName("MenuSectionName")
        layout = QHBoxLayout(box)
        layout.setContentsMargins(10, 8, 14, 3)  # the name lines up with the items' text
        layout.setSpacing(5)
        layout.addWidget(glyph)
        layout.addWidget(title, 1)
        if detail:
            extra = QLabel(detail, box)
            extra.setObjectName("MenuSectionDetail")
            layout.addWidget(extra)
        action = QWidgetAction(self.menu)
        action.setDefaultWidget(box)
        action.setText(f"{name}\t{detail}" if detail else name)
        action.setEnabled(False)
        self.menu.addAction(action)
        return action

    def _add_note(self, text: str, kind: str, tip: str) -> QWidgetAction:
        """A line under a heading: why a provider has no models to offer."""
        label = QLabel(f"●  {text}" if kind else text, self.menu)
        label.setObjectName("MenuNote")
        label.setProperty("kind", kind)
        label.setToolTip(tip)
        label.setContentsMargins(31, 3, 14, 6)
        action = QWidgetAction(self.menu)
        action.setDefaultWidget(label)
        action.setText(text)
        action.setToolTip(tip)
        action.setEnabled(False)
        self.menu.addAction(action)
        return action

    @Slot()
    def _on_model_action(self) -> None:
        action = self.sender()
        if isinstance(action, QAction):
            self.load(str(action.data()))

    @Slot()
    def _on_remote_action(self) -> None:
        action = self.sender()
        if isinstance(action, QAction):
            self.select_remote(str(action.data()))

    @Slot()
    def _on_remote_changed(self) -> None:
        if self.menu.isVisible():  # answers arrive while it is open: show them
            self._on_menu_about_to_show()
        self._refresh()

    @Slot(object)
    def _on_remote_selected(self, model_id: str | None) -> None:
        if model_id is not None and self.remote is not None:
            self.remote.refresh()  # is its provider up? (cached; asked off-thread if stale)
        self._refresh()

    # -- state ----------------------------------------------------------------------------

    @Slot(str)
    def _on_load_started(self, _path: str) -> None:
        self._load_started_at = time.perf_counter()
        self.last_error = None
        self._tick.start()
        self._refresh()

    @Slot(object)
    def _on_model_loaded(self, _loaded: LoadedModel) -> None:
        self._tick.stop()
        self._refresh()

    @Slot(str, object)
    def _on_load_failed(self, _path: str, error: EngineError) -> None:
        self._tick.stop()
        self.last_error = str(error)
        self._refresh()

    @Slot()
    def _refresh(self) -> None:
        p = theme.current()
        ratio = self.devicePixelRatioF()
        loading = self.engine.loading_path
        loaded = self.engine.loaded
        self.chevron.setPixmap(icons.pixmap("chevron-down", p.muted, 16, ratio))
        self.progress.setVisible(bool(loading))
        self.vision_icon.setPixmap(icons.pixmap("eye", p.accent, 16, ratio))
        self.vision_icon.setVisible(bool(self.engine.takes_images and not loading))
        remote = parse_remote_id(self.engine.remote_model or "")
        if remote is not None:
            entry = self.remote.entry(remote.provider) if self.remote is not None else None
            down = entry is not None and entry.status == "error"
            self.chip_icon.setPixmap(
                icons.pixmap("cloud", p.muted if down else p.accent, 18, ratio)
            )
            self.name_label.setText(remote.model)
            self.detail_label.setText(remote.provider)
            where = f" at {entry.provider.base_url}" if entry is not None else ""
            status = f"\n{entry.error}" if down and entry is not None else ""
            self.button.setToolTip(f"{remote.model}, served by {remote.provider}{where}{status}")
            self.button.setProperty("state", "remote")
        elif loading:
            elapsed = time.perf_counter() - self._load_started_at
            fraction = self.engine.load_fraction
            self.chip_icon.setPixmap(icons.pixmap("chip", p.accent, 18, ratio))
            self.name_label.setText(f"Loading {model_name(loading)}…")
            if fraction is None:  # llama.cpp has not started reading the weights yet
                self.progress.setRange(0, 0)
                self.detail_label.setText(f"{elapsed:.0f} s")
            else:
                self.progress.setRange(0, 1000)
                self.progress.setValue(round(fraction * 1000))
                self.detail_label.setText(f"{fraction:.0%}")
            self.button.setToolTip(loading)
            self.button.setProperty("state", "loading")
        elif loaded is not None:
            self.chip_icon.setPixmap(icons.pixmap("chip", p.accent, 18, ratio))
            self.name_label.setText(model_name(loaded.path))
            self.detail_label.setText(f"{loaded.n_ctx:,} ctx")
            vision = ""
            if loaded.vision and loaded.params.mmproj:
                vision = f"\nVision: takes images ({Path(loaded.params.mmproj).name})"
            self.button.setToolTip(
                f"{loaded.path}\nContext: {loaded.n_ctx:,} tokens (trained for "
                f"{loaded.n_ctx_train:,}) · {loaded.n_threads} threads · loaded in "
                f"{loaded.load_seconds:.1f} s{vision}"
                + ("" if loaded.chat_template else f"\n{BASE_NOTICE[0].upper()}{BASE_NOTICE[1:]}.")
            )
            self.button.setProperty("state", "loaded")
        else:
            self.chip_icon.setPixmap(icons.pixmap("chip", p.muted, 18, ratio))
            self.name_label.setText("Select a model to load")
            self.detail_label.setText("")
            self.button.setToolTip("Choose a model (Ctrl+L)")
            self.button.setProperty("state", "empty")
        self.button.setAccessibleName(f"Model: {self.name_label.text()}")
        self.button.setAccessibleDescription(icons.spoken(self.button.toolTip()))
        self._fit_detail()
        self.button.style().unpolish(self.button)
        self.button.style().polish(self.button)

    def _fit_detail(self) -> None:
        """The context chip gives way first when the pill is narrow: the name matters more."""
        roomy = self.button.width() >= DETAIL_MIN_WIDTH or not self.isVisible()
        self.detail_label.setVisible(bool(self.detail_label.text()) and roomy)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._fit_detail()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(380, 40)
