"""The list of conversations: day sections, rows painted by a delegate, search snippets.

Items carry their kind (section header or chat), the conversation id and, in search results,
a snippet with the matched words marked.
"""

from __future__ import annotations

import html
from datetime import datetime

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QTextDocument
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
HEADER = "header"
CHAT = "chat"

AnyIndex = QModelIndex | QPersistentModelIndex


def snippet_html(hit: SearchHit) -> str:
    """The hit's snippet as HTML with the matched words in bold (the snippet is plain text)."""
    text = hit.snippet
    parts: list[str] = []
    last = 0
    for start, end in sorted(hit.highlights):
        if start < last:
            continue
        parts.append(html.escape(text[last:start]))
        parts.append(f"<b>{html.escape(text[start:end])}</b>")
        last = end
    parts.append(html.escape(text[last:]))
    return "".join(parts)


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
        elided = painter.fontMetrics().elidedText(
            title, Qt.TextElideMode.ElideRight, title_rect.width()
        )
        painter.drawText(
            title_rect, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, elided
        )
        if snippet:
            doc = QTextDocument()
            small = QFont(font)
            small.setPointSizeF(font.pointSizeF() * 0.88)
            doc.setDefaultFont(small)
            doc.setDocumentMargin(0)
            doc.setDefaultStyleSheet(f"body {{ color:{p.muted}; }} b {{ color:{p.text}; }}")
            doc.setHtml(f"<body>{snippet}</body>")
            doc.setTextWidth(rect.width() - 26)
            painter.translate(rect.left() + 14, rect.top() + 30)
            painter.setClipRect(QRect(0, 0, rect.width() - 26, 20))
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
            self._add_chat(hit.conversation.id, hit.conversation.title, snippet_html(hit))
        self._end()

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

    def _add_chat(self, conversation_id: str, title: str, snippet: str = "") -> None:
        item = QListWidgetItem(title)
        item.setData(KIND_ROLE, CHAT)
        item.setData(ID_ROLE, conversation_id)
        item.setToolTip(title)
        if snippet:
            item.setData(SNIPPET_ROLE, snippet)
        item.setFlags(
            Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsEditable
        )
        self.addItem(item)
