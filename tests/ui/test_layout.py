"""Narrow and normal windows: a minimum size, the sidebar folding away and coming back, a chat
title that stays readable, and a Server page laid out so nothing is cut off. No model is
loaded here."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from PySide6.QtCore import QSize
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QApplication

from app.engine.worker import EngineWorker
from app.server.requestlog import RequestRecord
from app.ui.main_window import MIN_SIZE, SIDEBAR_COLLAPSE_WIDTH, MainWindow
from app.ui.nav_rail import CHATS, SERVER

TITLE = "Capital cities of Europe and their rivers"


@pytest.fixture
def engine_worker() -> Iterator[EngineWorker]:
    """No model: these tests only look at the window."""
    worker = EngineWorker()
    yield worker
    worker.shutdown()


def settle(window: MainWindow, width: int, height: int = 700) -> None:
    window.resize(width, height)
    QApplication.processEvents()
    QApplication.processEvents()


def test_the_window_has_a_minimum_size(window: MainWindow) -> None:
    pages = (window.models_pane, window.server_pane)  # every page built, as after start-up
    assert all(page.minimumSizeHint().width() <= MIN_SIZE[0] - 68 for page in pages)
    settle(window, SIDEBAR_COLLAPSE_WIDTH - 100, 200)  # dragged narrower: the sidebar folds
    settle(window, 300, 200)
    assert window.width() == MIN_SIZE[0] and window.height() == MIN_SIZE[1]
    assert window.minimumSize() == QSize(*MIN_SIZE)


def test_the_sidebar_collapses_when_narrow_and_comes_back(window: MainWindow) -> None:
    settle(window, 1280)
    assert window.sidebar.isVisible()
    settle(window, SIDEBAR_COLLAPSE_WIDTH - 40)
    assert not window.sidebar.isVisible()
    assert window.services.settings.get("ui.sidebar_visible")  # not the user's choice
    settle(window, 1280)
    assert window.sidebar.isVisible()

    window.toggle_sidebar()  # the user hides it: it stays hidden when wide again
    settle(window, SIDEBAR_COLLAPSE_WIDTH - 40)
    settle(window, 1280)
    assert not window.sidebar.isVisible()

    window.toggle_sidebar()
    settle(window, SIDEBAR_COLLAPSE_WIDTH - 40)
    assert not window.sidebar.isVisible()
    window.toggle_sidebar()  # asked for while narrow: shown, and the chat keeps its room
    assert window.sidebar.isVisible()
    assert window.width() >= window.minimumWidth()
    center = window.splitter.widget(1)
    assert center is not None and center.width() >= center.minimumSizeHint().width()
    settle(window, 1280)
    settle(window, SIDEBAR_COLLAPSE_WIDTH - 40)
    assert window.sidebar.isVisible()  # the user keeps it in narrow windows too


def visible_title_chars(window: MainWindow) -> int:
    text = window.header.title.text()
    return len(text.removesuffix("…"))


@pytest.mark.parametrize("panel", [False, True], ids=["chat", "with chat settings"])
def test_the_chat_title_stays_readable_at_the_smallest_size(
    window: MainWindow, panel: bool
) -> None:
    conversation = window.services.store.create_conversation(TITLE)
    window.controller.open_conversation(conversation.id)
    window.header.settings_button.setChecked(panel)
    settle(window, *MIN_SIZE)
    assert window.size() == QSize(*MIN_SIZE)  # opening a side pane never grows the window
    if panel:  # no room for the chat beside its settings: they take its place until closed
        center = window.splitter.widget(1)
        assert center is not None and not center.isVisible() and window.panel.isVisible()
        window.panel.close_requested.emit()
        QApplication.processEvents()
        assert center.isVisible() and not window.panel.isVisible()
    assert visible_title_chars(window) >= 12, window.header.title.text()
    header = window.header
    picker = header.picker.geometry()
    assert header.title.geometry().right() < picker.left()  # nothing overlaps
    assert picker.right() < header.settings_button.geometry().left()


def test_the_model_picker_is_centred_when_there_is_room(window: MainWindow) -> None:
    conversation = window.services.store.create_conversation("Capital cities")
    window.controller.open_conversation(conversation.id)
    settle(window, 1400)
    header = window.header
    centre = header.picker.geometry().center().x()
    assert abs(centre - header.width() / 2) <= 2
    assert header.title.text() == "Capital cities"


# -- the Server page ----------------------------------------------------------------------


def record(n: int) -> RequestRecord:
    return RequestRecord(
        n, time.time(), "POST", "/v1/chat/completions", 200, 12.34, "Qwen2.5-Coder-7B-Q4_K_M",
        12345, 23456, True, "127.0.0.1", "{}", "{}", None,
    )  # fmt: skip


def server_page(window: MainWindow, width: int) -> None:
    window.show_page(SERVER)
    settle(window, width, 800)


@pytest.mark.parametrize("width", [1280, 760])
def test_the_snippets_show_whole_lines(window: MainWindow, width: int) -> None:
    server_page(window, width)
    view = window.server_pane.snippets
    view.set_context("http://127.0.0.1:8434/v1", "Qwen2.5-Coder-7B-Instruct-Q4_K_M", "", False)
    for name in ("curl", "Python", "Continue"):
        view.select(name)
        QApplication.processEvents()
        assert view.code.horizontalScrollBar().maximum() == 0, (name, width)
        assert view.code.verticalScrollBar().maximum() == 0, (name, width)


def test_the_request_log_columns_fit_their_text(window: MainWindow) -> None:
    server_page(window, 1280)
    panel = window.server_pane.log_panel
    for n in range(3):
        panel.add_record(record(n))
    QApplication.processEvents()
    table = panel.table
    header = table.horizontalHeader()
    for column in (0, 1, 4, 5, 6):
        needed = max(table.sizeHintForColumn(column), header.sectionSizeHint(column))
        assert table.columnWidth(column) >= needed, (column, table.columnWidth(column), needed)


def test_the_snippet_tabs_never_clip_their_bold_label(window: MainWindow) -> None:
    server_page(window, 1280)
    view = window.server_pane.snippets
    for name, tab in view.tabs.items():
        view.select(name)
        QApplication.processEvents()
        bold = QFont(tab.font())
        bold.setWeight(QFont.Weight.DemiBold)
        needed = QFontMetrics(bold).horizontalAdvance(tab.text()) + 2 * 10
        assert tab.width() >= needed, (name, tab.width(), needed)


def test_a_narrow_server_page_stacks_its_columns(window: MainWindow) -> None:
    server_page(window, 760)
    pane = window.server_pane
    log = pane.log_card
    assert log.isVisible() and log.width() >= pane.left_scroll.viewport().width() - 40
    server_page(window, 1280)
    assert log.geometry().left() > pane.left_scroll.geometry().right()  # side by side
    window.show_page(CHATS)


def test_showing_the_sidebar_at_the_minimum_size_keeps_the_window_size(window: MainWindow) -> None:
    """Issue 23 finding 5: at 640 wide, showing the sidebar grew the window to 771."""
    settle(window, *MIN_SIZE)
    assert not window.sidebar.isVisible()
    window.toggle_sidebar()
    QApplication.processEvents()
    assert window.sidebar.isVisible()
    assert window.size() == QSize(*MIN_SIZE)
    center = window.splitter.widget(1)
    assert center is not None and not center.isVisible()  # no room: the list takes its place
    conversation = window.services.store.create_conversation("Rivers")
    window.sidebar.conversation_selected.emit(conversation.id)  # picking a chat shows it
    QApplication.processEvents()
    assert center.isVisible() and not window.sidebar.isVisible()
    assert window.size() == QSize(*MIN_SIZE)


def test_the_sidebar_gives_way_to_chat_settings_and_comes_back(window: MainWindow) -> None:
    settle(window, 942, 588)
    assert window.sidebar.isVisible()
    center = window.splitter.widget(1)
    assert center is not None
    window.header.settings_button.setChecked(True)
    QApplication.processEvents()
    assert window.width() == 942
    assert window.panel.isVisible() and center.isVisible() and not window.sidebar.isVisible()
    assert center.width() >= center.minimumSizeHint().width()
    window.header.settings_button.setChecked(False)
    QApplication.processEvents()
    assert window.sidebar.isVisible() and center.isVisible()
    window.header.settings_button.setChecked(True)
    window.toggle_sidebar()  # asked for: the chat settings, with no room beside it, close
    QApplication.processEvents()
    assert window.sidebar.isVisible() and not window.panel.isVisible() and center.isVisible()
