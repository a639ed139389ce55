"""Rendered Markdown: a column of rich-text labels and code blocks, appendable while streaming.

While an answer streams, each top-level block gets a widget of its own, created once where it
will stay; finished blocks (see ``markdown.stable_prefix``) are done and never touched again;
only the blocks of the open tail are updated, in place, on each update. When the answer ends,
the tail's blocks are rendered as finished, again in place: a block widget is built once and
a finished block is rendered once.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QSizePolicy, QVBoxLayout, QWidget

from app.ui.chat.code_block import CodeBlock
from app.ui.chat.height_cache import (
    CachedLabel,
    ColumnLayout,
    HeightCache,
    invalidate_ancestors,
    laid_out_width,
)
from app.ui.chat.markdown import CodeSegment, HtmlSegment, MarkdownRenderer, Segment, stable_prefix


class RichTextLabel(CachedLabel):
    """Selectable, word-wrapped rich text with clickable links."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("RichText")
        self.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setWordWrap(True)
        self.setOpenExternalLinks(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.setCursor(Qt.CursorShape.IBeamCursor)
        self.source_html = ""

    def set_html(self, source_html: str, document: str) -> None:
        self.source_html = source_html
        self.set_text(document)

    # A word-wrapped label is sized by heightForWidth at the width the layout gives it. Its
    # hint is that width, too: Qt asks a hint's height at the hint's width, and any other
    # width is one more full layout of the text per change while streaming.
    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        width = laid_out_width(self)
        return QSize(width, self.heightForWidth(width))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(100, 0)


class _BlockGroup(QWidget):
    """Holds up to ``MarkdownBody.GROUP`` blocks; answers height questions from a cache (see
    height_cache), so a change in one group does not lay out the others."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self._heights = HeightCache(self)
        _column(self)

    def hasHeightForWidth(self) -> bool:  # noqa: N802 (Qt override)
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 (Qt override)
        return self._heights.height_for(width)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return self._heights.size_hint()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(0, 0)

    def invalidate_height(self) -> None:
        self._heights.invalidate()
        self.updateGeometry()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        # Sizes asked before it was shown (and styled) are stale, here and above.
        self.invalidate_height()
        invalidate_ancestors(self)


class MarkdownBody(QWidget):
    """Markdown shown as widgets. ``set_markdown`` for a finished text; ``append`` while
    streaming; ``finish_stream`` at the end.

    Blocks sit in groups of ``GROUP`` with cached heights, so a streaming update lays out the
    blocks it changed and the group they are in: its cost does not grow with the length of the
    answer.
    """

    GROUP = 12

    def __init__(self, renderer: MarkdownRenderer, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("MarkdownBody")
        self._renderer = renderer
        self._text = ""
        self._committed = 0  # text[:_committed] is finished, shown by _blocks[:_done]
        self._done = 0
        self._blocks: list[QWidget] = []
        self._groups: list[_BlockGroup] = []
        self._layout = _column(self)

    @property
    def text(self) -> str:
        return self._text

    @property
    def open_tail(self) -> str:
        """The text since the last finished block (see markdown.stable_prefix)."""
        return self._text[self._committed :]

    @property
    def _widgets(self) -> list[QWidget]:
        return list(self._blocks)

    @property
    def code_blocks(self) -> list[CodeBlock]:
        return [w for w in self._blocks if isinstance(w, CodeBlock)]

    def set_markdown(self, text: str, force: bool = False) -> None:
        if not force and text == self._text and (self._blocks or not text):
            return
        self._text = text
        self._show(0, self._renderer.segments(text))
        self._committed, self._done = len(text), len(self._blocks)

    def append(self, chunk: str) -> None:
        self._text += chunk
        stable = stable_prefix(self._text, self._committed)
        segments: list[Segment] = []
        if stable > self._committed:
            finished = self._text[self._committed : stable]
            segments = self._renderer.segments(finished, blocks=True)
        done = self._done + len(segments)
        tail = self._text[stable:]
        if tail.strip():
            segments += self._renderer.segments(tail, streaming=True, blocks=True)
        self._show(self._done, segments)
        self._committed, self._done = stable, done

    def finish_stream(self) -> None:
        """The answer is complete: its open tail becomes finished blocks, in place. Blocks
        already finished are not rendered again (a long answer would stall the GUI for that)."""
        rest = self._text[self._committed :]
        self._show(self._done, self._renderer.segments(rest, blocks=True) if rest.strip() else [])
        self._committed, self._done = len(self._text), len(self._blocks)

    def set_renderer(self, renderer: MarkdownRenderer) -> None:
        """A new theme: render again with its colours."""
        self._renderer = renderer
        for widget in self._blocks:
            if isinstance(widget, RichTextLabel):
                widget.source_html = ""
            elif isinstance(widget, CodeBlock):
                widget.refresh_theme()
        text, committed = self._text, self._committed
        self.set_markdown(text[:committed], force=True)
        if committed < len(text):
            self.append(text[committed:])

    # -- blocks ---------------------------------------------------------------------------

    def _show(self, start: int, segments: list[Segment]) -> None:
        """Make the blocks from ``start`` on show ``segments``: a widget of the right kind is
        updated in place, any other replaced; blocks beyond them are dropped."""
        created: list[QWidget] = []
        for offset, segment in enumerate(segments):
            index = start + offset
            existing = self._blocks[index] if index < len(self._blocks) else None
            if existing is not None and self._update(existing, segment):
                continue
            group = self._group_for(index)
            widget = self._create(segment, group)
            layout = group.layout()
            assert isinstance(layout, QVBoxLayout)
            if existing is not None:
                layout.replaceWidget(existing, widget)
                _discard(existing)
                self._blocks[index] = widget
            else:
                layout.addWidget(widget)
                self._blocks.append(widget)
            invalidate_ancestors(widget)
            created.append(widget)
        while len(self._blocks) > start + len(segments):
            self._drop_last()
        # Shown now, all in place (see _create), not by Qt in a later call of its own each,
        # after the layouts ran without them: that ran them once more per new block.
        for widget in created:
            widget.show()

    def _group_for(self, index: int) -> _BlockGroup:
        number = index // self.GROUP
        while len(self._groups) <= number:
            group = _BlockGroup(self)
            self._layout.addWidget(group)
            self._groups.append(group)
        return self._groups[number]

    def _drop_last(self) -> None:
        widget = self._blocks.pop()
        group = self._group_for(len(self._blocks))
        invalidate_ancestors(widget)
        group_layout = group.layout()
        assert group_layout is not None
        group_layout.removeWidget(widget)
        _discard(widget)
        if len(self._blocks) % self.GROUP == 0:
            self._groups.remove(group)
            self._layout.removeWidget(group)
            _discard(group)

    def _update(self, widget: QWidget, segment: Segment) -> bool:
        if isinstance(segment, HtmlSegment) and isinstance(widget, RichTextLabel):
            if widget.source_html != segment.html:
                widget.set_html(segment.html, self._renderer.document(segment.html))
                invalidate_ancestors(widget)  # its group's cached height
            return True
        if isinstance(segment, CodeSegment) and isinstance(widget, CodeBlock):
            widget.set_segment(segment)  # says so itself when its height changes
            return True
        return False

    def _create(self, segment: Segment, parent: QWidget) -> QWidget:
        """A widget for a segment, created in the group it will live in (moving a widget to
        another parent costs a second stylesheet pass) and styled before it is measured (a
        style's font measured after the text lays the text out twice)."""
        widget: QWidget
        if isinstance(segment, CodeSegment):
            widget = CodeBlock(segment, parent)
        else:
            widget = label = RichTextLabel(parent)
            label.ensurePolished()
            label.set_html(segment.html, self._renderer.document(segment.html))
        # Counted by the layouts before it is shown (at the end of _show), so the first
        # layout after the update already has every new block in place.
        policy = widget.sizePolicy()
        policy.setRetainSizeWhenHidden(True)
        widget.setSizePolicy(policy)
        return widget


def _column(widget: QWidget) -> QVBoxLayout:
    layout = ColumnLayout(widget)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(10)
    return layout


def _discard(widget: QWidget) -> None:
    widget.hide()
    widget.deleteLater()
