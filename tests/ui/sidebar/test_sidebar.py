"""The sidebar: day sections, rename, delete with undo, search, export and import."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from app.ui.sidebar import transfer
from app.ui.sidebar.conversation_list import HEADER, KIND_ROLE
from app.ui.toast import Toast


def _make_conversations(window: MainWindow, titles: list[str]) -> list[str]:
    store = window.services.store
    ids = []
    for title in titles:
        conversation = store.create_conversation(title)
        store.add_message(conversation.id, "user", f"message about {title.lower()}")
        ids.append(conversation.id)
    window.sidebar.refresh()
    return ids


def test_newest_first_with_day_sections(window: MainWindow) -> None:
    ids = _make_conversations(window, ["Old", "Middle", "New"])
    assert window.sidebar.list.conversation_ids() == list(reversed(ids))
    first = window.sidebar.list.item(0)
    assert first.data(KIND_ROLE) == HEADER and first.text() == "Today"


def test_selecting_opens_the_conversation(qtbot: QtBot, window: MainWindow) -> None:
    ids = _make_conversations(window, ["Alpha", "Beta"])
    item = window.sidebar.list.item_for(ids[0])
    assert item is not None
    window.sidebar.list.setCurrentItem(item)
    assert window.controller.conversation_id == ids[0]
    assert window.header.title.full_text == "Alpha"
    assert [m.content for m in window.controller.branch] == ["message about alpha"]


def test_rename(window: MainWindow) -> None:
    (conversation_id,) = _make_conversations(window, ["Before"])
    window.controller.open_conversation(conversation_id)
    assert window.sidebar.apply_rename(conversation_id, "  After  ")
    assert window.services.store.get_conversation(conversation_id).title == "After"
    assert window.header.title.full_text == "After"
    assert not window.sidebar.apply_rename(conversation_id, "   ")


def test_delete_and_undo(qtbot: QtBot, window: MainWindow) -> None:
    keep, gone = _make_conversations(window, ["Keep", "Gone"])
    window.controller.open_conversation(gone)
    window.sidebar.delete(gone)
    assert window.sidebar.list.conversation_ids() == [keep]
    assert window.controller.conversation_id is None  # the open chat went away
    toast = window.findChild(Toast, "Toast")
    assert toast is not None and toast.isVisible()
    assert "deleted" in toast.label.text()
    toast.action_button.click()
    assert set(window.sidebar.list.conversation_ids()) == {keep, gone}
    assert window.controller.conversation_id == gone
    assert not toast.isVisible()


def test_delete_key_deletes_the_selected_chat(qtbot: QtBot, window: MainWindow) -> None:
    keep, gone = _make_conversations(window, ["Keep", "Gone"])
    item = window.sidebar.list.item_for(gone)
    assert item is not None
    window.sidebar.list.setCurrentItem(item)
    window.sidebar.list.setFocus()
    qtbot.keyClick(window.sidebar.list, Qt.Key.Key_Delete)
    assert window.sidebar.list.conversation_ids() == [keep]


def test_search_titles_and_text(qtbot: QtBot, window: MainWindow) -> None:
    ids = _make_conversations(window, ["Pasta recipes", "Rust lifetimes", "Garden plans"])
    window.services.store.add_message(ids[2], "assistant", "Tomatoes like full sun.")
    qtbot.keyClick(window, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier)
    assert window.sidebar.search.hasFocus()
    qtbot.keyClicks(window.sidebar.search, "tomatoes")
    qtbot.waitUntil(lambda: window.sidebar.list.conversation_ids() == [ids[2]])
    qtbot.keyClicks(window.sidebar.search, "\b" * 8 + "rust")
    qtbot.waitUntil(lambda: window.sidebar.list.conversation_ids() == [ids[1]])
    qtbot.keyClick(window.sidebar.search, Qt.Key.Key_Return)
    assert window.controller.conversation_id == ids[1]
    window.sidebar.search.clear()
    qtbot.waitUntil(lambda: len(window.sidebar.list.conversation_ids()) == 3)


def test_export_and_import_round_trip(window: MainWindow, tmp_path: Path) -> None:
    (conversation_id,) = _make_conversations(window, ["Round trip"])
    store = window.services.store
    store.add_message(conversation_id, "assistant", "```python\nprint('hi')\n```")
    json_path = tmp_path / "chat.json"
    md_path = tmp_path / "chat.md"
    transfer.write_export(store, conversation_id, json_path, "json")
    transfer.write_export(store, conversation_id, md_path, "markdown")
    assert "# Round trip" in md_path.read_text()
    assert json.loads(json_path.read_text())["format"] == "ember.conversation"
    imported = transfer.read_import(store, json_path)
    assert imported.id != conversation_id and imported.title == "Round trip"
    original = [(m.role, m.content) for m in store.active_branch(conversation_id)]
    copy = [(m.role, m.content) for m in store.active_branch(imported.id)]
    assert copy == original


def test_import_rejects_a_file_that_is_not_an_export(window: MainWindow, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    try:
        transfer.read_import(window.services.store, bad)
    except ValueError as error:
        assert "Ember conversation" in str(error)
    else:
        raise AssertionError("expected a ValueError")
