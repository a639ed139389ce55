"""The live request log as a table model: newest first, bounded, appended one row at a time."""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
)
from PySide6.QtGui import QColor

from app.server.requestlog import RequestRecord
from app.ui import theme

COLUMNS = ("Time", "Method", "Path", "Model", "Tokens", "Duration", "Status")
MAX_ROWS = 500

Index = QModelIndex | QPersistentModelIndex


def short_model(model: str | None) -> str:
    """A loaded model's id may be its file's path: show the file's stem."""
    if not model:
        return "—"
    if not model.lower().endswith(".gguf"):
        return model
    return model.replace("\\", "/").rsplit("/", 1)[-1][: -len(".gguf")]


def tokens_text(record: RequestRecord) -> str:
    if record.prompt_tokens is None and record.completion_tokens is None:
        return "—"
    return f"{record.prompt_tokens or 0} → {record.completion_tokens or 0}"


def duration_text(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def status_role(status: int) -> str:
    if status >= 500 or status == 499:
        return "danger"
    if status >= 400:
        return "warning"
    return "success"


class RequestTableModel(QAbstractTableModel):
    """Rows are :class:`RequestRecord` s, newest at the top; at most ``MAX_ROWS``."""

    def __init__(self, parent: Any = None, max_rows: int = MAX_ROWS) -> None:
        super().__init__(parent)
        self.max_rows = max_rows
        self._records: list[RequestRecord] = []

    # -- data -----------------------------------------------------------------------------

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self._records)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(  # noqa: N802 (Qt override)
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.TextAlignmentRole:
            return int(self._alignment(section))
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        record = self._records[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(record, column)
        if role == Qt.ItemDataRole.ForegroundRole:
            if column == 6:
                return QColor(theme.current().role(status_role(record.status)))
            if column in (0, 4, 5):
                return QColor(theme.current().muted)
            return None
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(self._alignment(column))
        if role == Qt.ItemDataRole.ToolTipRole:
            if column == 3 and record.model:
                return record.model
            if column == 2 and record.stream:
                return f"{record.path} (streamed)"
            if column == 6 and record.error:
                return record.error
            if column == 0:
                return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.time))
        if role == Qt.ItemDataRole.UserRole:
            return record
        return None

    @staticmethod
    def _text(record: RequestRecord, column: int) -> str:
        if column == 0:
            return time.strftime("%H:%M:%S", time.localtime(record.time))
        if column == 1:
            return record.method
        if column == 2:
            return record.path
        if column == 3:
            return short_model(record.model)
        if column == 4:
            return tokens_text(record)
        if column == 5:
            return duration_text(record.duration)
        return str(record.status)

    @staticmethod
    def _alignment(column: int) -> Qt.AlignmentFlag:
        horizontal = Qt.AlignmentFlag.AlignRight if column in (4, 5) else Qt.AlignmentFlag.AlignLeft
        return horizontal | Qt.AlignmentFlag.AlignVCenter

    # -- changes --------------------------------------------------------------------------

    def record_at(self, row: int) -> RequestRecord | None:
        return self._records[row] if 0 <= row < len(self._records) else None

    def row_of(self, record_id: int) -> int:
        return next((i for i, r in enumerate(self._records) if r.id == record_id), -1)

    def add(self, record: RequestRecord) -> None:
        """Put a new record on top; drop the oldest beyond ``max_rows``."""
        if self.row_of(record.id) >= 0:
            return
        self.beginInsertRows(QModelIndex(), 0, 0)
        self._records.insert(0, record)
        self.endInsertRows()
        if len(self._records) > self.max_rows:
            first = self.max_rows
            self.beginRemoveRows(QModelIndex(), first, len(self._records) - 1)
            del self._records[first:]
            self.endRemoveRows()

    def reset(self, records: list[RequestRecord]) -> None:
        """Show these records (oldest first, as RequestLog.records() gives them)."""
        self.beginResetModel()
        self._records = list(reversed(records))[: self.max_rows]
        self.endResetModel()

    def clear(self) -> None:
        self.reset([])
