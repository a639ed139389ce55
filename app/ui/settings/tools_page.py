"""Settings → Tools: MCP servers whose tools models may call in chats.

The page lists the servers of ``mcp.json`` (add, import a Claude Desktop / Cursor / Jan file,
remove; with none yet, a card says what MCP is and how to add or import one), edits the selected
one (command line, env, folder, or URL and headers; on or off) and "Test" connects to it and
lists its tools with their descriptions and input schemas, each with a switch. Before a stdio
server runs for the first time the exact command line is shown and runs only after "Run".
Secrets in env and headers go to the keyring (shown as ``<secret>``; keep the mark to keep the
secret). The server's log (its stderr) is a click away.

Writing (the keyring may be slow) and testing run off the GUI thread.

Signal: ``tools_changed()`` after a server or a tool switch changed.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import QShowEvent
from PySide6.QtGui import Qt as GuiQt
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QCheckBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QStackedWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.safe_text import label_text
from app.tools.config import McpConfig, ServerConfig, claude_desktop_config
from app.tools.manager import ToolInfo, ToolManager
from app.ui.settings.provider_editor import text_label
from app.ui.task_runner import tasks

LOG_TAIL_CHARS = 20_000


def _lines(values: dict[str, str], sep: str) -> str:
    return "\n".join(f"{k}{sep}{v}" for k, v in values.items())


def _parse_lines(text: str, sep: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, found, value = line.partition(sep)
        if not found or not name.strip():
            shape = "NAME=value" if sep == "=" else "Name: value"
            raise ValueError(f"{what}: write one {shape} a line, not {line!r}.")
        out[name.strip()] = value.strip()
    return out


def _item_text(server: ServerConfig, state: str) -> str:
    """A server in the list: its name, how it is doing, then what it runs (cut first)."""
    return f"{server.name} · {state} — {server.target}"


class ToolsPage(QWidget):
    """See the module docstring. ``manager``: the app's (shared with chats), else its own."""

    tools_changed = Signal()

    def __init__(
        self,
        config: McpConfig | None = None,
        manager: ToolManager | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ToolsPage")
        self.config = config or McpConfig()
        self._own_manager = manager is None
        self.manager = manager or ToolManager(self.config)
        self.servers: list[ServerConfig] = []
        self.current: ServerConfig | None = None
        self.approval_box: QMessageBox | None = None
        self.tools: list[ToolInfo] = []

        title = text_label("Tools", "PageTitle", self)
        subtitle = text_label(
            "MCP servers give models tools: read files, search, query a database, call an API. "
            "Nothing runs without your permission: each call is asked about in the chat unless "
            "you chose to always allow that tool.",
            "FieldHelp",
            self,
            wrap=True,
        )
        self.empty_state = self._empty_state()
        self.server_list = QListWidget(self)
        self.server_list.setObjectName("ToolServers")
        self.server_list.setFixedHeight(130)
        # a long command line ends in "…" (the tooltip has it all), never a sideways scroll bar
        self.server_list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.server_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.server_list.currentRowChanged.connect(self._on_server_selected)
        self.add_button = self._button("Add server", self.new_server)
        self.import_button = self._button("Import…", self._on_import_clicked)
        self.remove_button = self._button("Remove", self.remove_server)
        self.list_buttons = QWidget(self)
        list_buttons = QHBoxLayout(self.list_buttons)
        list_buttons.setContentsMargins(0, 0, 0, 0)
        for b in (self.add_button, self.import_button, self.remove_button):
            list_buttons.addWidget(b)
        list_buttons.addStretch(1)
        # The card (no server yet) and the list share one place of one height: saving the
        # first server does not move the form and its buttons under the pointer.
        self.top = QStackedWidget(self)
        listing = QWidget(self.top)
        listing_layout = QVBoxLayout(listing)
        listing_layout.setContentsMargins(0, 0, 0, 0)
        listing_layout.addWidget(self.server_list)
        listing_layout.addWidget(self.list_buttons)
        listing_layout.addStretch(1)
        self.top.addWidget(self.empty_state)
        self.top.addWidget(listing)

        self.name = QLineEdit(self)
        self.name.setPlaceholderText("time")
        self.command = QLineEdit(self)
        self.command.setPlaceholderText("uvx mcp-server-time   (or leave empty and give a URL)")
        self.command.setToolTip(self.command.placeholderText())  # the hint is cut when narrow
        self.env = QPlainTextEdit(self)
        self.env.setPlaceholderText("NAME=value, one a line")
        self.env.setFixedHeight(54)
        self.cwd = QLineEdit(self)
        self.url = QLineEdit(self)
        self.url.setPlaceholderText("https://example.com/mcp   (a Streamable HTTP server)")
        self.url.setToolTip(self.url.placeholderText())
        self.headers = QPlainTextEdit(self)
        self.headers.setPlaceholderText("Name: value, one a line")
        self.headers.setFixedHeight(54)
        self.enabled = QCheckBox("Models may use this server", self)
        self.enabled.setChecked(True)
        form = QFormLayout()
        form.addRow("Name", self.name)
        form.addRow("Command", self.command)
        form.addRow("Environment", self.env)
        form.addRow("Folder", self.cwd)
        form.addRow("URL", self.url)
        form.addRow("Headers", self.headers)
        form.addRow("", self.enabled)

        self.save_button = self._button("Save", self.save, primary=True)
        self.test_button = self._button("Test", self.request_test)
        self.log_button = self._button("Show log", self.show_log)
        actions = QHBoxLayout()
        for b in (self.save_button, self.test_button, self.log_button):
            actions.addWidget(b)
        actions.addStretch(1)
        self.status = text_label("", "TestResult", self, wrap=True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.tool_tree = QTreeWidget(self)
        self.tool_tree.setObjectName("ToolList")
        self.tool_tree.setHeaderLabels(["Tool", "What it does"])
        self.tool_tree.setMinimumHeight(140)
        header = self.tool_tree.header()  # tool names whole ("get_current_time")
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.tool_tree.itemChanged.connect(self._on_tool_item_changed)
        self.log_view = QPlainTextEdit(self)
        self.log_view.setReadOnly(True)
        self.log_view.setObjectName("ToolLog")
        self.log_view.hide()

        layout = QVBoxLayout(self)
        layout.setContentsMargins(28, 22, 28, 22)
        layout.setSpacing(10)
        layout.addWidget(title)
        layout.addWidget(subtitle)
        layout.addWidget(self.top)
        layout.addLayout(form)
        layout.addLayout(actions)
        layout.addWidget(self.status)
        layout.addWidget(self.tool_tree, 10)
        layout.addWidget(self.log_view)
        layout.addStretch(1)  # below the form while nothing was tested (no empty boxes)
        self.status.hide()
        self.tool_tree.hide()
        self.reload()

    def _button(self, text: str, slot: Any, primary: bool = False) -> QPushButton:
        button = QPushButton(text, self)
        button.setObjectName("PrimaryButton" if primary else "SecondaryButton")
        button.clicked.connect(slot)
        return button

    def _empty_state(self) -> QFrame:
        """Shown instead of the list while there is no server: what MCP is, and two ways on."""
        card = QFrame(self)
        card.setObjectName("Card")
        card.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        title = text_label("No MCP servers yet", "StepTitle", card)
        about = text_label(
            "An MCP (Model Context Protocol) server is a small program or web service that "
            "gives models tools. Claude Desktop, Cursor and Jan use the same servers.",
            "FieldHelp",
            card,
            wrap=True,
        )
        how = text_label(
            "Add a server: give it a name and a command (such as uvx mcp-server-time) or a "
            "URL below, then Save. Or import the servers you already use.",
            "FieldHelp",
            card,
            wrap=True,
        )
        self.empty_add_button = self._button("Add a server", self.new_server, primary=True)
        self.empty_import_button = self._button(
            "Import from Claude Desktop…", self._on_import_claude_clicked
        )
        for button in (self.empty_add_button, self.empty_import_button):
            button.setParent(card)
        buttons = QHBoxLayout()
        buttons.addWidget(self.empty_add_button)
        buttons.addWidget(self.empty_import_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(card)
        layout.setContentsMargins(16, 12, 16, 12)
        layout.setSpacing(6)
        for label in (title, about, how):
            layout.addWidget(label)
        layout.addSpacing(4)
        layout.addLayout(buttons)
        return card

    def shutdown(self) -> None:
        """Stop the servers a Test started (only when the page owns its manager)."""
        if self._own_manager:  # off the GUI thread: a server may take a second to leave
            tasks().submit(self.manager.shutdown, lane="tools", name="mcp-stop")

    # -- the list ----------------------------------------------------------------------------

    def reload(self, select: str | None = None) -> None:
        try:
            self.servers = self.config.list()
            problems = self.config.problems()  # the other servers work meanwhile
        except ValueError as e:
            self.servers, problems = [], {"": str(e)}
        self.server_list.blockSignals(True)
        self.server_list.clear()
        for server in self.servers:
            state = self.server_state(server)
            item = QListWidgetItem(_item_text(server, state), self.server_list)
            item.setData(Qt.ItemDataRole.UserRole, server.name)
            item.setToolTip(f"{server.name}: {state}\n{server.target}")
        self.server_list.blockSignals(False)
        names = [s.name for s in self.servers]
        if select in names:
            self.server_list.setCurrentRow(names.index(select))
        elif names and self.current is None:
            self.server_list.setCurrentRow(0)
        elif not names:
            self.new_server()
        self.remove_button.setEnabled(bool(names))
        self.top.setCurrentIndex(1 if names else 0)
        self._fit_top()
        if problems:  # after the selection, which clears the status
            self.show_status("error", label_text("\n".join(problems.values())))

    def _fit_top(self) -> None:
        """The card or the list: one height, the taller one's as styled, never squeezed when
        the page fits its window (nor let out when a status line makes it scroll)."""
        pages = [w for i in range(self.top.count()) if (w := self.top.widget(i)) is not None]
        for page in pages:
            page.ensurePolished()
        self.top.setFixedHeight(max(page.sizeHint().height() for page in pages))

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self._fit_top()  # styled now

    def server_state(self, server: ServerConfig) -> str:
        """What the list says of a server: off, not started, starting, its tools, failed."""
        if not server.enabled:
            return "off"
        state, error = self.manager.status(server.name)
        if state == "ready":
            tools = self.manager.known_tools(server.name) or []
            return f"running, {len(tools)} tool{'s' if len(tools) != 1 else ''}"
        if state == "failed":
            return f"failed: {error}" if error else "failed"
        return {"starting": "starting…"}.get(state, "not running")

    @Slot(int)
    def _on_server_selected(self, row: int) -> None:
        if 0 <= row < len(self.servers):
            self.show_server(self.servers[row])

    def show_server(self, server: ServerConfig | None) -> None:
        self.current = server
        self.name.setText(server.name if server else "")
        self.name.setReadOnly(server is not None)
        self.command.setText(server.command_line if server else "")
        self.env.setPlainText(_lines(server.env, "=") if server else "")
        self.cwd.setText(server.cwd or "" if server else "")
        self.url.setText(server.url or "" if server else "")
        self.headers.setPlainText(_lines(server.headers, ": ") if server else "")
        self.enabled.setChecked(server.enabled if server else True)
        self.test_button.setEnabled(server is not None)
        self.log_button.setEnabled(server is not None)
        self.tool_tree.clear()
        self.tool_tree.hide()
        self.log_view.hide()
        self.status.setText("")
        self.status.hide()

    @Slot()
    def new_server(self) -> None:
        self.server_list.clearSelection()
        self.show_server(None)
        self.name.setFocus()

    def values(self) -> ServerConfig:
        """The edited server (raises ValueError saying what to fix)."""
        old = self.current
        words = shlex.split(self.command.text().strip()) if self.command.text().strip() else []
        url = self.url.text().strip() or None
        return ServerConfig(
            self.name.text().strip(),
            command=words[0] if words else None,
            args=tuple(words[1:]),
            env=_parse_lines(self.env.toPlainText(), "=", "Environment"),
            cwd=self.cwd.text().strip() or None,
            url=url,
            headers=_parse_lines(self.headers.toPlainText(), ":", "Headers"),
            enabled=self.enabled.isChecked(),
            disabled_tools=old.disabled_tools if old else frozenset(),
            always_allow=old.always_allow if old else frozenset(),
            approved_command=old.approved_command if old else None,
            extra=old.extra if old else {},
        )

    @Slot()
    def save(self) -> None:
        try:
            server = self.values()
        except ValueError as e:
            self.show_status("error", str(e))
            return
        replace = self.current is not None
        config = self.config
        self.save_button.setEnabled(False)
        tasks().submit(
            lambda: config.add(server, replace=replace), self._on_saved, self._on_save_failed
        )

    def _on_save_failed(self, error: BaseException) -> None:
        self.save_button.setEnabled(True)
        self.show_status("error", str(error))

    def _on_saved(self, result: ServerConfig) -> None:
        self.save_button.setEnabled(True)
        self._stop_server(result.name)  # the next use starts it as it is now
        self.current = result
        self.reload(select=result.name)
        self.show_status("ok", f"Saved {result.name}.")
        self.tools_changed.emit()

    def _stop_server(self, name: str) -> None:
        manager = self.manager
        tasks().submit(lambda: manager.stop(name), None, self._on_stop_failed, receiver=self)

    def _on_stop_failed(self, error: BaseException) -> None:
        self.show_status("error", str(error))

    @Slot()
    def remove_server(self) -> None:
        server = self.current
        if server is None:
            return
        self._stop_server(server.name)
        try:
            self.config.remove(server.name)
        except ValueError as e:
            self.show_status("error", str(e))
            return
        self.current = None
        self.reload()
        self.tools_changed.emit()

    @Slot()
    def _on_import_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Import MCP servers", str(Path.home()), "JSON (*.json)"
        )
        if path:
            self.import_file(Path(path))

    @Slot()
    def _on_import_claude_clicked(self) -> None:
        """The file dialog opens on Claude Desktop's config file when it is there."""
        found = claude_desktop_config()
        start = found if found.is_file() else Path.home()
        path, _ = QFileDialog.getOpenFileName(
            self, "Import MCP servers from Claude Desktop", str(start), "JSON (*.json)"
        )
        if path:
            self.import_file(Path(path))

    def import_file(self, path: Path) -> None:
        try:
            added = self.config.import_file(path)
        except ValueError as e:
            self.show_status("error", str(e))
            return
        self.reload(select=added[0] if added else None)
        count = len(added)
        self.show_status(
            "ok",
            f"Imported {count} server{'s' if count != 1 else ''}"
            + (f": {', '.join(added)}." if added else " (every name was here already)."),
        )
        self.tools_changed.emit()

    # -- testing -----------------------------------------------------------------------------

    @Slot()
    def request_test(self) -> None:
        """Test the selected server; a command line never run before is shown first."""
        server = self.current
        if server is None:
            return
        if not server.needs_approval:
            self._test(server)
            return
        box = QMessageBox(
            QMessageBox.Icon.Warning,
            "Run this command?",
            f"{server.name} starts a program on this computer:",
            QMessageBox.StandardButton.Cancel,
            self,
        )
        where = f"\n\nin {label_text(server.cwd, lines=False)}" if server.cwd else ""
        box.setInformativeText(f"{server.shown_command}{where}\n\nRun it only if you trust it.")
        for label in box.findChildren(QLabel):  # shown as written, never as rich text
            label.setTextFormat(Qt.TextFormat.PlainText)
        box.setObjectName("ToolCommandApproval")
        run = box.addButton("Run", QMessageBox.ButtonRole.AcceptRole)
        run.clicked.connect(self._on_command_approved)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        self.approval_box = box
        box.open()

    @Slot()
    def _on_command_approved(self) -> None:
        self.approval_box = None
        if self.current is None:
            return
        try:
            server = self.config.approve_command(self.current.name, seen=self.current.command_line)
        except ValueError as e:
            self.show_status("error", str(e))
            return
        self.current = server
        self._test(server)

    def _test(self, server: ServerConfig) -> None:
        self.show_status("busy", f"Connecting to {server.name}…")
        self.test_button.setEnabled(False)
        manager, name = self.manager, server.name

        def probe() -> list[ToolInfo]:
            manager.stop(name)  # test what is saved now, not an older connection
            return manager.list_tools(name)

        tasks().submit(probe, self._on_tested, self._on_test_failed, lane="network")

    def _on_tested(self, result: list[ToolInfo]) -> None:
        self.tools = list(result)
        self.show_tools()
        count = len(self.tools)
        self._show_test_result("ok", f"Connected: {count} tool{'s' if count != 1 else ''}.")

    def _on_test_failed(self, error: BaseException) -> None:
        self._show_test_result("error", str(error))

    def _show_test_result(self, kind: str, text: str) -> None:
        self.test_button.setEnabled(True)
        self._refresh_states()
        self.show_status(kind, text)
        QTimer.singleShot(0, self, self._reveal_result)  # once laid out with it

    def _refresh_states(self) -> None:
        for row, server in enumerate(self.servers):
            item = self.server_list.item(row)
            if item is not None:
                state = self.server_state(server)
                item.setText(_item_text(server, state))
                item.setToolTip(f"{server.name}: {state}\n{server.target}")

    @Slot()
    def _reveal_result(self) -> None:
        """Scroll the page so that Test's result (and the tools' first rows) is in view."""
        parent = self.parentWidget()
        while parent is not None and not isinstance(parent, QAbstractScrollArea):
            parent = parent.parentWidget()
        if isinstance(parent, QScrollArea):
            shown = self.tool_tree if self.tool_tree.isVisible() else self.status
            parent.ensureWidgetVisible(shown, 0, 40)
            parent.ensureWidgetVisible(self.status, 0, 10)

    def show_tools(self) -> None:
        server = self.current
        self.tool_tree.blockSignals(True)
        self.tool_tree.clear()
        for tool in self.tools:
            # the server's words: shown escaped (app/safe_text.py), the tooltip as plain text
            shown = [label_text(tool.name, lines=False), label_text(tool.description.strip())]
            item = QTreeWidgetItem(self.tool_tree, shown)
            item.setData(0, Qt.ItemDataRole.UserRole, tool.name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            on = server is None or server.tool_enabled(tool.name)
            item.setCheckState(0, Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
            item.setToolTip(1, GuiQt.convertFromPlainText(label_text(tool.description)))
            schema = label_text(json.dumps(tool.input_schema, ensure_ascii=False, indent=2))
            child = QTreeWidgetItem(item, ["input", schema])
            child.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
        self.tool_tree.resizeColumnToContents(0)
        self.tool_tree.blockSignals(False)
        self.tool_tree.setVisible(bool(self.tools))

    @Slot(QTreeWidgetItem, int)
    def _on_tool_item_changed(self, item: QTreeWidgetItem, _column: int) -> None:
        tool = item.data(0, Qt.ItemDataRole.UserRole)
        if self.current is None or not tool:
            return
        on = item.checkState(0) == Qt.CheckState.Checked
        self.current = self.config.set_tool_enabled(self.current.name, str(tool), on)
        self.tools_changed.emit()

    @Slot()
    def show_log(self) -> None:
        if self.current is None:
            return
        path = self.manager.log_path(self.current.name)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")[-LOG_TAIL_CHARS:]
        except FileNotFoundError:
            text = f"No log yet: {self.current.name} has not run. (It will be {path}.)"
        self.log_view.setPlainText(text)
        self.log_view.show()

    def show_status(self, kind: str, text: str) -> None:
        from app.ui import theme

        self.status.setText(text)
        self.status.setVisible(bool(text))
        theme.set_style_property(self.status, "kind", kind)
