"""Settings → Models: other apps' model stores Ember lists in place, and the models hidden
from the library.

Each store (Ollama, llama.cpp, Jan, GPT4All: :mod:`app.library.stores`) shows where it is
(or where Ember looked) and a switch, kept in ``library.sources`` (unset: on when found).
Hidden models are those a delete hid, since Ember never deletes another app's files; each has
"Show again". Finding the folders and reading the hidden list run off the GUI thread, on the
app's task runner. Signals: ``sources_changed()`` when a switch or the hidden list changed
(the library should scan again).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.config import Settings
from app.library.local import Library
from app.library.stores import SOURCES_SETTING, enabled, known_stores
from app.ui.task_runner import tasks


@dataclass(frozen=True, slots=True)
class StoreRow:
    """A store as the page shows it."""

    key: str
    title: str
    roots: tuple[Path, ...]
    found: tuple[Path, ...]
    on: bool


@dataclass(frozen=True, slots=True)
class Survey:
    stores: tuple[StoreRow, ...]
    hidden: tuple[str, ...]


def survey(switches: dict[str, object], library: Library) -> Survey:
    """The stores and the hidden models (a few ``stat`` calls and one small file: off the GUI
    thread)."""
    rows = tuple(
        StoreRow(s.key, s.title, s.roots, s.found(), enabled(s, switches)) for s in known_stores()
    )
    return Survey(rows, tuple(library.hidden_paths()))


class ModelsPage(QWidget):
    """The page; ``library`` is the app's (its hidden list is the one unhidden)."""

    sources_changed = Signal()

    def __init__(self, settings: Settings, library: Library, parent: QWidget | None = None):
        super().__init__(parent)
        self.settings = settings
        self.library = library
        self.survey: Survey | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(28, 22, 28, 22)
        layout.setSpacing(12)
        heading = QLabel("Models", self)
        heading.setObjectName("PageTitle")
        sub = QLabel(
            "Ember runs the models other apps keep where they are: it never copies, changes or "
            "deletes their files. Deleting one of them in Ember hides it.",
            self,
        )
        sub.setObjectName("FieldHelp")
        sub.setWordWrap(True)
        layout.addWidget(heading)
        layout.addWidget(sub)
        self.stores_box = QVBoxLayout()
        self.stores_box.setSpacing(10)
        layout.addLayout(self.stores_box)
        hidden_title = QLabel("Hidden models", self)
        hidden_title.setObjectName("SectionTitle")
        layout.addSpacing(8)
        layout.addWidget(hidden_title)
        self.hidden_box = QVBoxLayout()
        self.hidden_box.setSpacing(6)
        layout.addLayout(self.hidden_box)
        layout.addStretch(1)
        self.switches: dict[str, QCheckBox] = {}
        self.show_buttons: dict[str, QPushButton] = {}
        self.refresh()

    def refresh(self) -> None:
        """Look for the stores and read the hidden list again (off-thread)."""
        switches = dict(self.settings.get(SOURCES_SETTING))
        library = self.library
        tasks().submit(
            lambda: survey(switches, library),
            self._on_surveyed,
            key=("settings-models", id(self)),
            receiver=self,
            coalesce=True,
            name="settings-models-survey",
        )

    def _on_surveyed(self, result: Survey) -> None:
        self.survey = result
        for box in (self.stores_box, self.hidden_box):
            while box.count():
                item = box.takeAt(0)
                widget = item.widget() if item is not None else None
                if widget is not None:
                    widget.deleteLater()
        self.switches.clear()
        self.show_buttons.clear()
        for row in result.stores:
            self.stores_box.addWidget(self._store_row(row))
        if not result.hidden:
            none = QLabel("None. A model from another app that you delete in Ember is hidden.")
            none.setObjectName("FieldHelp")
            none.setWordWrap(True)
            self.hidden_box.addWidget(none)
        for path in result.hidden:
            self.hidden_box.addWidget(self._hidden_row(path))

    def _store_row(self, row: StoreRow) -> QWidget:
        widget = QWidget(self)
        layout = QVBoxLayout(widget)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        switch = QCheckBox(row.title, widget)
        switch.setChecked(row.on)
        switch.setProperty("store", row.key)
        switch.toggled.connect(self._on_switch_toggled)
        self.switches[row.key] = switch
        if row.found:
            where = "Found: " + ", ".join(map(str, row.found))
        else:
            where = "Not found (looked in " + ", ".join(map(str, row.roots)) + ")"
        label = QLabel(where, widget)
        label.setTextFormat(Qt.TextFormat.PlainText)  # paths, never markup
        label.setObjectName("FieldHelp")
        label.setWordWrap(True)
        label.setToolTip(where)
        layout.addWidget(switch)
        layout.addWidget(label)
        return widget

    def _hidden_row(self, path: str) -> QWidget:
        widget = QWidget(self)
        layout = QHBoxLayout(widget)
        layout.setContentsMargins(0, 0, 0, 0)
        label = QLabel(Path(path).name, widget)
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setToolTip(path)
        button = QPushButton("Show again", widget)
        button.setObjectName("SecondaryButton")
        button.setProperty("path", path)
        button.clicked.connect(self._on_show_again_clicked)
        self.show_buttons[path] = button
        layout.addWidget(label, 1)
        layout.addWidget(button)
        return widget

    @Slot(bool)
    def _on_switch_toggled(self, checked: bool) -> None:
        key = self.sender().property("store")
        switches = dict(self.settings.get(SOURCES_SETTING))
        switches[str(key)] = checked
        self.settings.set(SOURCES_SETTING, switches)
        self.sources_changed.emit()

    @Slot()
    def _on_show_again_clicked(self) -> None:
        path = str(self.sender().property("path"))
        library = self.library
        tasks().submit(
            lambda: library.unhide(path),
            self._on_unhidden,
            receiver=self,
            name="settings-models-unhide",
        )

    def _on_unhidden(self, _shown: bool) -> None:
        self.sources_changed.emit()
        self.refresh()
