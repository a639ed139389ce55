"""A tool call waiting in the chat: which tool, on which server, with which arguments (pretty
JSON), and Allow once / Always allow this tool / Deny; then "Running…" until it is done (the
chat then shows the call, and its result folded under it: tool_message.py).

Signal: ``decided(str)`` "once", "always" or "deny".
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)


def _label(text: str, name: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName(name)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class ToolCallCard(QFrame):
    """See the module docstring. ``call`` is an app.tools.loop.ToolCall."""

    decided = Signal(str)

    def __init__(self, call: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Card")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.call = call
        where = f" · {call.server}" if call.server else ""
        self.title = _label(f"{call.tool or call.name}{where}", "StepTitle", self)
        self.arguments = _label(call.pretty_arguments(), "ToolCallArguments", self)
        self.arguments.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.state = _label("Allow this call?", "FieldHelp", self)
        self.allow_button = self._button("Allow once", "once", primary=True)
        self.always_button = self._button("Always allow this tool", "always")
        self.deny_button = self._button("Deny", "deny")
        self.buttons = QHBoxLayout()
        for button in (self.allow_button, self.always_button, self.deny_button):
            self.buttons.addWidget(button)
        self.buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 10)
        layout.setSpacing(6)
        layout.addWidget(self.title)
        layout.addWidget(self.arguments)
        layout.addWidget(self.state)
        layout.addLayout(self.buttons)

    def _button(self, text: str, decision: str, primary: bool = False) -> QPushButton:
        button = QPushButton(text, self)
        button.setObjectName("PrimaryButton" if primary else "SecondaryButton")
        button.setProperty("decision", decision)
        button.clicked.connect(self._on_decision_clicked)
        return button

    def set_running(self) -> None:
        """Decided (here or because the tool is always allowed): the call runs."""
        for button in (self.allow_button, self.always_button, self.deny_button):
            button.hide()
        self.state.setText("Running… (Esc stops it)")

    @Slot()
    def _on_decision_clicked(self) -> None:
        decision = str(self.sender().property("decision"))
        self.set_running()
        if decision == "deny":
            self.state.setText("Denied")
        self.decided.emit(decision)
