"""Every action reachable from the keyboard: the shortcut list (app/ui/shortcuts.py) holds every
shortcut the window has, Help (F1, or the rail's Keys button) shows it, README.md lists it; Tab
goes round every control of the window and reaches the ones the rail's buttons open."""

from __future__ import annotations

import re

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QApplication, QLabel
from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from app.ui.shortcuts import SHORTCUTS, ShortcutsDialog, native
from tests.helpers.conformance import checks, states
from tests.helpers.conformance.shots import ROOT

pytestmark = pytest.mark.gui_conformance

LISTED = {QKeySequence(keys).toString() for keys, _what in SHORTCUTS}


def test_every_shortcut_of_the_window_is_listed(conformance_window: MainWindow) -> None:
    keys = {s.key().toString() for s in conformance_window.findChildren(QShortcut)}
    assert keys, "no shortcuts found"
    assert keys <= LISTED, f"not in app/ui/shortcuts.py: {sorted(keys - LISTED)}"


def test_f1_and_the_rail_open_the_list(qtbot: QtBot, conformance_window: MainWindow) -> None:
    window = conformance_window
    window.activateWindow()
    for open_ in (
        lambda: qtbot.keyClick(window, Qt.Key.Key_F1),
        window.rail.help_button.click,
    ):
        open_()
        dialog = window.shortcuts_dialog
        assert isinstance(dialog, ShortcutsDialog)
        qtbot.waitExposed(dialog)
        shown = {label.text() for label in dialog.findChildren(QLabel)}
        assert all(native(keys) in shown and what in shown for keys, what in SHORTCUTS)
        dialog.close()
        QApplication.processEvents()


def test_the_readme_lists_every_shortcut() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    found = re.search(r"^Shortcuts: (.+?)\n\n", readme, re.S | re.M)
    assert found, "README.md has no 'Shortcuts:' paragraph"
    paragraph = " ".join(found.group(1).split())
    missing = [keys for keys, _what in SHORTCUTS if keys not in paragraph]
    assert not missing, f"README.md's shortcuts lack {missing}"


@pytest.mark.parametrize("chat", [False, True], ids=["welcome", "chat"])
def test_tab_goes_round_every_control(
    qtbot: QtBot, conformance_window: MainWindow, chat: bool
) -> None:
    """From the message box, Tab visits each control once and comes back to it."""
    window = conformance_window
    if chat:
        states.fill_chat(window)
    window.activateWindow()
    composer = window.chat.composer.input
    composer.setFocus()
    qtbot.waitUntil(composer.hasFocus)
    chain = checks.focus_chain(window)
    assert composer in chain and window.header.picker.button in chain
    visited = []
    for _ in range(len(chain) + 1):
        window.focusNextChild()
        QApplication.processEvents()
        focused = QApplication.focusWidget()
        if focused is composer:
            break
        visited.append(focused)
    assert QApplication.focusWidget() is composer, "Tab never came back to the message box"
    assert len(visited) == len(set(map(id, visited))), "Tab visited a control twice"
    named = [w for w in visited if w is not None and not checks.accessible_name(w)]
    assert not named, f"unnamed controls on Tab's way: {[checks.name_of(w) for w in named]}"
