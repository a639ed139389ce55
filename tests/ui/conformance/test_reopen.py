"""Every dialog, panel and popup opened, closed and opened again three times, with and without
an answer streaming (the fake worker writes it at a steady pace until it is stopped): each time
it opens whole (the same checks as test_pages.py), and the answer keeps streaming."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import QEvent, QSize
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from app.ui.nav_rail import CHATS, MODELS, SERVER
from tests.helpers.conformance import known, states
from tests.helpers.conformance.shots import Shots, shots_folder
from tests.helpers.conformance.walk import Walk
from tests.helpers.fake_app import ask

pytestmark = pytest.mark.gui_conformance

SIZE = QSize(942, 588)  # the default window on a 1024×640 screen
Opener = tuple[Callable[[], QWidget], Callable[[], None]]  # what opens it (shown), what closes it


def deleted_later() -> None:
    """What a few seconds of the event loop do: objects deleted later are deleted now."""
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    states.settle()


def chat_settings(window: MainWindow) -> Opener:
    def open_() -> QWidget:
        window.header.settings_button.setChecked(True)
        return window

    return open_, window.panel.close_requested.emit


def sidebar(window: MainWindow) -> Opener:
    def open_() -> QWidget:
        if not window.sidebar.isVisible():
            window.toggle_sidebar()
        return window

    def close() -> None:
        if window.sidebar.isVisible():
            window.toggle_sidebar()

    return open_, close


def popup(open_it: Callable[[], object], shown: Callable[[], QWidget]) -> Opener:
    """What ``open_it()`` opens and ``shown()`` finds, closed with its own ``close()``."""

    def open_() -> QWidget:
        open_it()
        return shown()

    def close() -> None:
        shown().close()

    return open_, close


def model_picker(window: MainWindow) -> Opener:
    picker = window.header.picker
    return popup(picker.open_menu, lambda: picker.menu)


def loaded_models(window: MainWindow) -> Opener:
    button = states.loaded_models_button(window)
    return popup(button.open_popup, lambda: button.popup)


def page(name: str) -> Callable[[MainWindow], Opener]:
    def make(window: MainWindow) -> Opener:
        def open_() -> QWidget:
            window.show_page(name)
            return window

        return open_, lambda: window.show_page(CHATS)

    return make


def dialog(opens: str, kept_in: str) -> Callable[[MainWindow], Opener]:
    """A dialog the window opens with ``window.<opens>()`` and keeps in ``window.<kept_in>``."""

    def make(window: MainWindow) -> Opener:
        def shown() -> QWidget:
            widget = getattr(window, kept_in)
            assert isinstance(widget, QWidget)
            return widget

        return popup(getattr(window, opens), shown)

    return make


OPENERS = {
    "keyboard shortcuts": dialog("open_shortcuts", "shortcuts_dialog"),
    "chat settings": chat_settings,
    "sidebar": sidebar,
    "model picker": model_picker,
    "loaded models": loaded_models,
    "models page": page(MODELS),
    "server page": page(SERVER),
    # issue 23, finding 1: Settings could not be opened a second time
    "settings": dialog("open_settings", "settings_dialog"),
}


@pytest.mark.parametrize("streaming", [False, True], ids=["idle", "streaming"])
@pytest.mark.parametrize("opener", list(OPENERS.values()), ids=list(OPENERS))
def test_opened_closed_and_opened_again_three_times(
    qtbot: QtBot, conformance_window: MainWindow, opener: Callable, streaming: bool
) -> None:
    window = conformance_window
    window.resize(SIZE)
    states.settle()
    name = opener.__name__ if hasattr(opener, "__name__") else "opener"
    shots = Shots(shots_folder() / f"reopen-{name}-{'streaming' if streaming else 'idle'}")
    walk = Walk(qtbot, window, shots, SIZE)
    if streaming:
        ask(qtbot, window, "Tell me a long story")
        assert window.controller.answer is not None
    open_, close = opener(window)
    for round_ in range(1, 4):
        root = open_()
        walk.look(f"open {round_}", root)
        close()
        deleted_later()
        walk.look(f"closed {round_}")
    if streaming:
        answer = window.controller.answer
        assert answer is not None, "the answer stopped while panels opened and closed"
        before = len(answer.text)
        qtbot.waitUntil(lambda: len(answer.text) > before, timeout=states.WAIT_MS)
    problems, _gone = known.sort_out(walk.problems, (SIZE.width(), SIZE.height()))
    assert not problems, "\n".join(problems)
