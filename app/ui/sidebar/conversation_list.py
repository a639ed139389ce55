"""The list of conversations: day sections, rows painted by a delegate, search snippets.

Items carry their kind (section header or chat), the conversation id and, in search results,
a snippet with the matched words marked.
"""

from __future__ import annotations

import html
import re
from datetime import datetime

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPainter, QTextDocument
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QListWidget,
    QListWidgetItem,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from app.chats.grouping import group_by_day
from app.chats.models import Conversation, SearchHit
from app.ui import theme

KIND_ROLE = Qt.ItemDataRole.UserRole
ID_ROLE = Qt.ItemDataRole.UserRole + 1
SNIPPET_ROLE = Qt.ItemDataRole.UserRole + 2
ANSWERING_ROLE = Qt.ItemDataRole.UserRole + 3  # an answer is being written in it
DOT = 7  # the answering dot's diameter (px)
HEADER = "header"
CHAT = "chat"

AnyIndex = QModelIndex | QPersistentModelIndex


Spans = tuple[tuple[int, int], ...]
ELLIPSIS = "…"
_WORDS = re.compile(r"\S+")


def snippet_html(text: str, highlights: Spans) -> str:
    """A plain-text snippet as HTML with the matched words in bold."""
    parts: list[str] = []
    last = 0
    for start, end in sorted(highlights):
        if start < last:
            continue
        parts.append(html.escape(text[last:start]))
        parts.append(f"<b>{html.escape(text[start:end])}</b>")
        last = end
    parts.append(html.escape(text[last:]))
    return "".join(parts)


def fit_snippet(
    text: str, highlights: Spans, width: int, plain: QFontMetricsF, bold: QFontMetricsF
) -> tuple[str, Spans]:
    """The part of a snippet that fits in ``width`` on one line: whole words around the first
    match, with "…" where words were left out (instead of a line cut off mid-word)."""

    def advance(candidate: str, spans: Spans) -> float:
        total, last = 0.0, 0
        for start, end in spans:
            total += plain.horizontalAdvance(candidate[last:start])
            total += bold.horizontalAdvance(candidate[start:end])
            last = end
        return total + plain.horizontalAdvance(candidate[last:])

    if advance(text, highlights) <= width:
        return text, highlights
    words = [(m.start(), m.end()) for m in _WORDS.finditer(text)]
    if not words:
        return "", ()
    anchor = min(highlights)[0] if highlights else 0
    first = next((i for i, (_, end) in enumerate(words) if end > anchor), len(words) - 1)

    def window(i: int, j: int) -> tuple[str, Spans]:
        begin, end = words[i][0], words[j][1]
        body = text[begin:end]
        prefix = ELLIPSIS if i > 0 and not body.startswith(ELLIPSIS) else ""
        suffix = ELLIPSIS if j < len(words) - 1 and not body.endswith(ELLIPSIS) else ""
        shift = len(prefix) - begin
        spans = tuple(
            (max(start, begin) + shift, min(stop, end) + shift)
            for start, stop in highlights
            if start < end and stop > begin
        )
        return prefix + body + suffix, spans

    i = j = first
    best = window(i, j)
    if advance(*best) > width:  # the matched word alone is too long: cut it
        shown, spans = best
        elided = plain.elidedText(shown, Qt.TextElideMode.ElideRight, width)
        cut = len(elided) - 1 if elided.endswith(ELLIPSIS) else len(elided)
        return elided, tuple((a, min(b, cut)) for a, b in spans if a < cut)
    # Grow word by word while it fits: two words after the match for each one before it.
    left, right = i > 0, j < len(words) - 1
    added = 0
    while left or right:
        go_right = right and (not left or added % 3 != 2)
        ni, nj = (i, j + 1) if go_right else (i - 1, j)
        candidate = window(ni, nj)
        if advance(*candidate) <= width:
            i, j, best = ni, nj, candidate
            added += 1
        elif go_right:
            right = False
            continue
        else:
            left = False
            continue
        left, right = left and i > 0, right and j < len(words) - 1
    return best


def snippet_line(index: AnyIndex, font: QFont, width: int) -> tuple[QFont, str, Spans]:
    """The font, text and bold spans a row's snippet is drawn with in ``width`` pixels."""
    snippet = index.data(SNIPPET_ROLE)
    text = str(snippet[0])  # Qt may hand the tuples back as lists
    highlights = tuple((int(a), int(b)) for a, b in snippet[1])
    small = QFont(font)
    small.setPointSizeF(font.pointSizeF() * 0.88)
    strong = QFont(small)
    strong.setWeight(QFont.Weight.Bold)
    shown, spans = fit_snippet(text, highlights, width, QFontMetricsF(small), QFontMetricsF(strong))
    return small, shown, spans


class _Delegate(QStyledItemDelegate):
    def sizeHint(self, option: QStyleOptionViewItem, index: AnyIndex) -> QSize:  # noqa: N802 (Qt override)
        if index.data(KIND_ROLE) == HEADER:
            return QSize(200, 34)
        return QSize(200, 58 if index.data(SNIPPET_ROLE) else 36)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: AnyIndex) -> None:
        p = theme.current()
        rect: QRect = option.rect
        state = option.state
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if index.data(KIND_ROLE) == HEADER:
            font = QFont(option.font)
            font.setPointSizeF(font.pointSizeF() * 0.85)
            font.setWeight(QFont.Weight.DemiBold)
            painter.setFont(font)
            painter.setPen(QColor(p.faint))
            text_rect = rect.adjusted(12, 12, -8, 0)
            painter.drawText(
                text_rect,
                Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop,
                str(index.data(Qt.ItemDataRole.DisplayRole)),
            )
            painter.restore()
            return
        background = rect.adjusted(4, 1, -4, -1)
        if state & QStyle.StateFlag.State_Selected:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(p.selected))
            painter.drawRoundedRect(background, 8, 8)
        elif state & QStyle.StateFlag.State_MouseOver:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(p.surface_alt))
            painter.drawRoundedRect(background, 8, 8)
        font = QFont(option.font)
        painter.setFont(font)
        painter.setPen(QColor(p.text))
        title = str(index.data(Qt.ItemDataRole.DisplayRole))
        snippet = index.data(SNIPPET_ROLE)
        title_rect = rect.adjusted(14, 0, -12, 0)
        if snippet:
            title_rect = QRect(rect.left() + 14, rect.top() + 8, rect.width() - 26, 20)
        if index.data(ANSWERING_ROLE):  # a dot at the right end: this chat is answering
            title_rect.setRight(title_rect.right() - DOT - 8)
            dot = QRect(0, 0, DOT, DOT)
            dot.moveCenter(title_rect.center())
            dot.moveRight(rect.right() - 14)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(p.accent))
            painter.drawEllipse(dot)
            painter.setPen(QColor(p.text))
        elided = painter.fontMetrics().elidedText(
            title, Qt.TextElideMode.ElideRight, title_rect.width()
        )
        painter.drawText(
            title_rect, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, elided
        )
        if snippet:
            width = rect.width() - 26
            small, shown, spans = snippet_line(index, font, width)
            doc = QTextDocument()
            doc.setDefaultFont(small)
            doc.setDocumentMargin(0)
            doc.setDefaultStyleSheet(f"body {{ color:{p.muted}; }} b {{ color:{p.text}; }}")
            doc.setHtml(f"<body>{snippet_html(shown, spans)}</body>")
            doc.setTextWidth(width + 8)  # the fitted line never wraps
            painter.translate(rect.left() + 14, rect.top() + 30)
            painter.setClipRect(QRect(0, 0, width + 8, 20))
            doc.drawContents(painter)
        painter.restore()


class ConversationList(QListWidget):
    """Conversations in day sections (or search hits); one row per conversation."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ConversationList")
        self.setItemDelegate(_Delegate(self))
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setMouseTracking(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setEditTriggers(
            QAbstractItemView.EditTrigger.EditKeyPressed
            | QAbstractItemView.EditTrigger.DoubleClicked
        )
        self.setUniformItemSizes(False)
        self.setSpacing(0)
        self._answering: set[str] = set()

    def set_answering(self, conversation_ids: set[str]) -> None:
        """Mark the rows of the conversations whose answer is being written (a dot)."""
        self._answering = set(conversation_ids)
        blocked = self.blockSignals(True)  # itemChanged would read as a rename
        for row in range(self.count()):
            item = self.item(row)
            if item.data(KIND_ROLE) == CHAT:
                answering = item.data(ID_ROLE) in self._answering
                if bool(item.data(ANSWERING_ROLE)) != answering:
                    item.setData(ANSWERING_ROLE, answering)
                    item.setToolTip(item.text() + (" — answering…" if answering else ""))
        self.blockSignals(blocked)

    def show_conversations(self, conversations: list[Conversation], now: datetime) -> None:
        self._begin()
        for label, group in group_by_day(conversations, now):
            self._add_header(label)
            for conversation in group:
                self._add_chat(conversation.id, conversation.title)
        self._end()

    def show_hits(self, hits: list[SearchHit]) -> None:
        self._begin()
        self._add_header(f"{len(hits)} result{'s' if len(hits) != 1 else ''}")
        for hit in hits:
            snippet = (hit.snippet, tuple(sorted(hit.highlights)))
            self._add_chat(hit.conversation.id, hit.conversation.title, snippet)
        self._end()

    def shown_snippet(self, conversation_id: str) -> str:
        """The snippet line a search hit's row shows at the list's current width."""
        item = self.item_for(conversation_id)
        if item is None or not item.data(SNIPPET_ROLE):
            return ""
        width = self.visualItemRect(item).width() - 26
        return snippet_line(self.indexFromItem(item), self.font(), width)[1]

    def conversation_ids(self) -> list[str]:
        ids: list[str] = []
        for row in range(self.count()):
            item = self.item(row)
            if item.data(KIND_ROLE) == CHAT:
                ids.append(str(item.data(ID_ROLE)))
        return ids

    def item_for(self, conversation_id: str) -> QListWidgetItem | None:
        for row in range(self.count()):
            item = self.item(row)
            if item.data(KIND_ROLE) == CHAT and item.data(ID_ROLE) == conversation_id:
                return item
        return None

    def select(self, conversation_id: str | None) -> None:
        self.blockSignals(True)
        item = self.item_for(conversation_id) if conversation_id else None
        if item is None:
            self.clearSelection()
            self.setCurrentRow(-1)
        else:
            self.setCurrentItem(item)
        self.blockSignals(False)

    def _begin(self) -> None:
        self.blockSignals(True)
        self.clear()

    def _end(self) -> None:
        self.blockSignals(False)

    def _add_header(self, label: str) -> None:
        item = QListWidgetItem(label)
        item.setData(KIND_ROLE, HEADER)
        item.setFlags(Qt.ItemFlag.NoItemFlags)
        self.addItem(item)

    def _add_chat(
        self, conversation_id: str, title: str, snippet: tuple[str, Spans] | None = None
    ) -> None:
        item = QListWidgetItem(title)
        item.setData(KIND_ROLE, CHAT)
        item.setData(ID_ROLE, conversation_id)
        answering = conversation_id in self._answering
        item.setData(ANSWERING_ROLE, answering)
        item.setToolTip(title + (" — answering…" if answering else ""))
        if snippet:
            item.setData(SNIPPET_ROLE, snippet)
        item.setFlags(
            Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsEditable
        )
        self.addItem(item)
