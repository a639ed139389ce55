"""The answer of a reasoning model: its thinking folded above it ("Thought for 12 s", click to
unfold), then the answer as Markdown.

``AnswerBody`` is a ``MarkdownBody`` for the answer part: its ``text`` stays the whole text as
streamed and saved (thinking included), so the message widget streams into it and compares it
with the saved message as before; what is shown of it is split by thinking.py. While the model
thinks, the block says "Thinking…" and grows, folded; the answer starts below it once the
thinking ends. How long it took comes from the saved message (``thought_seconds``), or, while
streaming, from the time it took here.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from app.ui.chat.height_cache import invalidate_ancestors
from app.ui.chat.markdown import MarkdownRenderer
from app.ui.chat.message_body import MarkdownBody
from app.ui.chat.thinking import OPEN, Split, closed_in, split_thinking, thought_title


class ThoughtBlock(QWidget):
    """A button with the title and a chevron; the thinking's text below it when unfolded."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ThoughtBlock")
        self.button = QToolButton(self)
        self.button.setObjectName("ThoughtToggle")
        self.button.setCheckable(True)
        self.button.setAutoRaise(True)
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.button.setArrowType(Qt.ArrowType.RightArrow)
        self.button.toggled.connect(self._on_toggled)
        self.text = QLabel(self)
        self.text.setObjectName("ThoughtText")
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.PlainText)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.text.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.text)

    @property
    def title(self) -> str:
        return self.button.text()

    @property
    def unfolded(self) -> bool:
        return self.button.isChecked()

    def show_thinking(self, thinking: str, title: str) -> None:
        if title != self.button.text():
            self.button.setText(title)
            self.button.setAccessibleName(f"{title}: show or hide what the model thought")
        if thinking != self.text.text():
            self.text.setText(thinking)
            if self.unfolded:
                invalidate_ancestors(self.text)

    @Slot(bool)
    def _on_toggled(self, unfolded: bool) -> None:
        self.button.setArrowType(Qt.ArrowType.DownArrow if unfolded else Qt.ArrowType.RightArrow)
        self.text.setVisible(unfolded)
        invalidate_ancestors(self.text)


class AnswerBody(MarkdownBody):
    """See the module docstring."""

    def __init__(self, renderer: MarkdownRenderer, parent: QWidget | None = None) -> None:
        super().__init__(renderer, parent)
        self._whole = ""  # the text as written, thinking included
        self._thought: ThoughtBlock | None = None  # made for an answer that thinks
        self._seconds: float | None = None  # from the saved message
        self._started: float | None = None  # the first streamed text, here
        self._closed_after: float | None = None  # when its thinking ended, here
        self._streaming = False
        # what is streamed from now on is all answer (no thinking, or its end passed): each
        # piece goes straight to the Markdown, not through a split of the whole text
        self._settled = False

    @property
    def text(self) -> str:
        return self._whole

    @property
    def thought(self) -> ThoughtBlock | None:
        return self._thought

    def set_thought_seconds(self, seconds: object) -> None:
        self._seconds = float(seconds) if isinstance(seconds, int | float) else None
        self._show_thought(split_thinking(self._whole), streaming=self._streaming)

    def set_markdown(self, text: str, force: bool = False) -> None:
        self._whole, self._streaming, self._settled = text, False, False
        split = split_thinking(text)
        self._show_thought(split, streaming=False)
        super().set_markdown(split.answer, force)

    def append(self, chunk: str) -> None:
        now = time.perf_counter()
        if self._started is None:
            self._started = now
        self._whole += chunk
        self._streaming = True
        if self._settled and not closed_in(self._whole, len(chunk)):
            super().append(chunk)
            return
        split = split_thinking(self._whole)
        self._settled = not split.open and (split.thought or len(self._whole.lstrip()) >= len(OPEN))
        if split.thought and not split.open and self._closed_after is None:
            self._closed_after = now - self._started
        self._show_thought(split, streaming=True)
        shown = super().text
        if split.answer.startswith(shown) and split.answer != shown:
            super().append(split.answer[len(shown) :])
        elif split.answer != shown:  # "<think" turned out not to open thinking
            super().set_markdown(split.answer)

    def finish_stream(self) -> None:
        self._streaming = False
        self._show_thought(split_thinking(self._whole), streaming=False)
        super().finish_stream()

    def set_renderer(self, renderer: MarkdownRenderer) -> None:
        whole, streaming = self._whole, self._streaming  # the base renders the answer again
        super().set_renderer(renderer)  # through set_markdown and append
        self._whole, self._streaming = whole, streaming
        self._show_thought(split_thinking(whole), streaming=False)

    def _show_thought(self, split: Split, *, streaming: bool) -> None:
        if not split.thought:
            if self._thought is not None:
                self._thought.hide()
            return
        if self._thought is None:
            self._thought = ThoughtBlock(self)
            self._layout.insertWidget(0, self._thought)
        seconds = self._seconds if self._seconds is not None else self._closed_after
        self._thought.show_thinking(
            split.thinking, thought_title(seconds, split.open and streaming)
        )
        if self._thought.isHidden():
            self._thought.show()
            invalidate_ancestors(self._thought)
