"""Settings → Model loading → Draft model: none, the library's suggestion for each model, or a
GGUF file chosen here (``load.draft_model``; speculative decoding, app/engine/draft_model.py).
Saves as soon as it changes; applies the next time a model loads. GUI thread only."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import QComboBox, QFileDialog, QWidget

from app.config import Settings
from app.library.drafts import DRAFT_KEY, DRAFT_SUGGESTED

CHOOSE = "\0choose"  # the item that opens a file dialog (never saved)
TIP = (
    "A small model with the same vocabulary guesses the next tokens; the loaded model checks "
    "them all at once, so answers come faster and stay exactly the model's. Suggested: a "
    "smaller model of the library with the model's tokenizer (the model picker names it). "
    "Applies the next time a model loads."
)


class DraftModelChoice(QComboBox):
    """The draft model setting as a combo box (see the module doc)."""

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("load_draft_model")
        self.setAccessibleName("Draft model")
        self.setToolTip(TIP)
        self.settings = settings
        self._fill(settings.get(DRAFT_KEY))
        self.activated.connect(self._on_activated)

    def _fill(self, value: str) -> None:
        self.blockSignals(True)
        self.clear()
        self.addItem("None", "")
        self.addItem("Suggested for each model", DRAFT_SUGGESTED)
        if value and value != DRAFT_SUGGESTED:
            self.addItem(Path(value).name, value)
            self.setItemData(self.count() - 1, value, Qt.ItemDataRole.ToolTipRole)
        self.addItem("Choose a file…", CHOOSE)
        self.setCurrentIndex(max(0, self.findData(value)))
        self.blockSignals(False)

    @Slot(int)
    def _on_activated(self, index: int) -> None:
        value = self.itemData(index)
        if value == CHOOSE:
            chosen, _ = QFileDialog.getOpenFileName(
                self, "Choose a draft model", str(Path.home()), "GGUF models (*.gguf)"
            )
            value = chosen or self.settings.get(DRAFT_KEY)
        self.choose(str(value))

    def choose(self, value: str) -> None:
        """Save ``value`` ("", DRAFT_SUGGESTED or a path) and show it."""
        self.settings.set(DRAFT_KEY, value)
        self._fill(value)
