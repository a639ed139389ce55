"""Every keyboard shortcut, in one list: the Help dialog shows it, README.md lists it
(tests/ui/conformance/test_keyboard.py keeps the three in step), and the main window's own
shortcuts must all be in it.

Keys are written as Qt's portable text ("Ctrl+N"); the dialog shows them as the platform
does (⌘N on macOS).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QGridLayout,
    QLabel,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

SHORTCUTS: tuple[tuple[str, str], ...] = (
    ("Ctrl+N", "New chat"),
    ("Enter", "Send the message"),
    ("Shift+Enter", "New line in the message"),
    ("Esc", "Stop the answer"),
    ("Ctrl+K", "Search the chats"),
    ("Ctrl+B", "Show or hide the sidebar"),
    ("Ctrl+L", "Choose a model"),
    ("Ctrl+Shift+C", "Copy the last answer"),
    ("Ctrl+1", "Chats"),
    ("Ctrl+2", "Models"),
    ("Ctrl+3", "Server"),
    ("Ctrl+,", "Settings"),
    ("F1", "Keyboard shortcuts (this list)"),
    ("Ctrl+Q", "Quit Ember"),
    ("Tab", "Next control (Shift+Tab: back)"),
)


def native(keys: str) -> str:
    """``keys`` as this platform writes them."""
    return QKeySequence(keys).toString(QKeySequence.SequenceFormat.NativeText) or keys


class ShortcutsDialog(QDialog):
    """Help: the keyboard shortcuts, two columns (keys, what they do)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ShortcutsDialog")
        self.setWindowTitle("Keyboard shortcuts")
        # the list scrolls when the screen is short (640x480): rows are never squeezed
        listing = QWidget(self)
        grid = QGridLayout(listing)
        grid.setContentsMargins(0, 0, 8, 0)
        grid.setHorizontalSpacing(24)
        grid.setVerticalSpacing(6)
        for row, (keys, what) in enumerate(SHORTCUTS):
            key = QLabel(native(keys), listing)
            key.setObjectName("ShortcutKeys")
            label = QLabel(what, listing)
            label.setWordWrap(True)
            grid.addWidget(key, row, 0, Qt.AlignmentFlag.AlignTop)
            grid.addWidget(label, row, 1)
        grid.setColumnStretch(1, 1)
        note = QLabel(
            "Every button and field is reached with Tab; Space or Enter presses a button, and "
            "the arrow keys move within a list or a group of tabs.",
            self,
        )
        note.setObjectName("FieldHelp")
        note.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 20, 24, 16)
        layout.setSpacing(14)
        scroll = QScrollArea(self)
        scroll.setObjectName("ShortcutList")
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidgetResizable(True)
        scroll.setWidget(listing)
        scroll.setMinimumHeight(min(listing.sizeHint().height(), 160))
        layout.addWidget(scroll, 1)
        layout.addWidget(note)
        layout.addWidget(buttons)
        self.setMinimumWidth(360)
