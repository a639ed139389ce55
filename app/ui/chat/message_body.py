"""Rendered Markdown: a column of rich-text labels and code blocks, appendable while streaming.

While an answer streams, finished blocks (see ``markdown.stable_prefix``) are rendered once and
frozen; only the open tail is re-rendered on each update, in place. When the answer ends, the
tail is rendered as finished too; so every block is rendered as a whole exactly once.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QSizePolicy, QVBoxLayout, QWidget

from app.ui.chat.code_block import CodeBlock
from app.ui.chat.height_cache import HINT_WIDTH, CachedLabel, HeightCache, invalidate_ancestors
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

    # A word-wrapped label is sized by heightForWidth; QLabel's own size hints lay the text
    # out at other widths first (two more full layouts per change while streaming).
    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(HINT_WIDTH, self.heightForWidth(max(self.width(), HINT_WIDTH // 2)))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(HINT_WIDTH // 4, 0)


class _FrozenBox(QWidget):
    """Holds finished blocks; answers height questions from a cache (see height_cache)."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self._heights = HeightCache(self)

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

    Finished blocks sit in groups of ``GROUP`` with cached heights and the open tail in a box of
    its own, so a streaming update re-lays out the tail and one group at most: its cost does not
    grow with the length of the answer.
    """

    GROUP = 12

    def __init__(self, renderer: MarkdownRenderer, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("MarkdownBody")
        self._renderer = renderer
        self._text = ""
        self._committed = 0  # text[:_committed] is rendered into _frozen
        self._frozen: list[QWidget] = []
        self._groups: list[_FrozenBox] = []
        self._tail: list[QWidget] = []
        self._frozen_box = QWidget(self)
        self._tail_box = QWidget(self)
        self._frozen_layout = _column(self._frozen_box)
        self._tail_layout = _column(self._tail_box)
        layout = _column(self)
        layout.addWidget(self._frozen_box)
        layout.addWidget(self._tail_box)
        self._tail_box.hide()

    @property
    def text(self) -> str:
        return self._text

    @property
    def _widgets(self) -> list[QWidget]:
        return [*self._frozen, *self._tail]

    @property
    def code_blocks(self) -> list[CodeBlock]:
        return [w for w in self._widgets if isinstance(w, CodeBlock)]

    def set_markdown(self, text: str, force: bool = False) -> None:
        if not force and text == self._text and (self._widgets or not text):
            return
        self._freeze(len(self._tail))
        self._text = text
        self._committed = len(text)
        segments = self._renderer.segments(text)
        for index, segment in enumerate(segments):
            if index < len(self._frozen) and self._update(self._frozen[index], segment):
                invalidate_ancestors(self._frozen[index])
                continue
            self._put_frozen(index, self._create(segment, self._group_for(index)))
        while len(self._frozen) > len(segments):
            self._drop_frozen()
        self._tail_box.hide()

    def append(self, chunk: str) -> None:
        self._text += chunk
        stable = stable_prefix(self._text, self._committed)
        finished: list[Segment] = []
        if stable > self._committed:
            finished = self._renderer.segments(self._text[self._committed : stable])
        tail_text = self._text[stable:]
        tail = self._renderer.segments(tail_text, streaming=True) if tail_text.strip() else []
        for segment in finished:
            index = len(self._frozen)
            self._put_frozen(index, self._create(segment, self._group_for(index)))
        self._apply_tail(tail)
        self._committed = stable
        self._tail_box.setVisible(bool(self._tail))

    def finish_stream(self) -> None:
        """The answer is complete: its open tail becomes finished blocks. Blocks already
        finished are not rendered again (a long answer would stall the GUI for that)."""
        rest = self._text[self._committed :]
        self._apply_tail(self._renderer.segments(rest) if rest.strip() else [])
        # The tail's widgets stay where they are (moving them costs a stylesheet pass each).
        self._tail_box.setVisible(bool(self._tail))

    def set_renderer(self, renderer: MarkdownRenderer) -> None:
        """A new theme: render again with its colours."""
        self._renderer = renderer
        for widget in self._widgets:
            if isinstance(widget, RichTextLabel):
                widget.source_html = ""
            elif isinstance(widget, CodeBlock):
                widget.refresh_theme()
        text, committed = self._text, self._committed
        self.set_markdown(text[:committed], force=True)
        if committed < len(text):
            self.append(text[committed:])

    # -- finished blocks ------------------------------------------------------------------

    def _group_for(self, index: int) -> _FrozenBox:
        number = index // self.GROUP
        while len(self._groups) <= number:
            group = _FrozenBox(self._frozen_box)
            _column(group)
            self._frozen_layout.addWidget(group)
            self._groups.append(group)
        return self._groups[number]

    def _put_frozen(self, index: int, widget: QWidget) -> None:
        """Show ``widget`` as finished block ``index`` (replacing one or appending)."""
        group = self._group_for(index)
        layout = group.layout()
        assert isinstance(layout, QVBoxLayout)
        if index < len(self._frozen):
            old = self._frozen[index]
            layout.replaceWidget(old, widget)
            _discard(old)
            self._frozen[index] = widget
        else:
            layout.addWidget(widget)
            self._frozen.append(widget)
        invalidate_ancestors(widget)

    def _drop_frozen(self) -> None:
        widget = self._frozen.pop()
        group = self._group_for(len(self._frozen))
        invalidate_ancestors(widget)
        group_layout = group.layout()
        assert group_layout is not None
        group_layout.removeWidget(widget)
        _discard(widget)
        if len(self._frozen) % self.GROUP == 0:
            self._groups.remove(group)
            self._frozen_layout.removeWidget(group)
            _discard(group)

    def _freeze(self, count: int) -> None:
        """Move the first ``count`` tail widgets to the finished blocks."""
        for widget in self._tail[:count]:
            self._tail_layout.removeWidget(widget)
            self._put_frozen(len(self._frozen), widget)
        del self._tail[:count]

    # -- the tail -------------------------------------------------------------------------

    def _apply_tail(self, segments: list[Segment]) -> None:
        """Make the tail widgets show ``segments``, updating widgets of the right kind in
        place and replacing the rest."""
        tail = self._tail
        for index, segment in enumerate(segments):
            existing = tail[index] if index < len(tail) else None
            if existing is not None and self._update(existing, segment):
                continue
            widget = self._create(segment, self._tail_box)
            if existing is not None:
                self._tail_layout.replaceWidget(existing, widget)
                _discard(existing)
                tail[index] = widget
            else:
                self._tail_layout.addWidget(widget)
                tail.append(widget)
        for widget in tail[len(segments) :]:
            self._tail_layout.removeWidget(widget)
            _discard(widget)
        del tail[len(segments) :]

    def _update(self, widget: QWidget, segment: Segment) -> bool:
        if isinstance(segment, HtmlSegment) and isinstance(widget, RichTextLabel):
            if widget.source_html != segment.html:
                widget.set_html(segment.html, self._renderer.document(segment.html))
            return True
        if isinstance(segment, CodeSegment) and isinstance(widget, CodeBlock):
            widget.set_segment(segment)
            return True
        return False

    def _create(self, segment: Segment, parent: QWidget) -> QWidget:
        """A widget for a segment, created in the container it will live in (moving a widget
        to another parent costs a second stylesheet pass)."""
        if isinstance(segment, CodeSegment):
            return CodeBlock(segment, parent)
        label = RichTextLabel(parent)
        label.set_html(segment.html, self._renderer.document(segment.html))
        return label


def _column(widget: QWidget) -> QVBoxLayout:
    layout = QVBoxLayout(widget)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(10)
    return layout


def _discard(widget: QWidget) -> None:
    widget.hide()
    widget.deleteLater()
