"""Remote providers in the GUI, against the real llama-cpp-python server on 127.0.0.1.

Settings → Providers adds one (with "Test connection"), the model picker lists its models under
its name, and chatting with one streams, stops, is saved with the ``provider::model`` id, is
selected again when the chat reopens, and fails with clear messages (a wrong key, a server that
dies mid-answer) without losing what was saved.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QMessageBox, QScrollArea
from pytestqt.qtbot import QtBot

from app.engine.providers import ProviderRegistry, make_provider
from app.ui.main_window import MainWindow
from app.ui.settings.providers_page import ProvidersPage
from tests.helpers.llama_server import MODEL_ALIAS, LlamaServer, running_llama_server
from tests.helpers.window import ANSWER_TIMEOUT, LONG_PROMPT, send, set_max_tokens, type_and_send

pytestmark = pytest.mark.usefixtures("no_keyring")  # keys never reach the machine's keyring

KEY = "sk-ember-test"
WAIT = 20_000
REMOTE_ID = f"local::{MODEL_ALIAS}"


@pytest.fixture(scope="module")
def keyed_server(gemma_path: Path) -> Iterator[LlamaServer]:
    """One server (with an API key) for every test that does not kill it."""
    with running_llama_server(gemma_path, api_key=KEY) as server:
        yield server


def add_provider(window: MainWindow, name: str, url: str, key: str | None) -> None:
    window.services.providers.add(make_provider(name, url, "llama-server"), key)


def menu_actions(menu: QMenu) -> list[QAction]:
    found: list[QAction] = []
    for action in menu.actions():
        found.append(action)
        submenu = action.menu()
        if isinstance(submenu, QMenu):
            found += menu_actions(submenu)
    return found


def action_with_data(menu: QMenu, data: str) -> QAction | None:
    return next((a for a in menu_actions(menu) if a.data() == data), None)


def pick_remote(qtbot: QtBot, window: MainWindow, remote_id: str) -> None:
    """Open the model menu, wait for the provider's answer, choose the model."""
    picker = window.header.picker
    picker.open_menu()
    qtbot.waitUntil(lambda: action_with_data(picker.menu, remote_id) is not None, timeout=WAIT)
    action = action_with_data(picker.menu, remote_id)
    assert action is not None
    action.trigger()
    picker.menu.close()


# ---- Settings → Providers ----------------------------------------------------------------------


def test_add_a_provider_in_settings_test_it_and_pick_its_model(
    qtbot: QtBot, window: MainWindow, keyed_server: LlamaServer
) -> None:
    window.open_settings()
    dialog = window.settings_dialog
    assert dialog is not None
    dialog.show_page("Providers")
    page = dialog.providers_page
    shown = dialog.pages.currentWidget()
    assert isinstance(shown, QScrollArea) and shown.widget() is page
    qtbot.waitUntil(lambda: page.loaded)
    assert page.empty.isVisible() and not page.rows
    assert "only your user account can read" in page.note.text()  # no keyring here
    # The short list does not scroll: the page is as tall as what it shows, not as the editor.
    qtbot.waitUntil(lambda: shown.verticalScrollBar().maximum() == 0)

    qtbot.mouseClick(page.add_button, Qt.MouseButton.LeftButton)
    editor = page.editor
    assert page.stack.currentWidget() is editor
    assert editor.isVisible() and not page.list_view.isVisible()
    editor.preset.setCurrentIndex(editor.preset.findData("llama-server"))
    assert editor.url.text() == "http://localhost:8080/v1"  # the preset's usual URL
    assert editor.name.text() == "llama-server"
    editor.name.setText("local")
    editor.url.setText(keyed_server.root_url)

    # A wrong key: the test says so clearly.
    editor.key.setText("sk-wrong")
    qtbot.mouseClick(editor.test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: editor.result.property("kind") == "error", timeout=WAIT)
    assert "rejected the API key" in editor.result.text()
    assert "401" in editor.result.text()

    editor.key.setText(KEY)
    qtbot.mouseClick(editor.test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: editor.result.property("kind") == "ok", timeout=WAIT)
    assert MODEL_ALIAS in editor.result.text() and "1 model" in editor.result.text()

    with qtbot.waitSignal(page.providers_changed, timeout=WAIT):
        qtbot.mouseClick(editor.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: page.row("local") is not None, timeout=WAIT)
    assert page.stack.currentWidget() is page.list_view
    row = page.row("local")
    assert row is not None and keyed_server.base_url in row.detail_label.text()
    assert "key in file" in row.detail_label.text()
    provider = window.services.providers.get("local")
    assert provider.base_url == keyed_server.base_url and provider.key_ref == "file"
    secrets = window.services.providers.path.parent / "secrets.json"
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert KEY not in window.services.providers.path.read_text()  # never in providers.json
    dialog.close()

    # The picker lists the model under the provider's name, after the local models.
    picker = window.header.picker
    picker.open_menu()
    qtbot.waitUntil(lambda: action_with_data(picker.menu, REMOTE_ID) is not None, timeout=WAIT)
    texts = [a.text() for a in picker.menu.actions()]
    local_header = 0
    assert texts[0] in ("Models on this computer", "No models found")
    provider_header = next(i for i, t in enumerate(texts) if t.startswith("local\t"))
    model = [a.data() for a in picker.menu.actions()].index(REMOTE_ID)
    assert local_header < provider_header < model
    assert not picker.menu.actions()[provider_header].isEnabled()  # a heading, not an item
    assert picker.menu.actions()[model].text() == MODEL_ALIAS

    loaded_before = window.services.engine.loaded
    action = action_with_data(picker.menu, REMOTE_ID)
    assert action is not None
    action.trigger()
    picker.menu.close()
    assert window.services.engine.remote_model == REMOTE_ID
    assert picker.name_label.text() == MODEL_ALIAS and picker.detail_label.text() == "local"
    assert window.chat.empty.mode == "ready"
    assert window.status.state_label.text() == f"Idle · {MODEL_ALIAS} on local"
    # Choosing a remote model leaves the local one loaded.
    assert window.services.engine.loaded is loaded_before is not None
    assert window.services.engine.worker.loaded_models()


# ---- chatting ------------------------------------------------------------------------------------


def test_chat_with_a_remote_model_streams_and_saves_its_id(
    qtbot: QtBot, window: MainWindow, keyed_server: LlamaServer
) -> None:
    add_provider(window, "local", keyed_server.base_url, KEY)
    pick_remote(qtbot, window, REMOTE_ID)
    requests_before = keyed_server.log_count("POST /v1/chat/completions")
    with qtbot.waitSignal(window.controller.stream_text, timeout=ANSWER_TIMEOUT):
        type_and_send(window, "What is the capital of France?")
    assert window.chat.composer.busy
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT) as done:
        pass
    answer = done.args[0]
    saved = window.services.store.get_message(answer.id)
    assert saved.status == "complete" and saved.content.strip()
    assert saved.metadata["model"] == REMOTE_ID
    assert saved.metadata["tokens"] > 0  # llama_cpp.server streams no usage: counted here
    conversation = window.services.store.get_conversation(answer.conversation_id)
    assert conversation.model == REMOTE_ID
    assert keyed_server.log_count("POST /v1/chat/completions") == requests_before + 1
    shown = window.chat.view.widget_for(answer.id)
    assert shown is not None and shown.body is not None
    body = shown.body  # a streamed burst reaches the screen a turn or two after the end
    qtbot.waitUntil(lambda: body.text == saved.content, timeout=ANSWER_TIMEOUT)
    # The provider does not say how long its context is: tokens used, no total, no bar.
    meter = window.chat.composer.meter
    assert meter.label.text().endswith(" tokens") and "/" not in meter.label.text()
    assert meter.used > saved.metadata["tokens"]
    assert not meter._bar.isVisible()


def test_stop_mid_stream_keeps_a_stopped_remote_answer(
    qtbot: QtBot, window: MainWindow, keyed_server: LlamaServer
) -> None:
    add_provider(window, "local", keyed_server.base_url, KEY)
    pick_remote(qtbot, window, REMOTE_ID)
    set_max_tokens(window, 400)
    with qtbot.waitSignal(window.controller.stream_text, timeout=ANSWER_TIMEOUT):
        type_and_send(window, LONG_PROMPT)
    assert window.services.engine.state == "generating"
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT) as done:
        qtbot.keyClick(window, Qt.Key.Key_Escape)
    stopped = done.args[0]
    assert stopped.status == "stopped" and stopped.content
    saved = window.services.store.get_message(stopped.id)
    assert saved.status == "stopped" and saved.content == stopped.content
    assert saved.metadata["model"] == REMOTE_ID
    assert not window.chat.composer.busy
    qtbot.waitUntil(lambda: window.services.engine.state == "idle")


def test_reopening_the_chat_selects_its_remote_model_again(
    qtbot: QtBot, make_window: Callable[[], MainWindow], keyed_server: LlamaServer
) -> None:
    first = make_window()
    add_provider(first, "local", keyed_server.base_url, KEY)
    pick_remote(qtbot, first, REMOTE_ID)
    answer = send(qtbot, first, "Hello there.")
    assert answer.status == "complete"
    first.close()

    second = make_window()
    assert second.controller.conversation_id == answer.conversation_id
    assert second.services.engine.remote_model == REMOTE_ID
    assert second.header.picker.name_label.text() == MODEL_ALIAS
    assert second.panel.model_combo.currentData() == REMOTE_ID
    again = send(qtbot, second, "And once more.")
    assert again.metadata["model"] == REMOTE_ID and again.status == "complete"

    # A chat with the local model goes back to it; the remote chat brings the remote back.
    store = second.services.store
    local_chat = store.create_conversation("Local chat")
    second.controller.open_conversation(local_chat.id)
    assert second.services.engine.remote_model is None
    assert second.header.picker.detail_label.text().endswith("ctx")  # the loaded model
    second.controller.open_conversation(answer.conversation_id)
    assert second.services.engine.remote_model == REMOTE_ID
    # Picking the local model in the picker makes it this chat's model again.
    loaded = second.services.engine.loaded
    assert loaded is not None
    second.header.picker.load(loaded.path)
    assert second.services.engine.remote_model is None
    assert store.get_conversation(answer.conversation_id).model is None
    assert second.services.engine.loading_path is None  # it was loaded: no reload


def test_a_wrong_key_shows_the_clear_401_message(
    qtbot: QtBot, window: MainWindow, keyed_server: LlamaServer
) -> None:
    add_provider(window, "wrong", keyed_server.base_url, "sk-not-the-key")
    picker = window.header.picker
    picker.open_menu()
    catalog = window.services.engine.remote_catalog
    assert catalog is not None
    qtbot.waitUntil(
        lambda: (e := catalog.entry("wrong")) is not None and e.status == "error", timeout=WAIT
    )
    notes = [a.text().strip() for a in picker.menu.actions() if not a.isEnabled()]
    assert "API key rejected" in notes  # the provider shows as failing, with why
    picker.menu.close()

    window.services.engine.select_remote(f"wrong::{MODEL_ALIAS}")
    answer = send(qtbot, window, "Hello?")
    assert answer.status == "error"
    error = answer.metadata["error"]
    assert "rejected the API key" in error and "HTTP 401" in error and "wrong" in error
    shown = window.chat.view.widget_for(answer.id)
    assert shown is not None and shown.status_label.text() == error
    assert not window.chat.composer.busy


def test_a_server_killed_mid_stream_gives_a_clear_error_and_keeps_the_chat(
    qtbot: QtBot, window: MainWindow, gemma_path: Path
) -> None:
    with running_llama_server(gemma_path) as server:
        add_provider(window, "doomed", server.base_url, None)
        pick_remote(qtbot, window, f"doomed::{MODEL_ALIAS}")
        first = send(qtbot, window, "Say hello.")
        assert first.status == "complete"
        set_max_tokens(window, 400)
        with qtbot.waitSignal(window.controller.stream_text, timeout=ANSWER_TIMEOUT):
            type_and_send(window, LONG_PROMPT)
        with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT) as done:
            server.kill()
    failed = done.args[0]
    assert failed.status == "error"
    assert "lost mid-answer" in failed.metadata["error"]
    assert "the text so far is kept" in failed.metadata["error"]
    store = window.services.store
    branch = store.active_branch(failed.conversation_id)
    assert [m.role for m in branch] == ["user", "assistant", "user", "assistant"]
    assert branch[1].id == first.id and branch[1].content == first.content
    assert branch[1].status == "complete"
    assert branch[3].content and branch[3].content == failed.content  # the partial answer
    assert not window.chat.composer.busy
    # The provider now shows as down in the picker, without holding up the menu.
    picker = window.header.picker
    picker.refresh_remote()
    picker.open_menu()
    assert picker.menu.isVisible()  # at once, with what is known (the cached list)
    catalog = window.services.engine.remote_catalog
    assert catalog is not None
    qtbot.waitUntil(
        lambda: (e := catalog.entry("doomed")) is not None and e.status == "error", timeout=WAIT
    )
    entry = catalog.entry("doomed")
    assert entry is not None and entry.problem == "Can't reach the server"
    # The open menu was rebuilt: the model is gone, the reason is there.
    assert action_with_data(picker.menu, f"doomed::{MODEL_ALIAS}") is None
    note = next(a for a in picker.menu.actions() if a.text().strip() == entry.problem)
    assert not note.isEnabled() and "is the server running" in note.toolTip()
    picker.menu.close()


# ---- removing ------------------------------------------------------------------------------------


def test_remove_asks_first_and_forgets_the_key(qtbot: QtBot, ember_home: Path) -> None:
    registry = ProviderRegistry()
    registry.add(make_provider("gpu-box", "http://10.0.0.5:8000", "vllm"), "sk-secret")
    page = ProvidersPage(registry)
    qtbot.addWidget(page)
    page.show()
    qtbot.waitUntil(lambda: page.row("gpu-box") is not None)
    row = page.row("gpu-box")
    assert row is not None and "vLLM" in row.detail_label.text()

    qtbot.mouseClick(row.remove_button, Qt.MouseButton.LeftButton)
    box = page.confirm_box
    assert box is not None and box.isVisible() and "gpu-box" in box.text()
    cancel = box.button(QMessageBox.StandardButton.Cancel)
    assert cancel is not None
    cancel.click()
    assert registry.find("gpu-box") is not None

    qtbot.mouseClick(row.remove_button, Qt.MouseButton.LeftButton)
    box = page.confirm_box
    assert box is not None
    remove = next(b for b in box.buttons() if b.text() == "Remove")
    with qtbot.waitSignal(page.providers_changed, timeout=WAIT):
        remove.click()
    qtbot.waitUntil(lambda: not page.rows and page.empty.isVisible())
    assert registry.list() == []
    secrets = json.loads((ember_home / "secrets.json").read_text())
    assert "gpu-box" not in secrets["providers"]
