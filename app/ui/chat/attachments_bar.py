"""The chips above the message box: one per attached file, with its name, its size and pages
(or "Reading… 40%", or its problem in one sentence) and a remove button. An image's chip has a
thumbnail and its pixel size; when the chat's model cannot read images, it says so (the
tray's ``image_refusal``) and takes a whole row, as a problem does.

``AttachmentsBar`` shows an ``AttachmentTray`` and follows its signals; it hides when empty.
Signal: ``remove_requested(int key)`` (the bar removes the file from the tray itself).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Slot
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.ui import icons, theme
from app.ui.chat.attaching import (
    AttachmentTray,
    PendingFile,
    describe_image,
    describe_size,
    thumbnail,
)

CHIP_WIDTH = 230
CHIPS_PER_ROW = 3
LEFT_OUT = " It will be left out when you send."
THUMBNAIL = 30  # the chip's thumbnail box: as tall as a document chip's two lines


def scaled_thumbnail(sha256: str, side: int, ratio: float) -> QPixmap | None:
    """The kept thumbnail of an image, scaled to fit ``side`` (sharp at ``ratio``)."""
    image = thumbnail(sha256)
    if image is None or image.isNull():
        return None
    pixmap = QPixmap.fromImage(image).scaled(
        round(side * ratio),
        round(side * ratio),
        Qt.AspectRatioMode.KeepAspectRatio,
        Qt.TransformationMode.SmoothTransformation,
    )
    pixmap.setDevicePixelRatio(ratio)
    return pixmap


class AttachmentChip(QFrame):
    """One file: name, details (size · pages, progress or the error), a remove button."""

    def __init__(self, pending: PendingFile, bar: AttachmentsBar) -> None:
        super().__init__(bar)
        self.key = pending.key
        self.setObjectName("AttachmentChip")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setMinimumWidth(CHIP_WIDTH)
        self.name_label = QLabel(self)
        self.name_label.setObjectName("AttachmentName")
        self.detail_label = QLabel(self)
        self.detail_label.setObjectName("AttachmentDetail")
        self.detail_label.setWordWrap(True)
        self.remove_button = QToolButton(self)
        self.remove_button.setObjectName("AttachmentRemove")
        self.remove_button.setAutoRaise(True)
        self.remove_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.remove_button.setToolTip(f"Remove {pending.name}")
        self.remove_button.setAccessibleName(f"Remove {pending.name}")
        icons.set_icon(self.remove_button, "close", role="muted", size=12)
        self.remove_button.clicked.connect(bar.on_remove_clicked)
        self.remove_button.setProperty("key", pending.key)
        self.thumbnail: QLabel | None = None
        if pending.is_image:
            self.thumbnail = QLabel(self)
            self.thumbnail.setObjectName("AttachmentThumbnail")
            self.thumbnail.setFixedSize(THUMBNAIL, THUMBNAIL)
            self.thumbnail.setAlignment(Qt.AlignmentFlag.AlignCenter)
        text = QVBoxLayout()
        text.setSpacing(1)
        text.addWidget(self.name_label)
        text.addWidget(self.detail_label)
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 4, 6)
        row.setSpacing(4)
        if self.thumbnail is not None:
            row.setContentsMargins(6, 6, 4, 6)
            row.addWidget(self.thumbnail, 0, Qt.AlignmentFlag.AlignVCenter)
            row.addSpacing(4)
        row.addLayout(text, 1)
        row.addWidget(self.remove_button, 0, Qt.AlignmentFlag.AlignTop)
        self.show_file(pending, bar.tray.image_refusal)

    def show_file(self, pending: PendingFile, refusal: str = "") -> None:
        state: str = pending.state
        if state == "ready" and pending.is_image and refusal:
            state = "refused"
        # A problem needs room for its sentence: the chip takes a whole row (see the bar).
        self.setMaximumWidth(16777215 if state in ("error", "refused") else CHIP_WIDTH)
        metrics = self.name_label.fontMetrics()
        self.name_label.setText(
            metrics.elidedText(pending.name, Qt.TextElideMode.ElideMiddle, CHIP_WIDTH - 44)
        )
        if pending.state == "reading":
            detail = f"Reading… {int(pending.progress * 100)}%"
        elif pending.state == "error":
            detail = pending.error + LEFT_OUT
        elif pending.is_image:
            detail = describe_image(pending.size, pending.image)
            if state == "refused":
                detail += f" · {refusal}"
        else:
            detail = describe_size(pending.size, pending.pages)
        self.detail_label.setText(detail)
        self.setToolTip(f"{pending.path}\n{detail}" if state != "ready" else str(pending.path))
        self._show_thumbnail(pending)
        theme.set_style_property(self, "state", state)

    def _show_thumbnail(self, pending: PendingFile) -> None:
        if self.thumbnail is None:
            return
        self.thumbnail.setVisible(pending.state != "error")  # nothing to show of a bad one
        if self.thumbnail.pixmap().width() > 0:
            return
        if pending.stored is not None:
            pixmap = scaled_thumbnail(pending.stored.sha256, THUMBNAIL, self.devicePixelRatioF())
            if pixmap is not None:
                self.thumbnail.setPixmap(pixmap)


class AttachmentsBar(QWidget):
    """See the module docstring."""

    def __init__(self, tray: AttachmentTray, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("AttachmentsBar")
        self.tray = tray
        self.chips: dict[int, AttachmentChip] = {}
        self._grid = QGridLayout(self)
        self._grid.setContentsMargins(0, 0, 0, 0)
        self._grid.setSpacing(6)
        self._grid.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        tray.files_changed.connect(self._on_files_changed)
        tray.file_updated.connect(self._on_file_updated)
        tray.image_refusal_changed.connect(self._on_image_refusal_changed)
        self._on_files_changed()

    @Slot()
    def _on_files_changed(self) -> None:
        files = self.tray.files
        keys = {f.key for f in files}
        for key in [k for k in self.chips if k not in keys]:
            chip = self.chips.pop(key)
            self._grid.removeWidget(chip)
            chip.hide()
            chip.deleteLater()
        for pending in files:
            if pending.key not in self.chips:
                self.chips[pending.key] = AttachmentChip(pending, self)
        self._place(files)
        self.setVisible(bool(files))

    def _wide(self, pending: PendingFile) -> bool:
        """Whether the chip takes a whole row (its sentence needs the room)."""
        if pending.state == "error":
            return True
        return pending.state == "ready" and pending.is_image and bool(self.tray.image_refusal)

    def _place(self, files: list[PendingFile]) -> None:
        """Chips in rows of CHIPS_PER_ROW, in the order attached; one with a problem alone on
        its row, as wide as the bar."""
        for chip in self.chips.values():
            self._grid.removeWidget(chip)
        row = column = 0
        top = Qt.AlignmentFlag.AlignTop
        for pending in files:
            chip = self.chips[pending.key]
            if self._wide(pending):
                if column:
                    row, column = row + 1, 0
                self._grid.addWidget(chip, row, 0, 1, CHIPS_PER_ROW)
                row += 1
                continue
            self._grid.addWidget(chip, row, column, top)
            column += 1
            if column == CHIPS_PER_ROW:
                row, column = row + 1, 0

    @Slot(int)
    def _on_file_updated(self, key: int) -> None:
        chip, pending = self.chips.get(key), self.tray.file(key)
        if chip is not None and pending is not None:
            chip.show_file(pending, self.tray.image_refusal)
            if self._wide(pending):
                self._place(self.tray.files)

    @Slot(str)
    def _on_image_refusal_changed(self, refusal: str) -> None:
        for pending in self.tray.images:
            chip = self.chips.get(pending.key)
            if chip is not None:
                chip.show_file(pending, refusal)
        self._place(self.tray.files)

    @Slot()
    def on_remove_clicked(self) -> None:
        key = self.sender().property("key")
        if isinstance(key, int):
            self.tray.remove(key)
