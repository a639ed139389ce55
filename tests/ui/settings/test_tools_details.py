"""Tools as a person meets them: Test's result comes into view, Save does not move the buttons
under the pointer, the list says how each server is doing, tool names are whole, the composer's
button says what its menu has ticked, and a result reads as text under a tool's icon, not as
raw JSON under Ember's flame. Against the real mcp-server-time."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QApplication, QScrollArea
from pytestqt.qtbot import QtBot

from app.chats.models import Message
from app.config import Settings
from app.ui import icons, theme
from app.ui.chat.markdown import MarkdownRenderer
from app.ui.chat.message_widget import MessageWidget
from app.ui.chat.tool_message import readable
from app.ui.chat.tool_panel import ToolPanel
from app.ui.chat.tool_turn import ToolSetup
from app.ui.settings.settings_dialog import SettingsDialog
from app.ui.settings.tools_page import ToolsPage

TIME = f"{sys.executable} -m mcp_server_time"


@pytest.fixture
def page(qtbot: QtBot, ember_app: QApplication, ember_home: Path) -> Iterator[ToolsPage]:
    dialog = SettingsDialog(Settings(), None)
    qtbot.addWidget(dialog)
    dialog.resize(900, 560)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.show_page("Tools")
    yield dialog.tools_page
    dialog.done(0)


def test_save_test_and_the_list_as_a_person_sees_them(qtbot: QtBot, page: ToolsPage) -> None:
    page.empty_add_button.click()
    page.name.setText("time")
    page.command.setText(TIME)
    window = page.window()
    before = page.save_button.mapTo(window, QPoint(0, 0))
    with qtbot.waitSignal(page.tools_changed):
        page.save_button.click()
    QApplication.processEvents()
    assert page.save_button.mapTo(window, QPoint(0, 0)) == before  # not moved by Save
    item = page.server_list.item(0)
    assert item is not None and "not running" in item.text()
    page.request_test()
    box = page.approval_box
    assert box is not None
    next(b for b in box.buttons() if b.text() == "Run").click()
    qtbot.waitUntil(lambda: page.tool_tree.topLevelItemCount() == 2, timeout=60_000)
    qtbot.waitUntil(lambda: "running, 2 tools" in page.server_list.item(0).text())
    scroll = next(w for w in _ancestors(page) if isinstance(w, QScrollArea))
    viewport = scroll.viewport()

    def in_view() -> bool:
        top = page.status.mapTo(viewport, QPoint(0, 0))
        return top.y() >= 0 and top.y() + page.status.height() <= viewport.height()

    qtbot.waitUntil(in_view)  # Test's result scrolled into view
    tree = page.tool_tree
    names = [tree.topLevelItem(i).text(0) for i in range(tree.topLevelItemCount())]  # type: ignore[union-attr]
    needed = max(tree.fontMetrics().horizontalAdvance(n) for n in names)
    assert tree.columnWidth(0) > needed  # "get_current_time" whole, beside its check box


def _ancestors(widget: object) -> list[object]:
    out = []
    parent = widget.parentWidget()  # type: ignore[attr-defined]
    while parent is not None:
        out.append(parent)
        parent = parent.parentWidget()
    return out


def test_the_composers_button_says_what_the_menu_ticks(
    qtbot: QtBot, ember_app: QApplication
) -> None:
    panel = ToolPanel()
    qtbot.addWidget(panel)
    panel.set_setup(ToolSetup((), "auto"))  # "The model decides" ticked, no server yet
    assert panel.button.text() == "Tools: no server chosen"
    panel.set_setup(ToolSetup(("time",), "auto"))
    assert panel.button.text() == "Tools: time"
    panel.set_setup(ToolSetup(("time",), "required"))
    assert panel.button.text() == "Tools: time (a call first)"
    panel.set_setup(ToolSetup(("time",), "none"))
    assert panel.button.text() == "Tools: off"


def test_a_result_reads_as_text_under_a_tools_icon(qtbot: QtBot, ember_app: QApplication) -> None:
    result = {"timezone": "Europe/Paris", "datetime": "2026-12-05T04:00:00+01:00", "is_dst": False}
    assert readable(json.dumps(result)) == (
        "timezone: Europe/Paris\ndatetime: 2026-12-05T04:00:00+01:00\nis dst: no"
    )
    assert readable('{"a": {"b": [1, 2]}, "c": []}') == "a:\n    b:\n        • 1\n        • 2\nc: —"
    assert readable("plain words") is None
    message = Message(
        id="m1",
        conversation_id="c1",
        parent_id=None,
        role="tool",
        content=json.dumps(result),
        status="complete",
        created_at=0.0,
        metadata={"tool": "get_current_time", "server": "time"},
    )
    widget = MessageWidget(message, MarkdownRenderer(theme.LIGHT))
    qtbot.addWidget(widget)
    shown = widget.tool_view.folded[0].text()  # type: ignore[attr-defined]
    assert "timezone: Europe/Paris" in shown and "{" not in shown
    flame = icons.pixmap("flame", theme.current().accent, 18, widget.devicePixelRatioF())
    assert widget.avatar.pixmap().toImage() != flame.toImage()
