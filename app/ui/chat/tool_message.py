"""Tool calls and results among a chat's messages (also after a restart): an assistant message
that called tools says which, with their arguments; a tool message is its result, folded
(click to open: text, JSON as indented "name: value" lines, images as thumbnails).

Signal: ``resized()`` when a result is opened or folded (the message measures itself again).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QFontDatabase, QPixmap
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from app.chats.models import Message
from app.chats.tool_messages import tool_calls
from app.safe_text import LABEL_MAX_CHARS, label_text

THUMBNAIL = 160
RESULT_MAX_CHARS = 20_000  # of a tool's result shown (the chat keeps it whole)


def _label(
    text: str, name: str, parent: QWidget, fixed: bool = False, limit: int = LABEL_MAX_CHARS
) -> QLabel:
    # names, arguments and results come from a model and a server: control characters are
    # shown escaped, and a long text is cut (app/safe_text.py)
    label = QLabel(label_text(text, limit=limit), parent)
    if fixed:  # JSON reads best in a fixed-width font
        label.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
    label.setObjectName(name)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def _pretty(text: str) -> str:
    from app.tools.results import pretty

    return pretty(text)


MAX_READABLE = 20_000  # characters of JSON turned into lines; longer results stay as text


def readable(text: str) -> str | None:
    """A JSON result as a person reads it: ``name: value`` a line, nested values indented,
    list items with "•", true/false as yes/no; None when ``text`` is not JSON."""
    import json

    stripped = text.strip()
    if stripped[:1] not in ("{", "[") or len(stripped) > MAX_READABLE:
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    lines: list[str] = []
    _lines_of(value, 0, lines)
    return "\n".join(lines) or None


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "—" if value is None or value in ([], {}) else str(value)


def _lines_of(value: Any, depth: int, out: list[str]) -> None:
    pad = "    " * depth
    if isinstance(value, dict):
        for key, item in value.items():
            name = str(key).replace("_", " ")
            if isinstance(item, dict | list) and item:
                out.append(f"{pad}{name}:")
                _lines_of(item, depth + 1, out)
            else:
                out.append(
                    f"{pad}{name}: {_scalar(item) if not isinstance(item, dict | list) else '—'}"
                )
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict | list) and item:
                out.append(f"{pad}•")
                _lines_of(item, depth + 1, out)
            else:
                out.append(f"{pad}• {_scalar(item)}")
    else:
        out.append(f"{pad}{_scalar(value)}")


class ToolMessageView(QFrame):
    """See the module docstring; hidden for messages that neither call nor answer a tool."""

    resized = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ToolMessageView")
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(4)
        self.title: QLabel | None = None
        self.toggle: QToolButton | None = None
        self.folded: list[QWidget] = []
        self.hide()

    def set_message(self, message: Message) -> None:
        self._clear()
        calls = tool_calls(message)
        if message.role == "tool":
            self._show_result(message)
        elif calls:
            for call in calls:
                function = call["function"]
                self._layout.addWidget(
                    _label(f"Called {function.get('name', '?')}", "SectionTitle", self)
                )
                arguments = _pretty(str(function.get("arguments") or "{}"))
                self._layout.addWidget(_label(arguments, "ToolCallArguments", self, fixed=True))
        self.setVisible(message.role == "tool" or bool(calls))

    def _show_result(self, message: Message) -> None:
        meta = message.metadata
        found = meta.get("output")
        output: dict[str, Any] = found if isinstance(found, dict) else {}
        name = str(meta.get("tool") or meta.get("name") or "tool")
        server = f" · {meta['server']}" if meta.get("server") else ""
        state = ""
        if meta.get("decision") == "deny":
            state = " (denied)"
        elif output.get("is_error"):
            state = " (failed)"
        self.title = _label(f"Result of {name}{server}{state}", "SectionTitle", self)
        self.toggle = QToolButton(self)
        self.toggle.setObjectName("ToolResultToggle")
        self.toggle.setText("Show result")
        self.toggle.setCheckable(True)
        self.toggle.toggled.connect(self._on_toggled)
        row = QHBoxLayout()
        row.addWidget(self.title, 1)
        row.addWidget(self.toggle)
        self._layout.addLayout(row)
        shown = readable(message.content)  # JSON as lines; other text as it is
        text = _label(shown or message.content, "ToolResultText", self, limit=RESULT_MAX_CHARS)
        self._layout.addWidget(text)
        self.folded = [text]
        for image in output.get("images") or []:
            thumb = self._thumbnail(image)
            if thumb is not None:
                self._layout.addWidget(thumb)
                self.folded.append(thumb)
        for widget in self.folded:
            widget.hide()

    def _thumbnail(self, image: Any) -> QLabel | None:
        try:
            data = base64.b64decode(str(image["data"]))
        except (KeyError, TypeError, binascii.Error):
            return None
        pixmap = QPixmap()
        if not pixmap.loadFromData(data):
            return None
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
        return thumb

    def _clear(self) -> None:
        while self._layout.count():
            item = self._layout.takeAt(0)
            if item is None:
                break
            widget = item.widget()
            layout = item.layout()
            if layout is not None:
                while layout.count():
                    inner = layout.takeAt(0)
                    child = inner.widget() if inner is not None else None
                    if child is not None:
                        child.deleteLater()
            if widget is not None:
                widget.deleteLater()
        self.title, self.toggle, self.folded = None, None, []

    @Slot(bool)
    def _on_toggled(self, shown: bool) -> None:
        for widget in self.folded:
            widget.setVisible(shown)
        if self.toggle is not None:
            self.toggle.setText("Hide result" if shown else "Show result")
        self.resized.emit()
