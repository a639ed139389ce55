"""The conformance checks: walk a window's widget tree as it is on screen and list what a person
would see wrong. Each check returns readable problems ("where: what"), never raises, so a state
reports all its problems at once.

- text: a label, button, combo box or field whose text needs more room than it has and is not
  elided (text Qt or the app cut with "…" must have a tooltip saying it whole);
- layout: a visible child outside its parent's area, or overlapping a visible sibling; a
  horizontal scroll bar (or content cut by a hidden one) where text should wrap;
- accessibility: every interactive control has an accessible name (QAccessible), takes focus
  with Tab (or has a shortcut listed in Help), and the focus chain follows the layout.

Fonts differ between machines (and offscreen), so sizes are compared with a small tolerance and
text is measured with the widget's own font metrics, never against fixed pixel counts.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from PySide6 import QtGui
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QAccessible, QFontMetrics, QTextDocument
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractScrollArea,
    QAbstractSlider,
    QAbstractSpinBox,
    QComboBox,
    QFocusFrame,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QScrollArea,
    QScrollBar,
    QSizeGrip,
    QSplitterHandle,
    QStackedWidget,
    QStyle,
    QStyleOptionComboBox,
    QTabBar,
    QTextEdit,
    QWidget,
)

TOLERANCE = 2  # pixels: rounding, and fonts that differ slightly between machines
ELLIPSIS = "…"

# Widgets that float over the others on purpose (their own geometry code keeps them inside).
OVERLAYS = {
    "Toast",  # the notice at the bottom of the window
    "JumpToBottom",  # the chat's "scroll to the newest message" button
    "DropOverlay",  # the "drop files here" veil
}
# Scroll areas whose content scrolls sideways by design: code, tables, logs.
HSCROLL_OK = {
    "CodeScroll",
    "CodeView",
    "SnippetCode",
    "RequestTable",
    "RequestBody",
    "LogBody",
}


def name_of(widget: QWidget) -> str:
    """``ClassName#objectName "text"`` and its parent chain, short enough to read in a failure."""
    parts: list[str] = []
    current: QWidget | None = widget
    while current is not None and len(parts) < 4:
        name = type(current).__name__
        if current.objectName():
            name += f"#{current.objectName()}"
        parts.append(name)
        current = current.parentWidget()
    text = _text(widget)
    suffix = f' "{text[:40]}"' if text else ""
    return " < ".join(parts) + suffix


def _text(widget: QWidget) -> str:
    if isinstance(widget, QLabel | QAbstractButton | QLineEdit):
        return widget.text()
    if isinstance(widget, QComboBox):
        return widget.currentText()
    return ""


def visible_tree(root: QWidget) -> Iterator[QWidget]:
    """``root`` and its descendants that are on screen (popups and dialogs are walked apart)."""
    stack = [root]
    while stack:
        widget = stack.pop()
        if not widget.isVisible():
            continue
        yield widget
        for child in reversed(widget.findChildren(QWidget, options=_DIRECT)):
            if not child.isWindow():
                stack.append(child)


_DIRECT = Qt.FindChildOption.FindDirectChildrenOnly


def _is_scroll_internal(widget: QWidget) -> bool:
    """The viewport, scroll bars and their containers of a scroll area."""
    parent = widget.parentWidget()
    if isinstance(widget, QScrollBar | QSizeGrip | QFocusFrame | QSplitterHandle):
        return True
    if isinstance(parent, QAbstractScrollArea):
        return True  # viewport, scroll bar containers, corner
    return widget.objectName() in ("qt_scrollarea_hcontainer", "qt_scrollarea_vcontainer")


def _in_viewport(widget: QWidget) -> bool:
    parent = widget.parentWidget()
    grand = parent.parentWidget() if parent is not None else None
    return isinstance(grand, QAbstractScrollArea) and grand.viewport() is parent


# -- text -------------------------------------------------------------------------------------


def _said_whole(widget: QWidget, text: str) -> bool:
    """Text drawn cut with "…" is fine when the tooltip says it whole (a widget without a
    tooltip shows its parent's)."""
    current: QWidget | None = widget
    while current is not None and not current.toolTip() and not current.isWindow():
        current = current.parentWidget()
    tip = current.toolTip() if current is not None else ""
    return bool(text) and text.removesuffix(ELLIPSIS) in tip


def _label_problem(label: QLabel) -> str | None:
    text = label.text()
    if not text or not label.pixmap().isNull() or _said_whole(label, text):
        return None
    room = label.contentsRect().adjusted(label.margin(), label.margin(), -label.margin(), 0)
    indent = max(0, label.indent())
    rich = label.textFormat() == Qt.TextFormat.RichText or (
        label.textFormat() == Qt.TextFormat.AutoText and QtGui.Qt.mightBeRichText(text)
    )
    if label.wordWrap():
        needed = label.heightForWidth(label.width())
        if needed > label.height() + TOLERANCE and needed > 0:
            return f"wrapped text needs {needed} px of height, has {label.height()}"
        return None
    if rich:
        document = QTextDocument()
        document.setDefaultFont(label.font())
        document.setDocumentMargin(0)
        document.setHtml(text)
        width = int(document.idealWidth())
    else:
        metrics = QFontMetrics(label.font())
        width = max(metrics.horizontalAdvance(line) for line in text.split("\n"))
    if width > room.width() - indent + TOLERANCE:
        return f"text needs {width} px, has {room.width() - indent}"
    return None


def _button_problem(button: QAbstractButton) -> str | None:
    text = button.text().replace("&&", "\0").replace("&", "").replace("\0", "&")
    if not text or _said_whole(button, text):
        return None
    needed = button.sizeHint().width()
    if button.width() + TOLERANCE < needed:
        metrics = QFontMetrics(button.font())
        # the style's minimum (a push button is at least ~80 px) is not the text's need
        chrome = needed - metrics.horizontalAdvance(text)
        if button.width() + TOLERANCE < metrics.horizontalAdvance(text) + min(chrome, 40):
            return f"text needs {needed} px, has {button.width()}"
    return None


def _combo_problem(combo: QComboBox) -> str | None:
    text = combo.currentText()
    if not text:
        return None
    option = QStyleOptionComboBox()
    combo.initStyleOption(option)
    field = combo.style().subControlRect(
        QStyle.ComplexControl.CC_ComboBox, option, QStyle.SubControl.SC_ComboBoxEditField, combo
    )
    needed = QFontMetrics(combo.font()).horizontalAdvance(text)
    if not combo.itemIcon(combo.currentIndex()).isNull():
        needed += combo.iconSize().width() + 4
    if needed > field.width() + TOLERANCE and not _said_whole(combo, text):
        return f"text needs {needed} px, has {field.width()}"
    return None


def _field_problem(field: QLineEdit) -> str | None:
    text = field.displayText()
    if not text or field.hasFocus() or _said_whole(field, text):
        return None
    metrics = QFontMetrics(field.font())
    margins = field.textMargins()
    room = field.contentsRect().width() - margins.left() - margins.right() - 4
    needed = metrics.horizontalAdvance(text)
    parent = field.parentWidget()
    if isinstance(parent, QAbstractSpinBox | QComboBox):
        pass  # a spin box's or editable combo's text: measured in its own field
    elif len(text) > 60:
        return None  # the person's own long text scrolls in its field, as everywhere
    if needed > room + TOLERANCE:
        return f"text needs {needed} px, has {room}"
    return None


def _placeholder_problem(widget: QWidget) -> str | None:
    """A field's hint, shown while it is empty, cut at its edge or under its last line."""
    if isinstance(widget, QLineEdit):
        hint, empty = widget.placeholderText(), not widget.text()
        room = widget.contentsRect().width() - 8
        needed = QFontMetrics(widget.font()).horizontalAdvance(hint)
        if hint and empty and needed > room + TOLERANCE and not _said_whole(widget, hint):
            return f"its hint needs {needed} px, has {room}"
        return None
    if isinstance(widget, QPlainTextEdit | QTextEdit) and not widget.isReadOnly():
        hint = widget.placeholderText()
        if not hint or not widget.document().isEmpty():
            return None
        viewport = widget.viewport().rect()
        margin = round(widget.document().documentMargin())
        box = QRect(0, 0, max(1, viewport.width() - 2 * margin), 10_000)
        flags = int(Qt.TextFlag.TextWordWrap.value)
        needed = QFontMetrics(widget.font()).boundingRect(box, flags, hint).height()
        room = viewport.height() - margin  # the last line may sit in the bottom margin
        if needed > room + TOLERANCE:
            return f"its hint needs {needed} px of height, has {room}"
    return None


def text_problems(root: QWidget) -> list[str]:
    problems = []
    for widget in visible_tree(root):
        problem = None
        if isinstance(widget, QLabel):
            problem = _label_problem(widget)
        elif isinstance(widget, QAbstractButton) and not isinstance(widget.parentWidget(), QTabBar):
            problem = _button_problem(widget)
        elif isinstance(widget, QComboBox):
            problem = _combo_problem(widget)
        elif isinstance(widget, QLineEdit):
            problem = _field_problem(widget) or _placeholder_problem(widget)
        elif isinstance(widget, QPlainTextEdit | QTextEdit):
            problem = _placeholder_problem(widget)
        if problem:
            problems.append(f"{name_of(widget)}: {problem}")
    return problems


# -- layout -----------------------------------------------------------------------------------


def _overlaps(a: QRect, b: QRect) -> bool:
    both = a.intersected(b)
    return both.width() > TOLERANCE and both.height() > TOLERANCE


def layout_problems(root: QWidget) -> list[str]:
    problems = []
    for widget in visible_tree(root):
        if isinstance(widget, QAbstractScrollArea):
            problems += _scroll_problems(widget)
        if widget is root or _is_scroll_internal(widget) or _in_viewport(widget):
            continue
        parent = widget.parentWidget()
        if parent is None or widget.objectName() in OVERLAYS:
            continue
        outer = parent.rect().adjusted(-TOLERANCE, -TOLERANCE, TOLERANCE, TOLERANCE)
        if not outer.contains(widget.geometry()):
            where = f"{_rect(widget.geometry())} in {_rect(parent.rect())}"
            problems.append(f"{name_of(widget)}: outside its parent ({where})")
    for widget in visible_tree(root):
        if isinstance(widget, QStackedWidget | QAbstractScrollArea | QTabBar):
            continue
        children = [
            c
            for c in widget.findChildren(QWidget, options=_DIRECT)
            if c.isVisible()
            and not c.isWindow()
            and not _is_scroll_internal(c)
            and c.objectName() not in OVERLAYS
        ]
        for i, first in enumerate(children):
            for second in children[i + 1 :]:
                if _overlaps(first.geometry(), second.geometry()):
                    problems.append(f"{name_of(first)}: overlaps {name_of(second)}")
    return problems


def _rect(r: QRect) -> str:
    return f"{r.x()},{r.y()} {r.width()}x{r.height()}"


def _scroll_problems(area: QAbstractScrollArea) -> list[str]:
    if area.objectName() in HSCROLL_OK or area.property("scrollsSideways"):
        return []
    bar = area.horizontalScrollBar()
    if bar.isVisible() and bar.maximum() > TOLERANCE:
        return [f"{name_of(area)}: a sideways scroll bar ({bar.maximum()} px more)"]
    content = area.widget() if isinstance(area, QScrollArea) else None
    if content is not None:
        room = area.viewport().width()
        needed = max(content.width(), content.minimumSizeHint().width())
        if content.isVisible() and needed > room + TOLERANCE:
            return [f"{name_of(area)}: content {needed} px wide cut at {room} px"]
    if isinstance(area, QTextEdit | QPlainTextEdit) and area.isReadOnly():
        wraps = area.lineWrapMode().value != 0
        if not wraps and bar.maximum() > TOLERANCE:
            return [f"{name_of(area)}: text does not wrap"]
    return []


# -- accessibility ----------------------------------------------------------------------------


def is_interactive(widget: QWidget) -> bool:
    if not widget.isEnabled():
        return False
    if isinstance(widget, QScrollBar | QHeaderView):
        return False  # parts of their scroll area or table
    if isinstance(widget.parentWidget(), QLineEdit):
        return False  # a field's clear button: Ctrl+A, Delete do the same
    if isinstance(widget, QLineEdit) and isinstance(
        widget.parentWidget(), QAbstractSpinBox | QComboBox
    ):
        return False  # its spin box or combo box is the control
    if isinstance(widget, QTextEdit | QPlainTextEdit):
        return not widget.isReadOnly()
    return isinstance(
        widget,
        QAbstractButton
        | QComboBox
        | QLineEdit
        | QAbstractSpinBox
        | QAbstractSlider
        | QAbstractItemView
        | QTabBar,
    )


def accessible_name(widget: QWidget) -> str:
    interface = QAccessible.queryAccessibleInterface(widget)
    if interface is None or not interface.isValid():
        return ""
    return interface.text(QAccessible.Text.Name).strip()


def accessibility_problems(root: QWidget, keyboard_ok: set[str]) -> list[str]:
    """Unnamed controls, and controls Tab never reaches (``keyboard_ok``: object names of those
    a listed shortcut reaches instead)."""
    problems = []
    for widget in visible_tree(root):
        if not is_interactive(widget):
            continue
        if not accessible_name(widget):
            problems.append(f"{name_of(widget)}: no accessible name")
        tab = widget.focusPolicy().value & Qt.FocusPolicy.TabFocus.value
        proxy = widget.focusProxy()
        if proxy is not None:
            tab = proxy.focusPolicy().value & Qt.FocusPolicy.TabFocus.value
        group = widget.group() if isinstance(widget, QAbstractButton) else None
        if group is not None and group.exclusive():
            # Qt's tab chain holds the checked button of an exclusive group; arrows move on
            tab = any(b.focusPolicy().value & 1 for b in group.buttons())
        if not tab and widget.objectName() not in keyboard_ok:
            problems.append(f"{name_of(widget)}: not reachable with Tab and no shortcut")
    return problems


def focus_chain(root: QWidget) -> list[QWidget]:
    """The widgets Tab visits from ``root``, in order (visible, enabled, taking Tab focus)."""
    chain = []
    widget = root.nextInFocusChain()
    seen = set()
    while widget is not None and widget is not root and id(widget) not in seen:
        seen.add(id(widget))
        tab = widget.focusPolicy().value & Qt.FocusPolicy.TabFocus.value
        if tab and widget.isVisible() and widget.isEnabled() and widget.focusProxy() is None:
            chain.append(widget)
        widget = widget.nextInFocusChain()
    return chain


def focus_order_problems(root: QWidget) -> list[str]:
    """Two controls side by side in one container that Tab visits right to left, or one under
    the other that Tab visits bottom to top."""
    problems = []
    chain = focus_chain(root)
    for first, second in itertools.pairwise(chain):
        if first.parentWidget() is not second.parentWidget():
            continue
        a, b = first.geometry(), second.geometry()
        same_row = a.top() < b.bottom() - TOLERANCE and b.top() < a.bottom() - TOLERANCE
        if same_row and b.right() < a.left():
            problems.append(f"Tab goes right to left: {name_of(first)} -> {name_of(second)}")
        elif not same_row and b.bottom() < a.top():
            problems.append(f"Tab goes upwards: {name_of(first)} -> {name_of(second)}")
    return problems
