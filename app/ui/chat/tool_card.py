"""Cards above the composer that ask before something runs.

``ToolCallCard``: a tool call waiting in the chat: which tool, on which server, with which
arguments (pretty JSON), and Allow once / Always allow this tool / Deny; then "Running…" until
it is done (the chat then shows the call, and its result folded under it: tool_message.py).

``CommandCard``: the same look for a chat's MCP server whose command line was never run: the
exact command line (and folder), and Run it / Don't run.

Signal (both): ``decided(str)`` "once", "always" or "deny" ("Run it" is "once").
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

from app.safe_text import label_text


def _label(text: str, name: str, parent: QWidget, lines: bool = True) -> QLabel:
    """A plain-text label; what it shows came from a model, a server or a config, so its
    control characters are escaped (app/safe_text.py; newlines too unless ``lines``)."""
    label = QLabel(label_text(text, lines=lines), parent)
    label.setObjectName(name)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class _DecisionCard(QFrame):
    """A card that asks, with a button per decision; ``_decide`` shows what was decided."""

    decided = Signal(str)

    def __init__(self, parent: QWidget | None) -> None:
        super().__init__(parent)
        self.setObjectName("Card")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)

    def _button(self, text: str, decision: str, primary: bool = False) -> QPushButton:
        button = QPushButton(text, self)
        button.setObjectName("PrimaryButton" if primary else "SecondaryButton")
        button.setProperty("decision", decision)
        button.clicked.connect(self._on_decision_clicked)
        return button

    def _lay_out(self, widgets: tuple[QWidget, ...], buttons: tuple[QPushButton, ...]) -> None:
        self.buttons = QHBoxLayout()
        for button in buttons:
            self.buttons.addWidget(button)
        self.buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 10)
        layout.setSpacing(6)
        for widget in widgets:
            layout.addWidget(widget)
        layout.addLayout(self.buttons)

    def _decide(self, decision: str) -> None:
        raise NotImplementedError

    @Slot()
    def _on_decision_clicked(self) -> None:
        decision = str(self.sender().property("decision"))
        self._decide(decision)
        self.decided.emit(decision)


class ToolCallCard(_DecisionCard):
    """See the module docstring. ``call`` is an app.tools.loop.ToolCall."""

    def __init__(self, call: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.call = call
        where = f" · {call.server}" if call.server else ""
        self.title = _label(f"{call.tool or call.name}{where}", "StepTitle", self, lines=False)
        self.arguments = _label(call.pretty_arguments(), "ToolCallArguments", self)
        self.arguments.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.state = _label("Allow this call?", "FieldHelp", self)
        self.allow_button = self._button("Allow once", "once", primary=True)
        self.always_button = self._button("Always allow this tool", "always")
        self.deny_button = self._button("Deny", "deny")
        self._lay_out(
            (self.title, self.arguments, self.state),
            (self.allow_button, self.always_button, self.deny_button),
        )

    @property
    def waiting(self) -> bool:
        """Still asking (no button pressed)."""
        return not self.allow_button.isHidden()

    def set_running(self) -> None:
        """Decided (here or because the tool is always allowed): the call runs."""
        for button in (self.allow_button, self.always_button, self.deny_button):
            button.hide()
        self.state.setText("Running… (Esc stops it)")

    def _decide(self, decision: str) -> None:
        self.set_running()
        if decision == "deny":
            self.state.setText("Denied")


class CommandCard(_DecisionCard):
    """See the module docstring. ``request`` is an app.ui.chat.tool_turn.CommandRequest."""

    def __init__(self, request: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.call = request
        server = request.server
        self.title = _label(f"Start the MCP server {server.name}?", "StepTitle", self)
        self.intro = _label(
            "To give the model its tools, Ember would run this program on your computer:",
            "FieldHelp",
            self,
        )
        where = f"\nin {label_text(server.cwd, lines=False)}" if server.cwd else ""
        self.command = _label(f"{server.shown_command}{where}", "ToolCallArguments", self)
        self.command.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.state = _label(
            "Run it only if you trust it. You are asked once, and again if the command changes.",
            "FieldHelp",
            self,
        )
        self.run_button = self._button("Run it", "once", primary=True)
        self.skip_button = self._button("Don't run", "deny")
        self._lay_out(
            (self.title, self.intro, self.command, self.state), (self.run_button, self.skip_button)
        )
        layout = self.layout()
        assert isinstance(layout, QVBoxLayout)
        layout.addStretch(1)  # taller than needed: the room goes below, not between lines

    @property
    def waiting(self) -> bool:
        return not self.run_button.isHidden()

    def set_decided(self, decision: str) -> None:
        self.run_button.hide()
        self.skip_button.hide()
        name = self.call.server.name
        if decision == "deny":  # a short note from now on: the command line was seen
            self.intro.hide()
            self.command.hide()
            self.title.setText(f"{label_text(name)} was not started")
            self.state.setText(
                f"This answer goes on without {name}'s tools. You will be asked again next "
                "time, unless you turn it off for this chat in the Tools menu."
            )
        else:
            self.state.setText(f"Starting {name}… (Esc stops the answer)")

    def _decide(self, decision: str) -> None:
        self.set_decided(decision)
