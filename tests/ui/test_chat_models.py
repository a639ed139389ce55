"""A chat remembers its model (issue 11, item 8); choosing a model that fails to load keeps
the one that works and says why (item 9). On the fake engine, with files standing for models."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.engine.types import EngineError
from app.ui.engine_session import api_model_id
from app.ui.main_window import MainWindow
from tests.helpers.fake_app import (
    WAIT_MS,
    FakeEngine,
    ask,
    fake_services,
    load_fake,
    model_file,
    show_window,
)
from tests.helpers.parallel_fake import ParallelFakeWorker

BROKEN = "This file is not a GGUF model (it does not start with 'GGUF'). Download it again."


FAKE_ENGINE = FakeEngine(max_tokens=40)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    return {name: model_file(tmp_path, f"{name}.gguf") for name in ("alpha", "beta", "broken")}


@pytest.fixture
def fake_worker(files: dict[str, str]) -> Iterator[ParallelFakeWorker]:
    worker = ParallelFakeWorker(failing={files["broken"]: EngineError(BROKEN)})
    load_fake(worker, files["alpha"])
    yield worker
    worker.shutdown()


def _answer(qtbot: QtBot, window: MainWindow, text: str) -> str:
    message_id = ask(qtbot, window, text)
    store = window.services.store
    qtbot.waitUntil(lambda: store.get_message(message_id).status != "streaming", timeout=WAIT_MS)
    return message_id


def _loaded_ids(fake_worker: ParallelFakeWorker) -> list[str]:
    return [m.model_id for m in fake_worker.loaded_models()]


def test_a_chat_remembers_its_model_and_opening_it_loads_it_again(
    qtbot: QtBot, window: MainWindow, fake_worker: ParallelFakeWorker, files: dict[str, str]
) -> None:
    engine, store, controller = window.services.engine, window.services.store, window.controller
    answer = _answer(qtbot, window, "Asked with alpha")
    alpha_chat = controller.conversation_id
    assert alpha_chat is not None
    assert store.get_conversation(alpha_chat).model == files["alpha"]
    assert store.get_message(answer).metadata["model_path"] == files["alpha"]

    window.new_chat()
    with qtbot.waitSignal(engine.model_loaded, timeout=WAIT_MS):
        window.header.picker.load(files["beta"])
    _answer(qtbot, window, "Asked with beta")
    beta_chat = controller.conversation_id
    assert beta_chat is not None
    assert store.get_conversation(beta_chat).model == files["beta"]
    assert store.get_conversation(alpha_chat).model == files["alpha"]  # untouched
    qtbot.waitUntil(lambda: _loaded_ids(fake_worker) == ["beta"], timeout=WAIT_MS)

    # Reopening the first chat picks its model again (and the chat settings show it).
    with qtbot.waitSignal(engine.model_loaded, timeout=WAIT_MS) as loaded:
        window.sidebar.conversation_selected.emit(alpha_chat)
    assert loaded.args[0].path == files["alpha"]
    assert window.panel.model_combo.currentData() == files["alpha"]
    qtbot.waitUntil(lambda: _loaded_ids(fake_worker) == ["alpha"], timeout=WAIT_MS)
    follow_up = _answer(qtbot, window, "Again")
    assert store.get_message(follow_up).metadata["model"] == "alpha"

    with qtbot.waitSignal(engine.model_loaded, timeout=WAIT_MS) as loaded:
        controller.open_conversation(beta_chat)
    assert loaded.args[0].path == files["beta"]


def test_a_model_that_fails_to_load_keeps_the_working_one_and_says_why(
    qtbot: QtBot, window: MainWindow, fake_worker: ParallelFakeWorker, files: dict[str, str]
) -> None:
    engine, controller = window.services.engine, window.controller
    _answer(qtbot, window, "Hello")
    chat = controller.conversation_id
    assert chat is not None
    with qtbot.waitSignal(engine.load_failed, timeout=WAIT_MS) as failed:
        window.header.picker.load(files["broken"])
    assert failed.args[0] == files["broken"]
    assert engine.loaded is not None and engine.loaded.path == files["alpha"]
    assert _loaded_ids(fake_worker) == [api_model_id(files["alpha"])]
    banner = window.chat.banner
    assert banner.isVisible() and banner.kind == "error"
    text = banner.text.text()
    assert "broken could not be loaded" in text and BROKEN in text and "Still using alpha" in text
    assert engine.state == "idle"
    # The chat keeps the model that works, and goes on answering with it.
    assert window.services.store.get_conversation(chat).model == files["alpha"]
    answer = _answer(qtbot, window, "Still there?")
    assert window.services.store.get_message(answer).status == "complete"


def test_a_chat_whose_model_cannot_load_says_why_in_the_answer(
    qtbot: QtBot, window: MainWindow, files: dict[str, str]
) -> None:
    store, controller = window.services.store, window.controller
    _answer(qtbot, window, "Hello")
    chat = controller.conversation_id
    assert chat is not None
    store.update_conversation_settings(chat, model=files["broken"])
    controller.open_conversation(chat)
    window.chat.composer.set_text("And now?")
    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS) as done:
        window.chat.composer.send_button.click()
    message = done.args[0]
    assert message.status == "error"
    assert "broken could not be loaded" in message.metadata["error"]
    assert BROKEN in message.metadata["error"]
    assert window.services.engine.loaded is not None
    assert window.services.engine.loaded.path == files["alpha"]


def test_switching_models_mid_answer_lets_the_answer_finish_then_frees_the_old_model(
    qtbot: QtBot, window: MainWindow, fake_worker: ParallelFakeWorker, files: dict[str, str]
) -> None:
    engine, controller = window.services.engine, window.controller
    fake_worker.tokens_per_second = 100
    window.services.settings.set("sampling.max_tokens", 20_000)
    window.new_chat()
    message_id = ask(qtbot, window, "A long one, please")
    with qtbot.waitSignal(engine.model_loaded, timeout=WAIT_MS):
        window.header.picker.load(files["beta"])
    # Both are loaded while the answer is still being written with the first one.
    assert sorted(_loaded_ids(fake_worker)) == ["alpha", "beta"]
    answer = controller.answer
    assert answer is not None and answer.message_id == message_id
    tokens = answer.tokens
    qtbot.waitUntil(lambda: answer.tokens > tokens, timeout=WAIT_MS)
    controller.stop()
    qtbot.waitUntil(lambda: _loaded_ids(fake_worker) == ["beta"], timeout=WAIT_MS)
    saved = window.services.store.get_message(message_id)
    assert saved.status == "stopped" and saved.metadata["model"] == "alpha"
    assert saved.content.startswith("Sure.")


def test_at_start_up_the_open_chat_loads_its_own_model_not_the_last_one(
    qtbot: QtBot, ember_app: QApplication, files: dict[str, str]
) -> None:
    from app.ui.app import _FileOpenFilter, _start_up_steps

    worker = ParallelFakeWorker()  # nothing loaded: Ember is starting
    services = fake_services(worker, max_tokens=40)
    try:
        chat = services.store.create_conversation("Beta chat", model=files["beta"])
        services.settings.set("ui.last_conversation", chat.id)
        services.settings.set("ui.last_model", files["alpha"])
        window = show_window(qtbot, services)
        assert window.controller.conversation_id == chat.id
        with qtbot.waitSignal(services.engine.model_loaded, timeout=WAIT_MS) as loaded:
            _start_up_steps(window, services, _FileOpenFilter(ember_app, listen=False), [])()
            window.close()  # only the first step (loading) is wanted here
        assert loaded.args[0].path == files["beta"]
        assert [m.path for m in worker.loaded_models()] == [files["beta"]]
    finally:
        services.close()
        worker.shutdown()


def test_a_model_the_estimate_refuses_can_be_loaded_anyway(
    qtbot: QtBot, tmp_path: Path, ember_app: QApplication
) -> None:
    """The banner offers Load anyway (the CLI's --force, the API's "force": true)."""
    from PySide6.QtWidgets import QPushButton

    from app.engine.types import FORCE_HINT, ModelTooLargeError

    big = model_file(tmp_path, "big.gguf")
    refusal = ModelTooLargeError(
        f"Not enough memory to load this model: it needs at least 9.0 GB, 4.0 GB is free. "
        f"Close other programs. {FORCE_HINT}",
        None,
        9 * 10**9,
        4 * 10**9,
    )
    worker = ParallelFakeWorker(failing={big: refusal})
    services = fake_services(worker, max_tokens=4)
    window = show_window(qtbot, services)
    try:
        engine = window.services.engine
        with qtbot.waitSignal(engine.load_failed, timeout=WAIT_MS):
            window.header.picker.load(big)
        banner = window.chat.banner
        text = banner.text.text()
        assert "big could not be loaded. Not enough memory" in text
        assert FORCE_HINT not in text  # the button says it here
        buttons = {b.text(): b for b in banner.findChildren(QPushButton)}
        assert "Load anyway" in buttons
        with qtbot.waitSignal(engine.model_loaded, timeout=WAIT_MS) as loaded:
            buttons["Load anyway"].click()
        assert loaded.args[0].path == big and loaded.args[0].params.force
        # the refusal is gone (a base model's notice may take its place: no chat template)
        assert not banner.isVisible() or "could not be loaded" not in banner.text.text()
    finally:
        window.close()
        services.close()
        worker.shutdown()
