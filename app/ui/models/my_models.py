"""My models: the local library (Ember's models, imports, other apps' stores: the Hugging Face
cache, LM Studio, Ollama, llama.cpp, Jan, GPT4All; folders the user added), with Load, Reveal
in the file manager and Delete.

Every call to the ``Library`` (scan, import, delete) runs off the GUI thread, in order, on
the page's one-thread "library" lane of the task runner. Delete asks first and only deletes
Ember's own files; any other model is hidden instead (never deleted), which the banner says,
with Undo (and, for an added folder, an offer to stop listing it).

Signals: ``load_requested(str path)``; ``library_changed()`` after a scan found a new list;
``model_deleted(str path)``.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Literal

from PySide6.QtCore import Qt, QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QPushButton,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.config import Settings
from app.engine.gguf_format import human_bytes
from app.library.hidden import hidden_note
from app.library.local import Library
from app.library.local_model import SOURCE_TITLES, LibraryError, LocalModel
from app.library.projectors import VISION_TAG
from app.ui import icons, theme
from app.ui.banner import Banner
from app.ui.models.widgets import Chip, IconLabel, StatePanel, scroll_list
from app.ui.task_runner import Lane, tasks

SOURCES = SOURCE_TITLES


def _with_places(models: list[LocalModel]) -> tuple[list[LocalModel], dict[str, tuple[Path, ...]]]:
    """The scan, and for each model found at several paths, all of them (the library
    lists the same file once, with its ``locations``)."""
    return models, {m.id: m.locations for m in models if len(m.locations) > 1}


def context_label(tokens: int | None) -> str:
    if not tokens:
        return ""
    return f"{tokens // 1024}K context" if tokens >= 1024 else f"{tokens} context"


class LocalModelRow(QFrame):
    """One model: name, where it is from, quant, size, context, and its actions."""

    def __init__(
        self, model: LocalModel, parent: QWidget | None = None, places: tuple[Path, ...] = ()
    ) -> None:
        super().__init__(parent)
        self.setObjectName("LocalModelRow")
        self.places = places  # the same file found at several paths: all of them
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.model = model
        broken = model.error is not None
        icon = IconLabel("alert" if broken else "chip", 20, "danger" if broken else "muted", self)
        name = QLabel(model.name, self)
        name.setObjectName("LocalName")
        name.setToolTip(str(model.path))
        where = model.repo_id or str(model.path.parent)
        origin = QLabel(where, self)
        origin.setObjectName("LocalOrigin")
        origin.setToolTip(str(model.path))
        chips = QHBoxLayout()
        chips.setSpacing(6)
        chips.addWidget(Chip(SOURCES.get(model.source, model.source), "source", self))
        if model.quant:
            chips.addWidget(Chip(model.quant, "accent", self))
        info = model.info
        if info is not None and info.size_label:
            chips.addWidget(Chip(info.size_label, "plain", self))
        chips.addWidget(Chip(human_bytes(model.size), "plain", self))
        ctx = context_label(info.context_length if info else None)
        if ctx:
            chips.addWidget(Chip(ctx, "plain", self))
        if len(places) > 1:  # one entry for one file, wherever it was found
            where_all = Chip(f"{len(places)} places", "plain", self)
            where_all.setToolTip("The same file in several places:\n" + "\n".join(map(str, places)))
            chips.addWidget(where_all)
        if model.app_details:  # Ollama's template and parameters: shown, not used
            details = Chip(f"{SOURCES.get(model.source, model.source)} details", "plain", self)
            shown = "\n\n".join(f"{title}:\n{text[:1500]}" for title, text in model.app_details)
            # another app's text: escaped, so a tooltip never renders it as rich text
            details.setToolTip(
                f"<pre>{html.escape(shown)}</pre>Ember uses the GGUF's own template."
            )
            chips.addWidget(details)
        if model.mmproj is not None:
            vision = Chip(VISION_TAG, "plain", self)
            vision.setToolTip(f"Takes images: loads with its vision projector {model.mmproj.name}")
            chips.addWidget(vision)
        chips.addStretch(1)
        text = QVBoxLayout()
        text.setSpacing(4)
        head = QHBoxLayout()
        head.setSpacing(10)
        head.addWidget(name)
        head.addWidget(origin, 1)
        text.addLayout(head)
        text.addLayout(chips)
        if model.error:
            error = QLabel(model.error, self)
            error.setObjectName("DownloadError")
            error.setWordWrap(True)
            text.addWidget(error)
        self.load_button = QPushButton("Load", self)
        self.load_button.setObjectName("LoadButton")
        self.load_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.load_button.setEnabled(model.error is None)
        self.load_button.setToolTip("Load this model and start chatting")
        self.reveal_button = QToolButton(self)
        self.reveal_button.setObjectName("RowIconButton")
        self.reveal_button.setToolTip("Show in the file manager")
        self.reveal_button.setAccessibleName(icons.spoken("Show in the file manager"))
        icons.set_icon(self.reveal_button, "folder", size=17)
        self.delete_button = QToolButton(self)
        self.delete_button.setObjectName("RowIconButton")
        remove = (
            "Delete this model's files"
            if model.owned
            else "Hide this model (not Ember's file: it is never deleted)"
        )
        self.delete_button.setToolTip(remove)
        self.delete_button.setAccessibleName(icons.spoken(remove))
        icons.set_icon(self.delete_button, "trash", size=17)
        for button in (self.reveal_button, self.delete_button):
            button.setCursor(Qt.CursorShape.PointingHandCursor)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(16, 12, 12, 12)
        layout.setSpacing(14)
        layout.addWidget(icon, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(text, 1)
        layout.addWidget(self.load_button)
        layout.addWidget(self.reveal_button)
        layout.addWidget(self.delete_button)


class MyModelsView(QWidget):
    """See the module docstring."""

    load_requested = Signal(str)
    library_changed = Signal()
    model_deleted = Signal(str)
    discover_requested = Signal()

    def __init__(
        self,
        library: Library,
        settings: Settings,
        library_lane: Lane,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("MyModelsView")
        self.library = library
        self.settings = settings
        self.library_lane = library_lane
        self._scan_key = (object(), "scan")  # the task runner's key for this view's scans
        self.models: list[LocalModel] = []
        self.places: dict[str, tuple[Path, ...]] = {}  # a model found at several paths
        self.rows: dict[str, LocalModelRow] = {}
        self.scanned = False
        self.confirm: QMessageBox | None = None

        self.filter = QLineEdit(self)
        self.filter.setAccessibleName("Filter your models")
        self.filter.setObjectName("HubSearch")
        self.filter.setPlaceholderText("Filter your models")
        self.filter.setClearButtonEnabled(True)
        self.filter.addAction(theme.icon("search"), QLineEdit.ActionPosition.LeadingPosition)
        self.filter.textChanged.connect(self._apply_filter)
        self.import_button = QPushButton("Import .gguf", self)
        self.import_button.setObjectName("SecondaryButton")
        icons.set_icon(self.import_button, "import", size=16)
        menu = QMenu(self.import_button)
        menu.addAction("Copy a file into Ember…", self._on_import_copy)
        menu.addAction("Link a file, keeping it where it is…", self._on_import_link)
        self.import_button.setMenu(menu)
        self.folder_button = QPushButton("Add folder", self)
        self.folder_button.setObjectName("SecondaryButton")
        icons.set_icon(self.folder_button, "folder", size=16)
        self.folder_button.clicked.connect(self._on_add_folder_clicked)
        self.refresh_button = QToolButton(self)
        self.refresh_button.setObjectName("RowIconButton")
        self.refresh_button.setToolTip("Look for models again")
        self.refresh_button.setAccessibleName(icons.spoken("Look for models again"))
        icons.set_icon(self.refresh_button, "regenerate", size=17)
        self.refresh_button.clicked.connect(self.refresh)
        for button in (self.import_button, self.folder_button, self.refresh_button):
            button.setCursor(Qt.CursorShape.PointingHandCursor)
        bar = QHBoxLayout()
        bar.setSpacing(8)
        bar.addWidget(self.filter, 1)
        bar.addWidget(self.import_button)
        bar.addWidget(self.folder_button)
        bar.addWidget(self.refresh_button)

        self.banner = Banner(self)
        self.caption = QLabel(self)
        self.caption.setObjectName("ResultsCaption")
        self.caption.setWordWrap(True)
        scroll, self.body, self.rows_layout = scroll_list("MyModels", self)
        self._list_page = scroll
        self.state = StatePanel(self)
        self.state.action_clicked.connect(self.discover_requested)
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.state)
        self.stack.addWidget(scroll)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 4, 24, 16)
        layout.setSpacing(10)
        layout.addLayout(bar)
        layout.addWidget(self.banner)
        layout.addWidget(self.caption)
        layout.addWidget(self.stack, 1)
        self.state.show_state("loading", "Looking for models…")

    # -- scanning -------------------------------------------------------------------------

    @Slot()
    def refresh(self) -> None:
        """Scan the library again (off-thread); a request during a scan runs one more after."""
        library = self.library
        tasks().submit(
            lambda: _with_places(library.scan()),
            self._on_scanned,
            self._on_scan_failed,
            key=self._scan_key,
            lane=self.library_lane,
            coalesce=True,
        )

    def _on_scan_failed(self, error: BaseException) -> None:
        self.scanned = True
        self.banner.show_message("error", f"Could not list your models: {error}")

    def _on_scanned(self, result: tuple[list[LocalModel], dict[str, tuple[Path, ...]]]) -> None:
        self.scanned = True
        self.models, self.places = result
        self._fill()
        self.library_changed.emit()

    def _fill(self) -> None:
        self._sync_rows()
        total = sum(m.size for m in self.models)
        count = len(self.models)
        folders = [str(d) for d in self.library.extra_dirs]
        where = f" · also looking in {', '.join(folders)}" if folders else ""
        self.caption.setText(
            f"{count} model{'s' if count != 1 else ''} · {human_bytes(total)} on disk{where}"
            if count
            else ""
        )
        if not self.models:
            self.state.show_state(
                "empty",
                "No models yet",
                "Download one from Discover, import a .gguf file you already have, or add a "
                f"folder that holds some. Ember's own models live in "
                f"{html.escape(str(self.library.models_dir))}.",
                "Discover models",
                icon="box",
            )
            self.stack.setCurrentWidget(self.state)
        else:
            self.stack.setCurrentWidget(self._list_page)
        self._apply_filter(self.filter.text())

    def _sync_rows(self) -> None:
        """Make the rows match ``models``, touching only what changed: a model that is the same
        keeps its row (and with it the scroll position, focus and hover); a changed one gets a
        new row, a gone one loses its row, and rows are moved only when the order changed."""
        old, self.rows = self.rows, {}
        for model in self.models:
            if model.id in self.rows:
                continue  # ids are unique; never leave an orphan row behind
            row = old.pop(model.id, None)
            places = self.places.get(model.id, ())
            if row is not None and (row.model != model or row.places != places):
                self._drop_row(row)
                row = None
            if row is None:
                row = LocalModelRow(model, self.body, places)
                row.load_button.clicked.connect(self._on_load_clicked)
                row.reveal_button.clicked.connect(self._on_reveal_clicked)
                row.delete_button.clicked.connect(self._on_delete_clicked)
            self.rows[model.id] = row
        for row in old.values():
            self._drop_row(row)
        for index, row in enumerate(self.rows.values()):
            item = self.rows_layout.itemAt(index)
            if item is None or item.widget() is not row:
                self.rows_layout.removeWidget(row)  # nothing to do for a new row
                self.rows_layout.insertWidget(index, row)

    def _drop_row(self, row: LocalModelRow) -> None:
        self.rows_layout.removeWidget(row)
        row.hide()
        row.deleteLater()

    @Slot(str)
    def _apply_filter(self, text: str) -> None:
        needle = text.strip().lower()
        for row in self.rows.values():
            m = row.model
            haystack = f"{m.name} {m.repo_id or ''} {m.quant or ''} {m.path}".lower()
            row.setVisible(not needle or needle in haystack)

    # -- actions --------------------------------------------------------------------------

    def _row_of(self, sender: object) -> LocalModelRow | None:
        widget = sender.parentWidget() if isinstance(sender, QWidget) else None
        return widget if isinstance(widget, LocalModelRow) else None

    @Slot()
    def _on_load_clicked(self) -> None:
        row = self._row_of(self.sender())
        if row is not None:
            self.load_requested.emit(str(row.model.path))

    @Slot()
    def _on_reveal_clicked(self) -> None:
        row = self._row_of(self.sender())
        if row is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(row.model.path.parent)))

    @Slot()
    def _on_delete_clicked(self) -> None:
        row = self._row_of(self.sender())
        if row is None:
            return
        model = row.model
        if not model.owned:
            self._delete(model)  # hidden, never deleted: nothing to confirm (Undo is offered)
            return
        box = QMessageBox(self)
        box.setObjectName("ConfirmDelete")
        box.setIcon(QMessageBox.Icon.Warning)
        box.setWindowTitle("Delete model")
        parts = len(model.parts) + (len(model.projectors) if model.projectors else 0)
        files = f"{parts} files, " if parts > 1 else ""
        box.setText(f"Delete {model.name}?")
        box.setInformativeText(
            f"This removes {files}{human_bytes(model.size)} from {model.path.parent}. "
            "You can download it again later."
        )
        delete = box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.setProperty("model_id", model.id)
        self.confirm = box

        def finished() -> None:
            self.confirm = None
            if box.clickedButton() is delete:
                self._delete(model)
            box.deleteLater()

        box.finished.connect(finished)
        box.open()

    def _delete(self, model: LocalModel) -> None:
        library = self.library
        tasks().submit(
            lambda: library.delete(model.id),
            partial(self._on_deleted, model),
            partial(self._on_delete_failed, model),
            lane=self.library_lane,
        )

    def _on_deleted(self, model: LocalModel, result: object) -> None:
        if result == "hidden":
            places = model.locations or (model.path,)
            actions = [("Undo", lambda: self.unhide(places))]
            folder = self._added_folder_of(model.path)
            if folder is not None:
                actions.append(("Stop listing this folder", lambda: self.remove_folder(folder)))
            self.banner.show_message("info", hidden_note(model.name, model.path), actions)
            self.refresh()
            return
        self.banner.hide()
        self.model_deleted.emit(str(model.path))
        self.refresh()

    def _on_delete_failed(self, model: LocalModel, error: BaseException) -> None:
        self.banner.show_message("error", f"Could not delete {model.name}: {error}")

    def unhide(self, places: tuple[Path, ...]) -> None:
        """List a hidden model (all its places) again (off-thread)."""
        library = self.library
        tasks().submit(
            lambda: [library.unhide(p) for p in places],
            self._on_unhidden,
            self._on_unhide_failed,
            lane=self.library_lane,
        )

    def _on_unhidden(self, _result: object) -> None:
        self.banner.hide()
        self.refresh()

    def _on_unhide_failed(self, error: BaseException) -> None:
        self.banner.show_message("error", f"Could not show the model again: {error}")

    def _added_folder_of(self, path: Path) -> Path | None:
        for folder in self.library.extra_dirs:
            if path.is_relative_to(folder):
                return folder
        return None

    # -- import and folders ---------------------------------------------------------------

    @Slot()
    def _on_import_copy(self) -> None:
        self._pick_and_import("copy")

    @Slot()
    def _on_import_link(self) -> None:
        self._pick_and_import("link")

    def _pick_and_import(self, mode: str) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Import a GGUF model", str(Path.home()), "GGUF models (*.gguf)"
        )
        if path:
            self.import_file(path, mode)

    def import_file(self, path: str, mode: str = "copy") -> None:
        """Copy (or link) a .gguf into Ember's models folder, off-thread."""
        library = self.library
        self.caption.setText(f"Importing {Path(path).name}…")

        how: Literal["copy", "link"] = "link" if mode == "link" else "copy"
        tasks().submit(
            lambda: library.import_file(path, how),
            partial(self._on_imported, Path(path).name),
            partial(self._on_import_failed, Path(path).name),
            lane=self.library_lane,
        )

    def _on_imported(self, name: str, _result: object) -> None:
        self.banner.show_message("info", f"Imported {name}.")
        self.refresh()

    def _on_import_failed(self, name: str, error: BaseException) -> None:
        message = str(error) if isinstance(error, (LibraryError, ValueError)) else repr(error)
        self.banner.show_message("error", f"Could not import {name}: {message}")
        self._fill()

    @Slot()
    def _on_add_folder_clicked(self) -> None:
        home = str(Path.home())
        folder = QFileDialog.getExistingDirectory(self, "Add a folder with models", home)
        if folder:
            self.add_folder(folder)

    def add_folder(self, folder: str) -> None:
        """List the models in ``folder`` too (saved in ``library.extra_dirs``)."""
        library = self.library
        self._change_folders(lambda: library.add_folder(folder))

    def remove_folder(self, folder: Path) -> None:
        library = self.library
        self._change_folders(lambda: library.remove_folder(folder))

    def _change_folders(self, change: Callable[[], tuple[Path, ...]]) -> None:
        tasks().submit(
            change, self._on_folders_changed, self._on_folders_failed, lane=self.library_lane
        )

    def _on_folders_failed(self, error: BaseException) -> None:
        self.banner.show_message("error", str(error))

    def _on_folders_changed(self, result: tuple[Path, ...]) -> None:
        self.banner.hide()
        self.settings.set("library.extra_dirs", [str(f) for f in result])
        self.refresh()
