"""One walk through the app at one size and theme: every page, panel, popup and dialog, each
checked (checks.py) and photographed (conftest.Shots). Returns every problem found."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QDialog, QWidget
from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from app.ui.models.pane import DISCOVER, DOWNLOADS, MY_MODELS
from app.ui.nav_rail import CHATS
from app.ui.settings.hardware_page import HardwarePage
from app.ui.settings.settings_dialog import PAGES
from app.ui.toast import Toast
from tests.helpers.conformance import checks, states
from tests.helpers.conformance.shots import Shots
from tests.helpers.hub_server import FakeHub

# Controls Tab does not reach on purpose, each reached by a shortcut listed in Help instead.
KEYBOARD_OK = {
    "NavButton",  # Ctrl+1/2/3, Ctrl+, (Settings)
    "ServerBarSwitch",  # the status bar's copy of the Server page's switch (Ctrl+3)
}


class Walk:
    def __init__(self, qtbot: QtBot, window: MainWindow, shots: Shots, size: QSize) -> None:
        self.qtbot = qtbot
        self.window = window
        self.shots = shots
        self.size = size
        self.problems: list[str] = []

    def look(self, state: str, root: QWidget | None = None) -> None:
        """Check ``root`` (the window by default) as it is now, and photograph it."""
        states.settle()
        widget = root or self.window
        found = checks.text_problems(widget) + checks.layout_problems(widget)
        found += checks.accessibility_problems(widget, KEYBOARD_OK)
        found += checks.focus_order_problems(widget)
        if widget.isWindow():
            found += self._fits_the_screen(widget)
        self.problems += [f"[{state}] {p}" for p in found]
        self.shots.save(widget, state)

    def _fits_the_screen(self, widget: QWidget) -> list[str]:
        """The window keeps the size asked for; a dialog fits in a screen of that size."""
        if widget is self.window:
            if widget.size() != self.size:
                return [f"the window is {widget.width()}x{widget.height()}, not {self.size}"]
            return []
        hint = widget.minimumSizeHint().expandedTo(widget.minimumSize())
        if hint.width() > self.size.width() or hint.height() > self.size.height():
            return [f"{checks.name_of(widget)}: needs {hint.width()}x{hint.height()}"]
        return []

    def dialog(self, state: str, dialog: QDialog, pages: Callable[[], None] | None = None) -> None:
        """A dialog at the size it opens with, capped to the screen size being walked."""
        size = dialog.size().boundedTo(self.size)
        dialog.resize(size.expandedTo(dialog.minimumSize()))
        self.look(state, dialog)


def walk_everything(
    qtbot: QtBot, window: MainWindow, shots: Shots, size: QSize, hub: FakeHub | None = None
) -> list[str]:
    walk = Walk(qtbot, window, shots, size)
    window.resize(size)
    states.settle()
    walk.look("welcome")

    states.fill_chat(window)
    walk.look("chat with every kind of message")
    states.show_banner(window)
    states.show_toast(window)
    walk.look("error banner and toast")
    window.chat.banner.hide()
    toast = window.findChild(Toast)
    if toast is not None:
        toast.dismiss()

    states.ask_for_a_tool(window)
    states.attach_a_file(qtbot, window)
    walk.look("a tool call waiting and a file attached")
    states.settle_tool_call(window)

    window.header.settings_button.setChecked(True)
    walk.look("chat settings")
    window.header.settings_button.setChecked(False)

    if not window.sidebar.isVisible():
        window.toggle_sidebar()
        walk.look("sidebar shown in a narrow window")
        window.toggle_sidebar()

    picker = window.header.picker
    picker.open_menu()
    states.settle()
    walk.look("model picker", picker.menu)
    picker.menu.close()

    button = states.loaded_models_button(window)
    button.open_popup()
    qtbot.waitUntil(lambda: bool(button.popup.unload_buttons), timeout=states.WAIT_MS)
    walk.look("loaded models", button.popup)
    button.popup.close()

    states.search_discover(qtbot, window)
    walk.look("discover's results")
    states.open_discover_repo(qtbot, window)
    walk.look("discover with a repository open")
    pane = window.models_pane
    if hub is not None:
        states.start_a_download(qtbot, window, hub)
    for tab, name in ((DOWNLOADS, "downloads"), (MY_MODELS, "my models")):
        pane.show_tab(tab)
        walk.look(name)
    if hub is not None:
        states.pause_downloads(qtbot, window, hub)
    pane.show_tab(DISCOVER)

    states.fill_server_log(window)
    walk.look("server page with its log")
    window.show_page(CHATS)

    window.open_shortcuts()
    shortcuts = window.shortcuts_dialog
    assert shortcuts is not None
    qtbot.waitExposed(shortcuts)
    walk.dialog("keyboard shortcuts", shortcuts)  # type: ignore[arg-type]
    shortcuts.close()

    window.open_settings()
    dialog = window.settings_dialog
    assert dialog is not None
    qtbot.waitExposed(dialog)
    hardware = dialog.findChild(HardwarePage)
    assert hardware is not None
    for name, _icon in PAGES:
        dialog.show_page(name)
        if name == "Hardware":  # what was found, not "Looking…"
            qtbot.waitUntil(lambda: not hardware.status.isVisible(), timeout=states.WAIT_MS)
        walk.dialog(f"settings {name}", dialog)
    dialog.close()
    states.settle()
    return walk.problems
