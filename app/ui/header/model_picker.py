"""The model picker: shows the loaded model and its context, loads another, unloads.

A pill-shaped button in the header opens a menu of every model in the library plus "Open GGUF
file…" and "Unload". While a model loads the pill shows the elapsed time and a busy bar.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import QSize, Qt, QTimer, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMenu,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.types import EngineError, LoadedModel
from app.ui import icons, theme
from app.ui.engine_session import EngineSession, model_name
from app.ui.header.model_list import ModelCatalog


class ModelPicker(QWidget):
    """See the module docstring. Uses the EngineSession's signals for its state."""

    def __init__(
        self, engine: EngineSession, catalog: ModelCatalog, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ModelPicker")
        self.engine = engine
        self.catalog = catalog
        self.button = QPushButton(self)
        self.button.setObjectName("ModelPickerButton")
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.button.setMinimumWidth(200)
        self.button.setMaximumWidth(460)
        self.name_label = QLabel(self.button)
        self.name_label.setObjectName("ModelPickerName")
        self.detail_label = QLabel(self.button)
        self.detail_label.setObjectName("ModelPickerDetail")
        self.chip_icon = QLabel(self.button)
        self.chevron = QLabel(self.button)
        for label in (self.name_label, self.detail_label, self.chip_icon, self.chevron):
            label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        inner = QHBoxLayout(self.button)
        inner.setContentsMargins(14, 0, 12, 0)
        inner.setSpacing(8)
        inner.addWidget(self.chip_icon)
        inner.addWidget(self.name_label, 1)
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
        self.menu.aboutToShow.connect(self._on_menu_about_to_show)
        self.button.clicked.connect(self.open_menu)
        self._load_started_at = 0.0
        self._tick = QTimer(self)
        self._tick.setInterval(500)
        self._tick.timeout.connect(self._refresh)
        self.last_error: str | None = None

        engine.load_started.connect(self._on_load_started)
        engine.model_loaded.connect(self._on_model_loaded)
        engine.load_failed.connect(self._on_load_failed)
        engine.model_unloaded.connect(self._refresh)
        self._refresh()

    # -- actions --------------------------------------------------------------------------

    @Slot()
    def open_menu(self) -> None:
        self.catalog.refresh()
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
        self.catalog.add_file(path)
        self.engine.load(path)

    @Slot()
    def unload(self) -> None:
        self.engine.unload()

    # -- menu -----------------------------------------------------------------------------

    @Slot()
    def _on_menu_about_to_show(self) -> None:
        self.menu.clear()
        loaded = self.engine.loaded
        models = self.catalog.models
        header = self.menu.addAction("Models on this computer" if models else "No models found")
        header.setEnabled(False)
        for entry in models:
            action = QAction(f"{entry.name}\t{entry.detail}", self.menu)
            action.setCheckable(True)
            action.setChecked(loaded is not None and loaded.path == entry.path)
            action.setData(entry.path)
            action.setToolTip(entry.path)
            action.triggered.connect(self._on_model_action)
            self.menu.addAction(action)
        self.menu.addSeparator()
        self.menu.addAction(theme.icon("folder"), "Open GGUF file…", self.open_file)
        unload = self.menu.addAction(theme.icon("eject"), "Unload model", self.unload)
        unload.setEnabled(loaded is not None and not self.engine.loading_path)

    @Slot()
    def _on_model_action(self) -> None:
        action = self.sender()
        if isinstance(action, QAction):
            self.load(str(action.data()))

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
        if loading:
            elapsed = time.perf_counter() - self._load_started_at
            self.chip_icon.setPixmap(icons.pixmap("chip", p.accent, 18, ratio))
            self.name_label.setText(f"Loading {model_name(loading)}…")
            self.detail_label.setText(f"{elapsed:.0f} s")
            self.button.setToolTip(loading)
            self.button.setProperty("state", "loading")
        elif loaded is not None:
            self.chip_icon.setPixmap(icons.pixmap("chip", p.accent, 18, ratio))
            self.name_label.setText(model_name(loaded.path))
            self.detail_label.setText(f"{loaded.n_ctx:,} ctx")
            self.button.setToolTip(
                f"{loaded.path}\nContext: {loaded.n_ctx:,} tokens (trained for "
                f"{loaded.n_ctx_train:,}) · {loaded.n_threads} threads · loaded in "
                f"{loaded.load_seconds:.1f} s"
            )
            self.button.setProperty("state", "loaded")
        else:
            self.chip_icon.setPixmap(icons.pixmap("chip", p.muted, 18, ratio))
            self.name_label.setText("Select a model to load")
            self.detail_label.setText("")
            self.button.setToolTip("Choose a model (Ctrl+L)")
            self.button.setProperty("state", "empty")
        self.detail_label.setVisible(bool(self.detail_label.text()))
        self.button.style().unpolish(self.button)
        self.button.style().polish(self.button)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(380, 40)
