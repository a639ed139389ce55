"""Light and dark themes: one palette each, one stylesheet template, system-following by default.

``ThemeManager`` owns the choice ("system", "light" or "dark"); it applies the palette and the
stylesheet to the QApplication and emits ``theme_changed(Palette)`` so custom-painted widgets
and rendered Markdown can refresh. ``current()`` is the palette in use.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from string import Template

from PySide6.QtCore import QEvent, QObject, Qt, Signal, Slot
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QGuiApplication,
    QIcon,
    QPalette,
    QTextCursor,
)
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QLabel,
    QLayout,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QTextEdit,
    QWidget,
)

from app import resources
from app.config import paths
from app.ui import icons

THEMES = ("system", "light", "dark")
FONT_FAMILIES = [
    "Inter",
    "Segoe UI Variable Text",
    "Segoe UI",
    ".AppleSystemUIFont",
    "SF Pro Text",
    "Cantarell",
    "Noto Sans",
    "Ubuntu",
    "DejaVu Sans",
]
MONO_FAMILIES = [
    "JetBrains Mono",
    "Cascadia Code",
    "SF Mono",
    "Menlo",
    "Consolas",
    "Noto Sans Mono",
    "DejaVu Sans Mono",
    "monospace",
]


@dataclass(frozen=True, slots=True)
class Palette:
    name: str
    window: str  # the chat area
    sidebar: str
    surface: str  # cards, inputs, menus
    surface_alt: str  # hover
    selected: str
    border: str
    border_strong: str
    text: str
    muted: str
    faint: str
    accent: str
    accent_hover: str
    accent_text: str  # text on the accent colour
    accent_soft: str  # tinted backgrounds
    user_bubble: str
    code_bg: str
    code_header: str
    inline_code_bg: str
    link: str
    danger: str
    danger_soft: str
    warning: str
    warning_soft: str
    success: str
    info_soft: str
    scrollbar: str
    pygments_style: str

    @property
    def icon(self) -> str:
        return self.muted

    @property
    def is_dark(self) -> bool:
        return self.name == "dark"

    def role(self, role: str) -> str:
        """A colour by role name, for icons: icon, text, muted, accent, accent_text, danger…"""
        return str(getattr(self, role))


LIGHT = Palette(
    name="light",
    window="#FFFFFF",
    sidebar="#F7F6F3",
    surface="#FFFFFF",
    surface_alt="#EFEDE9",
    selected="#E9E6E1",
    border="#E7E4DF",
    border_strong="#D5D1CA",
    text="#1D1B19",
    muted="#6B6660",
    faint="#706A63",  # text too: at least 4.5:1 on every surface (WCAG AA)
    accent="#B84115",  # 4.5:1 or more with white text, and as text on accent_soft
    accent_hover="#9F3710",
    accent_text="#FFFFFF",
    accent_soft="#FCEDE6",
    user_bubble="#F3F1EE",
    code_bg="#F8F7F5",
    code_header="#F0EEEA",
    inline_code_bg="#F0EEEA",
    link="#C2461B",
    danger="#C92A2A",
    danger_soft="#FDECEC",
    warning="#985000",
    warning_soft="#FFF4E0",
    success="#26744C",
    info_soft="#EEF3FB",
    scrollbar="#D3CFC8",
    pygments_style="default",
)

DARK = Palette(
    name="dark",
    window="#1B1A19",
    sidebar="#141312",
    surface="#242321",
    surface_alt="#2C2A28",
    selected="#33302D",
    border="#2F2D2A",
    border_strong="#403D39",
    text="#ECE9E4",
    muted="#A39E97",
    faint="#928D85",
    accent="#F07A4A",
    accent_hover="#F48E63",
    accent_text="#1B1A19",
    accent_soft="#3A2720",
    user_bubble="#2A2826",
    code_bg="#131211",
    code_header="#1E1D1B",
    inline_code_bg="#2E2C29",
    link="#F59A72",
    danger="#F0716F",
    danger_soft="#3A2222",
    warning="#F2B45C",
    warning_soft="#362B1A",
    success="#68C08E",
    info_soft="#1F2733",
    scrollbar="#45423E",
    pygments_style="github-dark",
)

_current = LIGHT


def current() -> Palette:
    return _current


def icon(name: str, role: str = "icon") -> QIcon:
    palette = _current
    return icons.icon(name, palette.role(role), palette.faint)


def system_is_dark() -> bool:
    app = QGuiApplication.instance()
    if not isinstance(app, QGuiApplication):
        return False
    return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark


def resolve(choice: str) -> Palette:
    if choice == "dark":
        return DARK
    if choice == "light":
        return LIGHT
    return DARK if system_is_dark() else LIGHT


def stylesheet(palette: Palette) -> str:
    """``themes/app.qss`` and then each page's own sheet (``themes/*.qss``, by name), filled in
    with the palette's colours."""
    template = "\n".join(sheet.read_text("utf-8") for sheet in resources.stylesheets())
    values = {f.name: getattr(palette, f.name) for f in dataclasses.fields(palette)}
    values.update(_stylesheet_images(palette))
    values["font"] = ", ".join(f'"{f}"' for f in FONT_FAMILIES)
    values["mono"] = ", ".join(f'"{f}"' for f in MONO_FAMILIES)
    return Template(template).substitute(values)


def _stylesheet_images(palette: Palette) -> dict[str, str]:
    """Icons a stylesheet refers to by file (a checkbox's check mark, a combo box's arrow),
    written once per theme under the cache folder."""
    folder = paths().cache_dir / "theme"
    images = {
        "check_icon": ("check", palette.accent_text),
        "chevron_icon": ("chevron-down", palette.muted),
    }
    values: dict[str, str] = {}
    for key, (name, color) in images.items():
        path = folder / f"{name}-{color.lstrip('#')}.svg"
        if not path.exists():
            try:
                folder.mkdir(parents=True, exist_ok=True)
                path.write_text(
                    icons.svg(name, color).replace('stroke-width="1.8"', 'stroke-width="2.6"'),
                    "utf-8",
                )
            except OSError:
                continue
        values[key] = path.as_posix()
    for key in images:
        values.setdefault(key, "")
    return values


def qt_palette(p: Palette) -> QPalette:
    qp = QPalette()
    role = QPalette.ColorRole
    for r, value in (
        (role.Window, p.window),
        (role.WindowText, p.text),
        (role.Base, p.surface),
        (role.AlternateBase, p.surface_alt),
        (role.Text, p.text),
        (role.Button, p.surface),
        (role.ButtonText, p.text),
        (role.Highlight, p.accent),
        (role.HighlightedText, p.accent_text),
        (role.ToolTipBase, p.surface),
        (role.ToolTipText, p.text),
        (role.PlaceholderText, p.faint),
        (role.Link, p.link),
        (role.Mid, p.border),
        (role.Dark, p.border_strong),
        (role.Light, p.surface),
    ):
        qp.setColor(r, QColor(value))
    for r in (role.Text, role.WindowText, role.ButtonText):
        qp.setColor(QPalette.ColorGroup.Disabled, r, QColor(p.faint))
    return qp


def app_font(point_size: float = 10.5) -> QFont:
    font = QFont()
    font.setFamilies(FONT_FAMILIES)
    font.setPointSizeF(point_size)
    font.setHintingPreference(QFont.HintingPreference.PreferNoHinting)
    return font


def mono_font(point_size: float = 10.0) -> QFont:
    font = QFont()
    font.setFamilies(MONO_FAMILIES)
    font.setStyleHint(QFont.StyleHint.Monospace)
    font.setPointSizeF(point_size)
    return font


class ThemeManager(QObject):
    """Applies the chosen theme and follows the system's light/dark switch.

    Signals: ``theme_changed(Palette)`` after a new palette was applied (GUI thread).
    """

    theme_changed = Signal(object)

    def __init__(self, app: QApplication, choice: str = "system") -> None:
        super().__init__(app)
        self._app = app
        self._choice = choice if choice in THEMES else "system"
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._on_system_scheme_changed)

    @property
    def choice(self) -> str:
        return self._choice

    def set_choice(self, choice: str) -> None:
        self._choice = choice if choice in THEMES else "system"
        self.apply()

    def apply(self) -> None:
        global _current  # noqa: PLW0603 - one palette for the whole app, by design
        palette = resolve(self._choice)
        _current = palette
        self._app.setPalette(qt_palette(palette))
        self._app.setStyleSheet(stylesheet(palette))
        icons.retint_all()
        self.theme_changed.emit(palette)

    @Slot(Qt.ColorScheme)
    def _on_system_scheme_changed(self, _scheme: Qt.ColorScheme) -> None:
        if self._choice == "system":
            self.apply()


def set_style_property(widget: QWidget, name: str, value: object) -> None:
    """Set a property the stylesheet selects on (``#Row[state="failed"]``) and re-apply the
    style, only when the value changed: re-polishing costs a style pass, and the callers run on
    every progress tick or keystroke."""
    if widget.property(name) == value:
        return
    widget.setProperty(name, value)
    widget.style().unpolish(widget)
    widget.style().polish(widget)


SEGMENT_PADDING = 2 * 10 + 2  # #Segment's horizontal padding and borders in app.qss


def segment_button(text: str, position: str, parent: QWidget) -> QPushButton:
    """One checkable part of a segmented control (``#Segment``; ``position`` is "first",
    "mid" or "last"). Its label turns semi-bold when checked, so its minimum width is that
    of the bold label: checking it never clips the text."""
    button = QPushButton(text, parent)
    button.setObjectName("Segment")
    button.setCheckable(True)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    button.setProperty("position", position)
    bold = QFont(button.font())
    bold.setWeight(QFont.Weight.DemiBold)
    button.setMinimumWidth(QFontMetrics(bold).horizontalAdvance(text) + SEGMENT_PADDING)
    return button


def form_label(text: str, beside: QWidget, parent: QWidget) -> QLabel:
    """A QFormLayout label centred on the input it names: the form puts a label at the top of
    its row, and a label is shorter than a field, so its text sat a few pixels above the
    field's. ``beside`` is the input (the first line of a row with help text under it). Beside
    a text box the label sits on its first line, not level with its middle."""
    label = QLabel(text, parent)
    label.setBuddy(beside)  # screen readers name the input by its label
    label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
    # As tall as the input and no taller: in a row with help text under the input, a label
    # free to grow was centred on the whole row, below the input.
    label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
    if isinstance(beside, QPlainTextEdit | QTextEdit):
        _FirstLineLabel(label, beside)
    else:
        label.setMinimumHeight(beside.sizeHint().height())
    return label


class _FirstLineLabel(QObject):
    """Keeps a label's text level with the first line of a text box (a text box's size hint is
    ~190 px, so a label as tall as that put its text below a short box). Follows the box's
    style and size, which set where its first line is."""

    _EVENTS = (
        QEvent.Type.Show,
        QEvent.Type.Resize,
        QEvent.Type.StyleChange,
        QEvent.Type.FontChange,
        QEvent.Type.Polish,
    )

    def __init__(self, label: QLabel, box: QPlainTextEdit | QTextEdit) -> None:
        super().__init__(label)
        self._label = label
        self._box = box
        box.installEventFilter(self)
        self._follow()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if watched is self._box and event.type() in self._EVENTS:
            self._follow()
        return False

    def _follow(self) -> None:
        box = self._box
        start = box.cursorRect(QTextCursor(box.document()))  # viewport coordinates
        centre = box.viewport().geometry().top() + start.center().y()
        self._label.setFixedHeight(max(2 * centre + 1, self._label.fontMetrics().height()))


def shrinking_combo(combo: QComboBox, characters: int = 14) -> None:
    """A combo box that may be narrower than its longest choice: its text then ends in "…"
    and its tooltip says the choice whole (a wide choice widened a whole panel past its
    edge)."""
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(characters)

    def follow(*_args: object) -> None:
        combo.setToolTip(combo.currentText())

    combo.currentIndexChanged.connect(follow)
    # filled with its signals blocked, the model still says so
    combo.model().rowsInserted.connect(follow)
    combo.model().modelReset.connect(follow)
    follow()


def tab_in_layout_order(container: QWidget) -> None:
    """Tab visits ``container``'s controls in the order its layouts show them (top to bottom,
    left to right), not in the order the code made them."""
    order: list[QWidget] = []

    def visit(widget: QWidget) -> None:
        if widget.focusPolicy().value & Qt.FocusPolicy.TabFocus.value:
            order.append(widget)
        else:
            for child in _layout_widgets(widget.layout()):
                visit(child)

    for child in _layout_widgets(container.layout()):
        visit(child)
    for first, second in itertools.pairwise(order):
        QWidget.setTabOrder(first, second)


def _layout_widgets(layout: QLayout | None) -> list[QWidget]:
    widgets: list[QWidget] = []
    if layout is None:
        return widgets
    for index in range(layout.count()):
        item = layout.itemAt(index)
        if item is None:
            continue
        widget, inner = item.widget(), item.layout()
        if widget is not None:
            widgets.append(widget)
        elif inner is not None:
            widgets += _layout_widgets(inner)
    return widgets
