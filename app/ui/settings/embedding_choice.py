"""The choice of embedding model for attached files: automatic, the loaded model, a library
GGUF, or off.

A setting of the app (every chat), kept in settings.json under
``app.attachments.embedder.EMBEDDING_SETTING`` and read each time a question's passages are
chosen, so a change applies to the next question. A GGUF chosen here is loaded for
embeddings only, the first time it is needed.
"""

from __future__ import annotations

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import QComboBox, QLabel, QVBoxLayout, QWidget

from app.attachments.embedder import AUTO, EMBEDDING_SETTING, LOADED, OFF, embedding_choice
from app.config import Settings
from app.ui import theme
from app.ui.header.model_list import ModelEntry

HELP = (
    "For every chat: long attached files give the passages that match the question's words "
    "and, with an embedding model, its meaning. Automatic uses an embedding GGUF from your "
    "library (download one such as nomic-embed-text) and words alone without one. The loaded "
    "model embeds at about the cost of reading each file as a prompt: slow with large models."
)


class EmbeddingChoice(QWidget):
    """A combo saving the choice at once. Signal: ``choice_changed(str)`` (the saved value)."""

    choice_changed = Signal(str)

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.combo = QComboBox(self)
        self.combo.setObjectName("EmbeddingCombo")
        theme.shrinking_combo(self.combo)
        self.combo.setAccessibleName("Embedding model for attached files")
        help_label = QLabel(HELP, self)
        help_label.setObjectName("FieldHelp")
        help_label.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.combo)
        layout.addWidget(help_label)
        self.set_models([])
        self.combo.currentIndexChanged.connect(self._on_combo_changed)

    def set_models(self, models: list[ModelEntry]) -> None:
        """The library's models to choose from (the saved choice stays, listed or not)."""
        chosen = embedding_choice(self.settings)
        self.combo.blockSignals(True)
        self.combo.clear()
        self.combo.addItem("Automatic: an embedding model from the library", AUTO)
        self.combo.addItem("The loaded model", LOADED)
        for entry in models:
            if entry.path not in (AUTO, LOADED, OFF):
                self.combo.addItem(f"{entry.name}  ({entry.detail})", entry.path)
        if self.combo.findData(chosen) < 0 and chosen != OFF:
            self.combo.addItem(chosen, chosen)  # a file no longer in the library
        self.combo.addItem("Off: words alone", OFF)
        self.combo.setCurrentIndex(max(0, self.combo.findData(chosen)))
        self.combo.blockSignals(False)

    @Slot(int)
    def _on_combo_changed(self, _index: int) -> None:
        value = str(self.combo.currentData() or AUTO)
        self.settings.set(EMBEDDING_SETTING, value)
        self.choice_changed.emit(value)
