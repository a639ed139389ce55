"""Settings → Tools: add, import, test (with the command line shown first), switch tools off,
the log; against the real mcp-server-time."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QMessageBox, QTreeWidgetItem
from pytestqt.qtbot import QtBot

from app.config import Settings
from app.tools.config import SECRET_MARK, McpConfig
from app.ui.settings.settings_dialog import SettingsDialog
from app.ui.settings.tools_page import ToolsPage

TIME = f"{sys.executable} -m mcp_server_time"


@pytest.fixture
def page(qtbot: QtBot, ember_app: QApplication, ember_home: Path) -> Iterator[ToolsPage]:
    dialog = SettingsDialog(Settings(), None)
    qtbot.addWidget(dialog)
    dialog.show_page("Tools")
    yield dialog.tools_page
    dialog.done(0)  # stops what a Test started


def test_the_tools_page_is_in_settings(page: ToolsPage) -> None:
    dialog = page.window()
    assert isinstance(dialog, SettingsDialog)
    assert dialog.nav.currentItem().text() == "Tools"
    assert page.isVisibleTo(dialog)


def test_add_a_server_test_it_and_switch_a_tool_off(qtbot: QtBot, page: ToolsPage) -> None:
    page.name.setText("time")
    page.command.setText(TIME)
    page.env.setPlainText("TIME_API_KEY=abc123\nLOG=1")
    with qtbot.waitSignal(page.tools_changed):
        page.save()
    saved = McpConfig().get("time")
    assert saved.command_line == TIME
    assert saved.env == {"TIME_API_KEY": SECRET_MARK, "LOG": "1"}  # the key is in the keyring
    assert page.env.toPlainText() == f"TIME_API_KEY={SECRET_MARK}\nLOG=1"
    # Never run: Test shows the exact command line first, and runs only after "Run".
    page.request_test()
    box = page.approval_box
    assert box is not None and TIME in box.informativeText()
    assert page.tool_tree.topLevelItemCount() == 0
    run = next(b for b in box.buttons() if b.text() == "Run")
    run.click()
    qtbot.waitUntil(lambda: page.tool_tree.topLevelItemCount() == 2, timeout=60_000)
    assert not McpConfig().get("time").needs_approval
    assert page.status.text() == "Connected: 2 tools."
    items: dict[str, QTreeWidgetItem] = {}
    for i in range(page.tool_tree.topLevelItemCount()):
        item = page.tool_tree.topLevelItem(i)
        assert item is not None
        items[item.text(0)] = item
    current = items["get_current_time"]
    assert "Get current time" in current.text(1)
    schema = current.child(0)
    assert schema is not None and '"timezone"' in schema.text(1)  # its input schema
    with qtbot.waitSignal(page.tools_changed):
        items["convert_time"].setCheckState(0, Qt.CheckState.Unchecked)
    assert McpConfig().get("time").disabled_tools == {"convert_time"}
    page.show_log()
    assert (
        "starting" in page.log_view.toPlainText()
        and "mcp_server_time" in page.log_view.toPlainText()
    )


def test_cancel_on_the_command_line_runs_nothing(qtbot: QtBot, page: ToolsPage) -> None:
    page.name.setText("time")
    page.command.setText(TIME)
    with qtbot.waitSignal(page.tools_changed):
        page.save()
    page.request_test()
    box = page.approval_box
    assert box is not None
    box.button(QMessageBox.StandardButton.Cancel).click()
    assert McpConfig().get("time").needs_approval
    assert not page.manager.log_path("time").exists()  # it never started


def test_import_a_claude_desktop_file(page: ToolsPage, tmp_path: Path) -> None:
    source = tmp_path / "claude_desktop_config.json"
    servers = {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]}}
    source.write_text(json.dumps({"mcpServers": servers}))
    page.import_file(source)
    assert page.status.text() == "Imported 1 server: time."
    assert page.server_list.count() == 1
    assert page.command.text() == TIME


def test_a_bad_entry_says_what_to_fix(page: ToolsPage) -> None:
    page.name.setText("x")
    page.save()
    assert "give either a command (stdio) or a url (HTTP)" in page.status.text()
    page.command.setText("run")
    page.env.setPlainText("no equals sign")
    page.save()
    assert "Environment: write one NAME=value a line, not 'no equals sign'" in page.status.text()


def test_stopping_a_server_never_holds_the_window(
    qtbot: QtBot, page: ToolsPage, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    released = threading.Event()
    stopped: list[str] = []

    def slow_stop(name: str) -> None:  # a server that takes its time to leave
        released.wait()
        stopped.append(name)

    monkeypatch.setattr(page.manager, "stop", slow_stop)
    page.name.setText("time")
    page.command.setText(TIME)
    with qtbot.waitSignal(page.tools_changed):
        page.save()  # saved and said while the old connection is still stopping
    assert page.status.text() == "Saved time."
    page.remove_server()
    assert McpConfig().find("time") is None and stopped == []
    released.set()
    qtbot.waitUntil(lambda: stopped == ["time", "time"])


def test_closing_the_page_stops_its_servers_on_the_tools_lane_without_holding_the_quit(
    qtbot: QtBot, page: ToolsPage, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from app.ui.task_runner import shutdown_tasks, tasks

    released = threading.Event()
    stopped_on: list[str] = []

    def slow_shutdown() -> None:  # servers that take their time to leave
        stopped_on.append(threading.current_thread().name)
        released.wait()

    monkeypatch.setattr(page.manager, "shutdown", slow_shutdown)
    # an earlier test's servers may still be stopping on the tools lane: let them go first
    qtbot.waitUntil(lambda: not tasks().busy("tools"), timeout=60_000)
    page.shutdown()
    assert tasks().busy("tools")
    qtbot.waitUntil(lambda: stopped_on == ["ember-tools"])
    # quitting now abandons it instead of waiting (other tests' work may be abandoned beside it)
    (stop,) = [task for task in shutdown_tasks(wait=0) if task.name == "mcp-stop"]
    released.set()
    assert stop.finished.wait(10)


def test_with_no_server_the_page_says_what_mcp_is_and_how_to_add_one(
    qtbot: QtBot, page: ToolsPage, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from PySide6.QtWidgets import QFileDialog, QLabel

    assert page.empty_state.isVisibleTo(page)
    assert not page.server_list.isVisibleTo(page) and not page.remove_button.isVisibleTo(page)
    text = " ".join(label.text() for label in page.empty_state.findChildren(QLabel))
    assert "No MCP servers yet" in text and "MCP (Model Context Protocol)" in text
    assert not page.status.isVisibleTo(page) and not page.tool_tree.isVisibleTo(page)
    page.empty_add_button.click()
    assert page.current is None and not page.name.isReadOnly()  # the form is for a new one

    # "Import from Claude Desktop…" opens on Claude Desktop's own file.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    claude = tmp_path / "config" / "Claude" / "claude_desktop_config.json"
    claude.parent.mkdir(parents=True)
    servers = {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]}}
    claude.write_text(json.dumps({"mcpServers": servers}))
    opened: list[str] = []

    def pick(_parent: object, _title: str, start: str, _filter: str) -> tuple[str, str]:
        opened.append(start)  # the person picks the file the dialog opened on
        return start, ""

    monkeypatch.setattr(QFileDialog, "getOpenFileName", pick)
    with qtbot.waitSignal(page.tools_changed):
        page.empty_import_button.click()
    assert opened == [str(claude)]
    assert page.status.text() == "Imported 1 server: time." and page.status.isVisibleTo(page)
    assert not page.empty_state.isVisibleTo(page) and page.server_list.isVisibleTo(page)
    page.remove_server()
    assert page.empty_state.isVisibleTo(page) and not page.server_list.isVisibleTo(page)
