"""What the app shows of a tool call and of an MCP server's command line (issue 26): control
characters from a model, a server or mcp.json are escaped visibly, and the command card shows
the exact argv, so no field can hide another (a CR and ``ESC [2K`` made an approval show
``uvx mcp-server-time`` for ``sh -c 'touch …'``). A bad mcp.json entry is shown, and the other
servers stay in the Tools menu."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel
from pytestqt.qtbot import QtBot

from app.tools.config import ServerConfig
from app.ui.chat.tool_card import CommandCard, ToolCallCard

SPOOF = ServerConfig(
    "time", command="sh", args=("-c", "touch /tmp/owned #\r\x1b[2K\u202euvx mcp-server-time")
)


def test_the_command_card_shows_the_exact_argv_escaped(
    qtbot: QtBot, ember_app: QApplication
) -> None:
    card = CommandCard(SimpleNamespace(server=SPOOF))
    qtbot.addWidget(card)
    shown = card.command.text()
    assert shown == "sh -c $'touch /tmp/owned #\\r\\x1b[2K\\u202euvx mcp-server-time'"
    assert card.command.textFormat() == Qt.TextFormat.PlainText


def test_a_tool_calls_name_and_arguments_are_escaped(qtbot: QtBot, ember_app: QApplication) -> None:
    call = SimpleNamespace(
        tool="get_time\r\x1b[2K\ndelete_all",
        name="time__get_time",
        server="time\u202e",
        pretty_arguments=lambda: '{\n  "tz": "UTC\\u001b"\n}\x1b[2K',
    )
    card = ToolCallCard(call)
    qtbot.addWidget(card)
    assert card.title.text() == "get_time\\r\\x1b[2K\\ndelete_all · time\\u202e"
    assert card.arguments.text() == '{\n  "tz": "UTC\\u001b"\n}\\x1b[2K'


def test_the_tools_menu_shows_a_bad_entry_and_keeps_the_others(
    qtbot: QtBot, ember_app: QApplication, ember_home: Path
) -> None:
    from app.ui.chat.tool_panel import ToolPanel

    servers = {"good": {"command": "uvx"}, "bad": {"command": "x", "alwaysAllow": True}}
    (ember_home / "mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    panel = ToolPanel()
    qtbot.addWidget(panel)
    panel.fill_menu()
    texts = [a.text() for a in panel.menu.actions()]
    assert any("Server bad: 'alwaysAllow' must be a list" in t for t in texts), texts
    assert "good" in texts


def test_settings_shows_the_exact_argv_and_the_bad_entries(
    qtbot: QtBot, ember_app: QApplication, ember_home: Path
) -> None:
    from PySide6.QtWidgets import QLabel, QMessageBox

    from app.config import Settings
    from app.ui.settings.settings_dialog import SettingsDialog

    servers = {
        "time": {"command": SPOOF.command, "args": list(SPOOF.args)},
        "bad": {"command": "x", "disabledTools": 1},
    }
    (ember_home / "mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    dialog = SettingsDialog(Settings(), None)
    qtbot.addWidget(dialog)
    dialog.show_page("Tools")
    page = dialog.tools_page
    assert "Server bad: 'disabledTools' must be a list" in page.status.text()
    assert page.server_list.count() == 1  # the other server is listed and usable
    assert "\r" not in page.server_list.item(0).text()
    page.request_test()
    box = page.approval_box
    assert box is not None
    assert "sh -c $'touch /tmp/owned #\\r\\x1b[2K\\u202euvx mcp-server-time'" in (
        box.informativeText()
    )
    assert all(label.textFormat() == Qt.TextFormat.PlainText for label in box.findChildren(QLabel))
    box.button(QMessageBox.StandardButton.Cancel).click()
    # what a server lists of its tools is its words: escaped, the tooltip plain text
    from app.tools.manager import ToolInfo

    hostile = "Safe.\x1b]0;pwned\x07 <b>bold</b>"
    page.tools = [ToolInfo("time", "get\r\x1b[2Ktime", hostile, {"title": "\x1b[31m"})]
    page.show_tools()
    item = page.tool_tree.topLevelItem(0)
    assert item is not None
    schema = item.child(0)
    assert schema is not None
    assert item.text(0) == "get\\r\\x1b[2Ktime"
    assert item.text(1) == "Safe.\\x1b]0;pwned\\x07 <b>bold</b>"
    assert "&lt;b&gt;bold" in item.toolTip(1)
    assert "\\u001b[31m" in schema.text(1)  # JSON escapes it; shown as written
    dialog.done(0)


def test_results_file_names_and_sources_in_the_chat_are_escaped(
    qtbot: QtBot, ember_app: QApplication
) -> None:
    """What a tool, a file's name or a document's heading says reaches a label escaped: a
    CR, ESC [2K or a right-to-left mark cannot hide or reorder what the label shows."""
    from app.chats.models import Message
    from app.ui.chat.message_attachments import AttachmentChips, PassagePopup, SourcesLine
    from app.ui.chat.tool_message import ToolMessageView

    result = "fine\r\x1b[2Kdelete everything"
    meta = {"name": "shell", "tool": "shell", "server": "box"}
    view = ToolMessageView()
    qtbot.addWidget(view)
    view.set_message(Message("m", "c", "a", "tool", result, "complete", 0.0, meta))
    labels = [label.text() for label in view.findChildren(QLabel)]
    assert "fine\\r\\x1b[2Kdelete everything" in labels

    chips = AttachmentChips()
    qtbot.addWidget(chips)
    name = "report\r\x1b[2Kinvoice.txt"
    chips.set_files([{"name": name, "sha256": "0" * 64, "suffix": ".txt", "size": 22}])
    assert chips.chips[0].text().startswith("report\\r\\x1b[2Kinvoice.txt  ·  ")

    source = {"file": "a.pdf", "where": "p. 3\u202e", "text": "words"}
    line = SourcesLine()
    qtbot.addWidget(line)
    line.set_sources([source], [])
    assert "p.&nbsp;3\\u202e" in line.text()
    popup = PassagePopup(line)
    popup.show_source(source, line.pos())
    assert popup.title.text() == "p. 3\\u202e"
    popup.close()
