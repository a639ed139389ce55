"""Window-level actions a person uses more than once: Settings opened again after it was
closed, and Quit (Ctrl+Q; Cmd+Q on macOS) closing the window as its close button does."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from tests.helpers.window import settings_by_shortcut


def _delete_closed_widgets() -> None:
    """What the event loop does a moment after a dialog with WA_DeleteOnClose is closed."""
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def test_settings_opens_again_after_it_was_closed(qtbot: QtBot, window: MainWindow) -> None:
    for _ in range(3):
        settings_by_shortcut(qtbot, window).reject()
        _delete_closed_widgets()  # before the fix: the next open raised "already deleted"
        assert window.settings_dialog is None
    window.open_providers()  # opens Settings on a page, the same way
    assert window.settings_dialog is not None and window.settings_dialog.isVisible()
    window.settings_dialog.reject()


def test_ctrl_q_and_the_quit_item_close_the_window(qtbot: QtBot, window: MainWindow) -> None:
    saved: list[bool] = []
    window.services.settings.set("ui.last_conversation", "")
    original = window.save_state

    def save_state() -> None:
        saved.append(True)
        original()

    window.save_state = save_state  # type: ignore[method-assign]
    qtbot.keyClick(window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    assert not window.isVisible() and saved == [True]  # closed the normal way, state saved

    window.show()
    qtbot.waitExposed(window)
    menu = window.header.more_menu
    menu.aboutToShow.emit()
    quits = [a for a in menu.actions() if a.text() == "Quit Ember"]
    assert quits and quits[0].shortcut().toString() == "Ctrl+Q"
    quits[0].trigger()
    assert not window.isVisible() and saved == [True, True]
