"""A tool call in the chat: which tool, on which server, with which arguments (pretty JSON);
while it waits, Allow once / Always allow this tool / Deny; then what became of it, and its
result collapsed under it (text or pretty JSON, images as thumbnails; click to open).

Signal: ``decided(str)`` "once", "always" or "deny".
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

THUMBNAIL = 160
RESULT_LINES = 12  # the open result's height; longer results scroll


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
        self.setObjectName("ToolCallCard")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.call = call
        where = f" · {call.server}" if call.server else ""
        self.title = _label(f"{call.tool or call.name}{where}", "ToolCallTitle", self)
        self.arguments = _label(call.pretty_arguments(), "ToolCallArguments", self)
        self.state = _label("Allow this call?", "ToolCallState", self)
        self.allow_button = self._button("Allow once", "once", primary=True)
        self.always_button = self._button("Always allow this tool", "always")
        self.deny_button = self._button("Deny", "deny")
        self.buttons = QHBoxLayout()
        for button in (self.allow_button, self.always_button, self.deny_button):
            self.buttons.addWidget(button)
        self.buttons.addStretch(1)
        self.toggle = QToolButton(self)
        self.toggle.setObjectName("ToolResultToggle")
        self.toggle.setText("Show result")
        self.toggle.setCheckable(True)
        self.toggle.toggled.connect(self._on_toggled)
        self.toggle.hide()
        self.result = QPlainTextEdit(self)
        self.result.setObjectName("ToolResult")
        self.result.setReadOnly(True)
        self.result.setFixedHeight(self.result.fontMetrics().lineSpacing() * RESULT_LINES)
        self.result.hide()
        self.images = QHBoxLayout()
        self.thumbnails: list[QLabel] = []
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 10)
        layout.setSpacing(6)
        layout.addWidget(self.title)
        layout.addWidget(self.arguments)
        layout.addWidget(self.state)
        layout.addLayout(self.buttons)
        layout.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.result)
        layout.addLayout(self.images)

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

    def set_result(self, call: Any) -> None:
        """The call ran, was denied or failed: say so, and keep the result folded under it."""
        from app.tools.results import pretty

        self.call = call
        self.set_running()
        output = call.output
        if call.decision == "deny":
            self.state.setText("Denied")
        elif output is not None and output.is_error:
            self.state.setText("Failed")
        else:
            self.state.setText("Done" + (" (always allowed)" if call.decision == "always" else ""))
        if output is None:
            return
        self.result.setPlainText(pretty(output.text))
        self.toggle.show()
        for image in output.images:
            pixmap = QPixmap()
            if pixmap.loadFromData(image.data):
                thumb = QLabel(self)
                thumb.setObjectName("ToolResultImage")
                thumb.setPixmap(
                    pixmap.scaled(
                        THUMBNAIL,
                        THUMBNAIL,
                        Qt.AspectRatioMode.KeepAspectRatio,
                        Qt.TransformationMode.SmoothTransformation,
                    )
                )
                thumb.hide()
                self.images.addWidget(thumb)
                self.thumbnails.append(thumb)

    @Slot(bool)
    def _on_toggled(self, shown: bool) -> None:
        self.result.setVisible(shown)
        for thumb in self.thumbnails:
            thumb.setVisible(shown)
        self.toggle.setText("Hide result" if shown else "Show result")

    @Slot()
    def _on_decision_clicked(self) -> None:
        decision = str(self.sender().property("decision"))
        self.set_running()
        if decision == "deny":
            self.state.setText("Denied")
        self.decided.emit(decision)
