"""Cached heights for finished content, so streaming stays cheap in long conversations.

Qt asks every word-wrapped rich-text label in a column for its height each time anything in
the column changes, and a QLabel answers by laying its text out again (measured: 85% of the
time of a streaming update went to ``QLabel::heightForWidth``). Content that is finished does
not change height unless its width or its children change, so such a widget answers
height-for-width questions from a small cache by width. ``invalidate_height()`` drops it; whoever
changes the content calls it (directly or through ``invalidate_ancestors``). Not by overriding
``event()``: a Python ``event()`` on many widgets costs more than it saves.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QRect, QSize, Qt
from PySide6.QtWidgets import QAbstractScrollArea, QLabel, QVBoxLayout, QWidget

HINT_WIDTH = 400
_MIN_WIDTH = 60


class HeightCache:
    """Heights of ``widget``'s layout by width, computed once per width and content."""

    def __init__(self, widget: QWidget) -> None:
        self._widget = widget
        self._heights: dict[int, int] = {}

    def invalidate(self) -> None:
        self._heights.clear()
        layout = self._widget.layout()
        if layout is not None:
            # A box layout keeps its own height-for-width answer until it is invalidated, and
            # a child changing size while hidden does not invalidate it.
            layout.invalidate()

    def height_for(self, width: int) -> int:
        height = self._heights.get(width)
        if height is None:
            layout = self._widget.layout()
            if layout is None:
                height = 0
            elif layout.hasHeightForWidth():
                height = layout.totalHeightForWidth(width)
            else:
                height = layout.sizeHint().height()
            if not self._widget.isVisible():
                return height  # not shown (nor styled) yet: sizes may still change
            if len(self._heights) > 8:
                self._heights.clear()
            self._heights[width] = height
        return height

    def size_hint(self) -> QSize:
        # As wide as the widget is (or will be): Qt asks a hint's height at the hint's width,
        # and any other width would be one more layout of everything inside.
        width = laid_out_width(self._widget)
        return QSize(width, self.height_for(width))


def laid_out_width(widget: QWidget) -> int:
    """The width ``widget`` has or will have: its own once a layout gave it one, else that of
    its nearest laid-out ancestor (a column's children are as wide as it)."""
    current: QWidget | None = widget
    while current is not None:
        if current.testAttribute(Qt.WidgetAttribute.WA_Resized) and current.width() >= _MIN_WIDTH:
            return current.width()
        current = current.parentWidget()
    return HINT_WIDTH


def invalidate_ancestors(widget: QWidget) -> None:
    """Tell the ancestors of ``widget`` that its size changed: drop their layouts' cached
    sizes (Qt skips that for a child that is not shown yet) and every cached height, up to the
    scroll area that holds it (a scrolled widget's size does not change the window's layout,
    which Qt would otherwise redo on every streamed update)."""
    parent = widget.parentWidget()
    while parent is not None and not isinstance(parent.parentWidget(), QAbstractScrollArea):
        invalidate = getattr(parent, "invalidate_height", None)
        if invalidate is not None:
            invalidate()
        else:
            layout = parent.layout()
            if layout is not None:
                layout.invalidate()
            # Its own layout item in the layout above caches its size hint too; Qt drops
            # that only once this widget's layout has run, after the layouts above ran.
            parent.updateGeometry()
        parent = parent.parentWidget()


class ColumnLayout(QVBoxLayout):
    """A vertical box layout that lays its items out at the height they need even when its
    widget is, for the moment, shorter. Qt lays a widget out in its old size before the
    widget above grows it (and synchronously, on each new child shown); a box layout squeezes
    its tallest items to fit, which lays them (and everything in them) out again, and again
    when the widget above grows it a moment later. While an answer streams in, that was
    two passes over every message on screen per update, instead of one over the message that
    grew. The overflow is clipped until the widget grows, in the same event-loop turn."""

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802 (Qt override)
        if self.hasHeightForWidth():
            needed = self.heightForWidth(rect.width())
        else:
            needed = self.sizeHint().height()
        if rect.height() < needed:
            rect = QRect(rect.x(), rect.y(), rect.width(), needed)
        super().setGeometry(rect)


class CachedLabel(QLabel):
    """A QLabel that remembers its size answers. QLabel lays its text out again for every
    size question a layout asks; the answers only change with the text, the font, the style
    or the width. Change the text with ``set_text`` so the cache is dropped."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._heights: dict[int, int] = {}
        self._hints: dict[str, QSize] = {}

    def set_text(self, text: str) -> None:
        self._heights.clear()
        self._hints.clear()
        self.setText(text)

    def heightForWidth(self, width: int) -> int:  # noqa: N802 (Qt override)
        height = self._heights.get(width)
        if height is None:
            if len(self._heights) > 8:
                self._heights.clear()
            height = self._heights[width] = super().heightForWidth(width)
        return height

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        hint = self._hints.get("size")
        if hint is None:
            hint = self._hints["size"] = super().sizeHint()
        return hint

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        hint = self._hints.get("minimum")
        if hint is None:
            hint = self._hints["minimum"] = super().minimumSizeHint()
        return hint

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        if event.type() in (
            QEvent.Type.FontChange,
            QEvent.Type.StyleChange,
            QEvent.Type.ContentsRectChange,
        ):
            self._heights.clear()
            self._hints.clear()
        super().changeEvent(event)
