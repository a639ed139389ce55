"""Ember's icon set: simple line icons drawn here as SVG, tinted with the theme's colours.

Every icon is a 24x24 outline in ``currentColor``; ``icon(name, color)`` renders it crisp at
any size. Buttons remember their icon (``set_icon``) so a theme switch can re-tint them all.
"""

from __future__ import annotations

import math
from functools import lru_cache

from PySide6.QtCore import QByteArray, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QAbstractButton, QApplication


def _gear_path() -> str:
    """A cog with eight teeth, generated rather than hand-typed."""
    points: list[str] = []
    teeth = 8
    for i in range(teeth * 4):
        angle = (i / (teeth * 4)) * 2 * math.pi - math.pi / 2
        radius = 9.2 if i % 4 in (1, 2) else 7.0
        x = 12 + radius * math.cos(angle)
        y = 12 + radius * math.sin(angle)
        points.append(f"{x:.2f} {y:.2f}")
    return "M" + " L".join(points) + " Z"


_STROKE = (
    'fill="none" stroke="currentColor" stroke-width="1.8" '
    'stroke-linecap="round" stroke-linejoin="round"'
)

_SHAPES: dict[str, str] = {
    "plus": '<path d="M12 5v14M5 12h14"/>',
    "search": '<circle cx="11" cy="11" r="6.5"/><path d="M20 20l-4.2-4.2"/>',
    "trash": (
        '<path d="M4 7h16M9 7V4.8c0-.4.4-.8.8-.8h4.4c.4 0 .8.4.8.8V7'
        'M6.5 7l.9 12.1c.1.5.5.9 1 .9h7.2c.5 0 .9-.4 1-.9L17.5 7M10 11v5M14 11v5"/>'
    ),
    "copy": (
        '<rect x="8.5" y="8.5" width="11.5" height="11.5" rx="2.2"/>'
        '<path d="M15.5 8.5V6.2c0-1.2-1-2.2-2.2-2.2H6.2C5 4 4 5 4 6.2v7.1'
        'c0 1.2 1 2.2 2.2 2.2h2.3"/>'
    ),
    "check": '<path d="M5 12.5l4.5 4.5L19 7.5"/>',
    "edit": '<path d="M4 20v-3.5L15.5 5a2.1 2.1 0 0 1 3 3L7 19.5 4 20z"/><path d="M13.5 7l3 3"/>',
    "regenerate": (
        '<path d="M19.5 10.5A7.8 7.8 0 0 0 5.3 7.6M4.5 4v4h4"/>'
        '<path d="M4.5 13.5a7.8 7.8 0 0 0 14.2 2.9M19.5 20v-4h-4"/>'
    ),
    "stop": '<rect x="6.5" y="6.5" width="11" height="11" rx="2" fill="currentColor"/>',
    "send": '<path d="M12 19V5M6 11l6-6 6 6"/>',
    "chevron-down": '<path d="M6.5 9.5l5.5 5.5 5.5-5.5"/>',
    "chevron-left": '<path d="M14.5 6l-6 6 6 6"/>',
    "chevron-right": '<path d="M9.5 6l6 6-6 6"/>',
    "sliders": (
        '<path d="M4 7h9M19 7h1M4 17h3M13 17h7"/>'
        '<circle cx="16" cy="7" r="2.4"/><circle cx="10" cy="17" r="2.4"/>'
    ),
    "gear": f'<path d="{_gear_path()}"/><circle cx="12" cy="12" r="2.8"/>',
    "sidebar": '<rect x="3" y="4.5" width="18" height="15" rx="2.5"/><path d="M9 4.5v15"/>',
    "more": (
        '<circle cx="6" cy="12" r="1.4" fill="currentColor" stroke="none"/>'
        '<circle cx="12" cy="12" r="1.4" fill="currentColor" stroke="none"/>'
        '<circle cx="18" cy="12" r="1.4" fill="currentColor" stroke="none"/>'
    ),
    "folder": (
        '<path d="M3.5 7.5c0-1.1.9-2 2-2h3.8l2 2h7.2c1.1 0 2 .9 2 2v7.5c0 1.1-.9 2-2 2h-13'
        'c-1.1 0-2-.9-2-2z"/>'
    ),
    "file": (
        '<path d="M6 3.5h8l4.5 4.5v11c0 .8-.7 1.5-1.5 1.5H6c-.8 0-1.5-.7-1.5-1.5v-14'
        'c0-.8.7-1.5 1.5-1.5z"/><path d="M13.5 3.5V8.5h5"/>'
    ),
    "paperclip": (  # Feather's shape (MIT)
        '<path d="M21.4 11.1l-9.2 9.2a6 6 0 0 1-8.5-8.5l9.2-9.2a4 4 0 0 1 5.7 5.7l-9.2 9.2'
        'a2 2 0 0 1-2.8-2.8l8.5-8.5"/>'
    ),
    "chip": (
        '<rect x="6" y="6" width="12" height="12" rx="2"/><rect x="9.5" y="9.5" width="5" '
        'height="5" rx="1"/><path d="M9.5 3v3M14.5 3v3M9.5 18v3M14.5 18v3M3 9.5h3M3 14.5h3'
        'M18 9.5h3M18 14.5h3"/>'
    ),
    "gpu": (  # a graphics card: its board, fan and connector
        '<rect x="2.5" y="6" width="19" height="10.5" rx="1.5"/>'
        '<circle cx="9.5" cy="11.25" r="2.75"/>'
        '<path d="M15.5 9.5h3M15.5 13h3M6 16.5v2.5M10 16.5v2.5M14 16.5v2.5"/>'
    ),
    "chat-import": (  # a page with an arrow coming in: not Downloads' arrow into a tray
        '<path d="M7 8.5v-3a2 2 0 0 1 2-2h6.5l4 4v11a2 2 0 0 1-2 2H9a2 2 0 0 1-2-2v-3"/>'
        '<path d="M15.5 3.5v4h4M3 12h9.5M9.5 9l3 3-3 3"/>'
    ),
    "tool": (  # Feather's wrench (MIT)
        '<path d="M14.7 6.3a1 1 0 0 0 0 1.4l1.6 1.6a1 1 0 0 0 1.4 0l3.77-3.77a6 6 0 0 1-7.94 '
        '7.94l-6.91 6.91a2.12 2.12 0 0 1-3-3l6.91-6.91a6 6 0 0 1 7.94-7.94l-3.76 3.76z"/>'
    ),
    "close": '<path d="M6.5 6.5l11 11M17.5 6.5l-11 11"/>',
    "alert": (
        '<path d="M10.3 4.6L3.2 17.2c-.7 1.3.2 2.8 1.7 2.8h14.2c1.5 0 2.4-1.5 1.7-2.8L13.7 4.6'
        'c-.8-1.3-2.6-1.3-3.4 0z"/><path d="M12 9.5v4M12 16.8v.1"/>'
    ),
    "info": '<circle cx="12" cy="12" r="8.5"/><path d="M12 11v5.2M12 7.8v.1"/>',
    "download": '<path d="M12 4v11M7 10.5l5 5 5-5M5 20h14"/>',
    "export": '<path d="M12 15V4.5M7.5 9l4.5-4.5L16.5 9M5 14.5V18c0 1.1.9 2 2 2h10c1.1 0 2-.9 '
    '2-2v-3.5"/>',
    "import": '<path d="M12 4.5V15M7.5 10.5L12 15l4.5-4.5M5 14.5V18c0 1.1.9 2 2 2h10c1.1 0 2-.9 '
    '2-2v-3.5"/>',
    "undo": '<path d="M9 14L4 9l5-5"/><path d="M4 9h10.5a5.5 5.5 0 0 1 0 11H11"/>',
    "eject": '<path d="M12 5l7 8H5z"/><path d="M5 18.5h14"/>',
    "chat": (
        '<path d="M5.5 5h13c1.1 0 2 .9 2 2v8.5c0 1.1-.9 2-2 2H11l-4.5 3.5v-3.5h-1c-1.1 0-2-.9'
        '-2-2V7c0-1.1.9-2 2-2z"/>'
    ),
    "spark": (
        '<path d="M12 3.5c.6 3.9 2.4 6.6 6.3 7.9-3.9 1.3-5.7 4-6.3 8.1-.6-4.1-2.4-6.8-6.3-8.1'
        ' 3.9-1.3 5.7-4 6.3-7.9z"/>'
    ),
    "flame": (
        '<path d="M12 3c2 3.4 5.3 5.4 5.3 9.9 0 3.2-2.4 5.6-5.3 5.6s-5.3-2.4-5.3-5.6'
        'c0-2.3 1.1-3.9 2.6-5.2 0 1.8.8 2.9 1.9 3.1-.5-2.8-.1-5.4.8-7.8z"/>'
    ),
    "box": (
        '<path d="M12 3.5l7.5 4.2v8.6L12 20.5l-7.5-4.2V7.7z"/><path d="M4.8 7.9L12 12l7.2-4.1'
        'M12 12v8.3"/>'
    ),
    "server": (
        '<rect x="4" y="4.5" width="16" height="6.5" rx="1.8"/>'
        '<rect x="4" y="13" width="16" height="6.5" rx="1.8"/>'
        '<path d="M7.5 7.75h.01M7.5 16.25h.01M11 7.75h5M11 16.25h5"/>'
    ),
    "keyboard": (
        '<rect x="3" y="6" width="18" height="12" rx="2"/>'
        '<path d="M7 10h.01M11 10h.01M15 10h.01M7 14h10"/>'
    ),
    "heart": (
        '<path d="M12 19.5s-7.5-4.4-7.5-9.8A4.2 4.2 0 0 1 12 7.3a4.2 4.2 0 0 1 7.5 2.4'
        'c0 5.4-7.5 9.8-7.5 9.8z"/>'
    ),
    "clock": '<circle cx="12" cy="12" r="8.5"/><path d="M12 7.5V12l3 2"/>',
    "pause": '<path d="M9 6.5v11M15 6.5v11"/>',
    "play": (
        '<path d="M8 5.8v12.4c0 .6.7 1 1.2.6l9-6.2c.4-.3.4-.9 0-1.2l-9-6.2C8.7 4.8 8 5.2 8 5.8z"/>'
    ),
    "external": (
        '<path d="M13.5 4.5h6v6M19.5 4.5L11 13"/>'
        '<path d="M17.5 14v4c0 .8-.7 1.5-1.5 1.5H6c-.8 0-1.5-.7-1.5-1.5V8c0-.8.7-1.5 1.5-1.5h4"/>'
    ),
    "cloud": (
        '<path d="M7.2 18.5h10.1a3.9 3.9 0 0 0 .5-7.8 5.6 5.6 0 0 0-10.8-1.2 4.5 4.5 0 0 0 .2 9z"/>'
    ),
    "key": (
        '<circle cx="8" cy="15.5" r="3.8"/><path d="M10.7 12.8L19 4.5M15.5 8l2.5 2.5'
        'M17.2 6.3l2 2"/>'
    ),
    "eye": (
        '<path d="M2.5 12S6 5.5 12 5.5 21.5 12 21.5 12 18 18.5 12 18.5 2.5 12 2.5 12z"/>'
        '<circle cx="12" cy="12" r="3"/>'
    ),
    "eye-off": (
        '<path d="M9.9 5.8A9.6 9.6 0 0 1 12 5.5c6 0 9.5 6.5 9.5 6.5a16 16 0 0 1-2.6 3.4'
        "M6.4 7.4A15.4 15.4 0 0 0 2.5 12S6 18.5 12 18.5c1.7 0 3.2-.5 4.5-1.2"
        'M9.9 9.9a3 3 0 0 0 4.2 4.2M4 4l16 16"/>'
    ),
    "globe": (
        '<circle cx="12" cy="12" r="8.5"/><path d="M3.5 12h17M12 3.5c2.3 2.4 3.4 5.2 3.4 8.5'
        's-1.1 6.1-3.4 8.5c-2.3-2.4-3.4-5.2-3.4-8.5S9.7 5.9 12 3.5z"/>'
    ),
    "laptop": '<rect x="5" y="5.5" width="14" height="10" rx="1.5"/><path d="M3 18.5h18"/>',
}

NAMES = tuple(_SHAPES)


def svg(name: str, color: str) -> str:
    """The SVG source of an icon in one colour."""
    body = _SHAPES[name].replace("currentColor", color)
    attributes = _STROKE.replace("currentColor", color)
    return f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" {attributes}>{body}</svg>'


@lru_cache(maxsize=512)
def pixmap(name: str, color: str, size: int, ratio: float = 1.0) -> QPixmap:
    device = max(1, round(size * ratio))
    image = QPixmap(device, device)
    image.fill(Qt.GlobalColor.transparent)
    renderer = QSvgRenderer(QByteArray(svg(name, color).encode()))
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, device, device))
    painter.end()
    image.setDevicePixelRatio(ratio)
    return image


@lru_cache(maxsize=256)
def icon(name: str, color: str, disabled_color: str | None = None) -> QIcon:
    """A QIcon with crisp pixmaps for the usual sizes (and a dimmed disabled state)."""
    app = QApplication.instance()
    ratio = app.devicePixelRatio() if isinstance(app, QApplication) else 1.0
    result = QIcon()
    dim = disabled_color or QColor(color).lighter(160).name()
    for size in (14, 16, 18, 20, 24, 32):
        result.addPixmap(pixmap(name, color, size, ratio), QIcon.Mode.Normal)
        result.addPixmap(pixmap(name, color, size, ratio), QIcon.Mode.Active)
        result.addPixmap(pixmap(name, dim, size, ratio), QIcon.Mode.Disabled)
    return result


_ICON_PROPERTY = "emberIcon"
_ROLE_PROPERTY = "emberIconRole"


def set_icon(button: QAbstractButton, name: str, role: str = "icon", size: int = 18) -> None:
    """Give a button a themed icon; ``role`` names the palette colour (see theme.Palette)."""
    from app.ui import theme

    button.setProperty(_ICON_PROPERTY, name)
    button.setProperty(_ROLE_PROPERTY, role)
    button.setIcon(theme.icon(name, role))
    button.setIconSize(QSize(size, size))


def retint_all() -> None:
    """Re-tint every button that got its icon from ``set_icon`` (after a theme switch)."""
    from app.ui import theme

    for widget in QApplication.allWidgets():
        if isinstance(widget, QAbstractButton):
            name = widget.property(_ICON_PROPERTY)
            if name:
                widget.setIcon(theme.icon(str(name), str(widget.property(_ROLE_PROPERTY))))


def spoken(tooltip: str) -> str:
    """An icon button's accessible name from its tooltip: the first line, without the
    shortcut in brackets ("Start a new chat (Ctrl+N)" -> "Start a new chat")."""
    first = tooltip.split("\n", 1)[0]
    if first.endswith(")") and "(" in first:
        head, _, tail = first.rpartition("(")
        if "+" in tail or tail.rstrip(")") in ("Esc", "Enter"):
            first = head
    return first.strip()
