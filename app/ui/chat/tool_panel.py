"""Tools above the composer: the open chat's choice of MCP servers and tool choice (a menu),
and the card of a call of the answer being written, while it waits for a decision and runs.

``ToolPanel`` is driven by the ConversationController: ``show_request(call)`` when a call waits
for a decision (the card stays while it runs: Esc stops it), ``show_running(call)`` when a call
runs (one always allowed gets its card then, without buttons), ``show_result(call)`` when it is
done (the card goes: the chat shows the call and its result folded under it), ``clear()`` when
another chat opens or a new answer begins. A server's command line waiting to be approved
(a ``CommandRequest``) comes the same way, as a command card; one not run stays as a note
until the next answer. Signals: ``decided(str)`` the person's answer to
the waiting call; ``setup_changed(object)`` a new ToolSetup for the open chat.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Signal, Slot
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import (
    QHBoxLayout,
    QMenu,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.safe_text import label_text
from app.ui.chat.tool_card import CommandCard, ToolCallCard
from app.ui.chat.tool_turn import CommandRequest, ToolSetup

CHOICES = (
    ("auto", "The model decides"),
    ("required", "The model must call a tool first"),
    ("none", "No tools"),
)


class ToolPanel(QWidget):
    """See the module docstring."""

    decided = Signal(str)
    setup_changed = Signal(object)

    def __init__(
        self,
        parent: QWidget | None = None,
        tools_of: Callable[[str], list[str] | None] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ToolPanel")
        # as tall as its cards need: a short window shrinks the chat above, not a card
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.tools_of = tools_of or (lambda _server: None)
        self.setup = ToolSetup()
        self.cards: dict[str, ToolCallCard | CommandCard] = {}
        self.button = QToolButton(self)
        self.button.setObjectName("ToolsButton")
        self.button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.menu = QMenu(self.button)
        self.menu.aboutToShow.connect(self.fill_menu)
        self.button.setMenu(self.menu)
        self.cards_layout = QVBoxLayout()
        self.cards_layout.setSpacing(6)
        row = QHBoxLayout()
        row.addWidget(self.button)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 6)
        layout.setSpacing(6)
        layout.addLayout(self.cards_layout)
        layout.addLayout(row)
        self.set_setup(self.setup)

    # -- the chat's tools ------------------------------------------------------------------

    @Slot(object)
    def set_setup(self, setup: ToolSetup) -> None:
        self.setup = setup
        if setup.active:  # the button says what the menu has ticked
            must = " (a call first)" if setup.choice == "required" else ""
            self.button.setText(f"Tools: {', '.join(setup.servers)}{must}")
        elif setup.choice == "none":
            self.button.setText("Tools: off")
        else:
            self.button.setText("Tools: no server chosen")
        self.button.setToolTip("Which MCP servers' tools the model may use in this chat")

    @Slot()
    def fill_menu(self) -> None:
        """The servers of Settings → Tools (read when the menu opens: a small file)."""
        from app.tools.config import McpConfig

        for submenu in self.menu.findChildren(QMenu):  # clear() leaves them behind
            submenu.deleteLater()
        self.menu.clear()
        try:
            config = McpConfig()
            servers = [s for s in config.list() if s.enabled]
            problems = list(config.problems().values())  # the other servers work meanwhile
        except ValueError as e:
            servers, problems = [], [str(e)]
        for problem in problems:
            self.menu.addAction(label_text(problem, lines=False)).setEnabled(False)
        if not servers:
            self.menu.addAction("No MCP servers yet: add one in Settings → Tools").setEnabled(False)
        for server in servers:
            action = QAction(server.name, self.menu)
            action.setCheckable(True)
            action.setChecked(server.name in self.setup.servers)
            action.setData(server.name)
            action.toggled.connect(self._on_server_toggled)
            self.menu.addAction(action)
            if server.name in self.setup.servers:
                self._add_tools(server.name, sorted(server.disabled_tools))

        self.menu.addSeparator()
        group = QActionGroup(self.menu)
        for value, label in CHOICES:
            action = QAction(label, self.menu)
            action.setCheckable(True)
            action.setChecked(self.setup.choice == value)
            action.setData(value)
            action.triggered.connect(self._on_choice_triggered)
            group.addAction(action)
            self.menu.addAction(action)

    def _add_tools(self, server: str, off_everywhere: list[str]) -> None:
        """The server's tools, each on or off for this chat (known once the server has run)."""
        names = self.tools_of(server)
        tools = self.menu.addMenu(f"{server}: tools in this chat")
        if names is None:
            tools.addAction("Listed once the server has run in a chat").setEnabled(False)
            return
        for name in names:
            if name in off_everywhere:
                continue  # off in Settings → Tools for every chat
            action = QAction(name, tools)
            action.setCheckable(True)
            action.setChecked(f"{server}/{name}" not in self.setup.tools_off)
            action.setData(f"{server}/{name}")
            action.toggled.connect(self._on_tool_toggled)
            tools.addAction(action)

    def choose_servers(self, names: list[str]) -> None:
        self._change(dataclasses.replace(self.setup, servers=tuple(names)))

    def choose(self, choice: Any) -> None:
        self._change(dataclasses.replace(self.setup, choice=choice))

    def set_tool_on(self, key: str, on: bool) -> None:
        """``key`` is ``"server/tool"``: may the model use it in this chat?"""
        off = [k for k in self.setup.tools_off if k != key] + ([] if on else [key])
        self._change(dataclasses.replace(self.setup, tools_off=tuple(off)))

    def _change(self, setup: ToolSetup) -> None:
        self.set_setup(setup)
        self.setup_changed.emit(setup)

    @Slot(bool)
    def _on_server_toggled(self, on: bool) -> None:
        action = self.sender()
        assert isinstance(action, QAction)
        name = str(action.data())
        names = [n for n in self.setup.servers if n != name] + ([name] if on else [])
        self.choose_servers(names)

    @Slot(bool)
    def _on_tool_toggled(self, on: bool) -> None:
        action = self.sender()
        assert isinstance(action, QAction)
        self.set_tool_on(str(action.data()), on)

    @Slot()
    def _on_choice_triggered(self) -> None:
        action = self.sender()
        assert isinstance(action, QAction)
        self.choose(str(action.data()))

    # -- the answer's calls ----------------------------------------------------------------

    @Slot(object)
    def show_request(self, call: Any) -> ToolCallCard | CommandCard:
        card = self.cards.get(call.id)
        if card is None:
            card = (
                CommandCard(call, self)
                if isinstance(call, CommandRequest)
                else ToolCallCard(call, self)
            )
            card.decided.connect(self.decided)
            self.cards_layout.addWidget(card)
            self.cards[call.id] = card
        return card

    @Slot(object)
    def show_running(self, call: Any) -> None:
        card = self.show_request(call)
        if isinstance(card, ToolCallCard) and card.waiting:  # not asked: always allowed
            card.set_running()

    @Slot(object)
    def show_result(self, call: Any) -> None:
        """The call is done: its card goes; the chat shows the call and, folded under it,
        the result (as saved messages). A command line not run stays as a note."""
        if isinstance(call, CommandRequest):
            command = self.cards.get(call.id)
            if isinstance(command, CommandCard) and call.decision == "deny":
                command.set_decided("deny")  # also when Esc answered it
                return
        card = self.cards.pop(call.id, None)
        if card is not None:
            self.cards_layout.removeWidget(card)
            card.hide()
            card.deleteLater()

    def pending(self) -> ToolCallCard | CommandCard | None:
        """The card still asking, if any."""
        return next((c for c in self.cards.values() if c.waiting), None)

    def clear(self) -> None:
        for card in self.cards.values():
            self.cards_layout.removeWidget(card)
            card.hide()
            card.deleteLater()
        self.cards.clear()
