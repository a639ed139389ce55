"""The app icon for every OS, rendered from ``resources/icon.svg`` with Qt.

PNGs for Linux's hicolor theme, ``ember.ico`` (Windows) and ``ember.icns`` (macOS). Both
containers hold PNG images, which Windows Vista+ and macOS 10.7+ read, so no Pillow is needed.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from bundle_config import RESOURCES

SOURCE_SVG = RESOURCES / "icon.svg"
LINUX_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 20, 24, 32, 40, 48, 64, 128, 256)
# ICNS entry types holding PNG data, by pixel size (the @2x types reuse the larger renders).
ICNS_TYPES = (
    (b"icp4", 16),
    (b"icp5", 32),
    (b"icp6", 64),
    (b"ic07", 128),
    (b"ic08", 256),
    (b"ic09", 512),
    (b"ic10", 1024),
    (b"ic11", 32),
    (b"ic12", 64),
    (b"ic13", 256),
    (b"ic14", 512),
)


_keep: list[object] = []


def render_png(size: int, target: Path, svg: Path = SOURCE_SVG) -> bytes:
    """Draw the SVG at ``size`` x ``size`` pixels into the PNG file ``target``; its bytes."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    if QGuiApplication.instance() is None:
        _keep.append(QGuiApplication([]))  # QPainter and QSvgRenderer want an application
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise RuntimeError(f"cannot render {svg}")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter)
    painter.end()
    if not image.save(str(target)):  # the format follows the .png suffix
        raise OSError(f"cannot write {target}")
    return target.read_bytes()


def ico(pngs: dict[int, bytes]) -> bytes:
    """A Windows .ico holding PNG images (ICONDIR, ICONDIRENTRY per image, then the data)."""
    sizes = sorted(pngs)
    header = struct.pack("<HHH", 0, 1, len(sizes))
    offset = len(header) + 16 * len(sizes)
    entries = b""
    for size in sizes:
        data = pngs[size]
        side = 0 if size >= 256 else size  # 0 means 256
        entries += struct.pack("<BBBBHHII", side, side, 0, 0, 1, 32, len(data), offset)
        offset += len(data)
    return header + entries + b"".join(pngs[size] for size in sizes)


def icns(pngs: dict[int, bytes]) -> bytes:
    """A macOS .icns holding PNG images."""
    body = b"".join(
        kind + struct.pack(">I", 8 + len(pngs[size])) + pngs[size] for kind, size in ICNS_TYPES
    )
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def write_all(folder: Path) -> None:
    """``ember-<size>.png`` for every size used, ``ember.ico``, ``ember.icns``, ``ember.svg``."""
    folder.mkdir(parents=True, exist_ok=True)
    sizes = sorted({*LINUX_SIZES, *ICO_SIZES, *(size for _, size in ICNS_TYPES)})
    pngs = {size: render_png(size, folder / f"ember-{size}.png") for size in sizes}
    (folder / "ember.ico").write_bytes(ico({s: pngs[s] for s in ICO_SIZES}))
    (folder / "ember.icns").write_bytes(icns(pngs))
    (folder / "ember.svg").write_bytes(SOURCE_SVG.read_bytes())
