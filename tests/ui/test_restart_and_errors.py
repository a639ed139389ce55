"""Restarting finds everything; errors are readable messages, never a dead window."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.ui.errors import ErrorReporter, setup_file_logging
from app.ui.main_window import MainWindow
from app.ui.services import create_services
from tests.helpers.window import send


def test_restart_restores_conversation_and_layout(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    first = make_window()
    answer = send(qtbot, first, "Hello there.")
    first.resize(760, 540)
    qtbot.waitUntil(lambda: first.splitter.width() == 760 - first.rail.width())
    assert not first.sidebar.isVisible()  # folded away in a narrow window
    first.toggle_sidebar()  # wanted there too: remembered
    first.splitter.setSizes([240, 452, 0])
    assert first.splitter.sizes()[0] == 240
    first.close()

    second = make_window()
    assert second.controller.conversation_id == answer.conversation_id
    assert [m.id for m in second.controller.branch][-1] == answer.id
    assert second.chat.view.widget_for(answer.id) is not None
    assert second.sidebar.list.conversation_ids() == [answer.conversation_id]
    assert (second.width(), second.height()) == (760, 540)
    qtbot.waitUntil(lambda: second.splitter.sizes()[0] == 240)


def test_interrupted_answer_is_recovered_as_stopped(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window = make_window()
    store = window.services.store
    conversation = store.create_conversation("Crashed")
    store.add_message(conversation.id, "user", "Tell me a story")
    streaming = store.begin_streaming_message(conversation.id)
    store.append_to_message(streaming.id, "Once upon a time")
    window.close()
    window.services.settings.set("ui.last_conversation", conversation.id)
    window.services.close()  # as if the process had died with the answer half written

    again = make_window()
    recovered = again.services.store.get_message(streaming.id)
    assert recovered.status == "stopped" and recovered.metadata["interrupted"] is True
    shown = again.chat.view.widget_for(streaming.id)
    assert shown is not None and "interrupted" in shown.status_label.text()


@pytest.fixture
def modelless_window(
    qtbot: QtBot, ember_app: QApplication, ember_home: Path
) -> Iterator[MainWindow]:
    """A window with its own engine worker and no model loaded."""
    services = create_services()
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    yield window
    window.close()
    services.close()


def test_sending_without_a_model_says_what_to_do(
    qtbot: QtBot, modelless_window: MainWindow
) -> None:
    window = modelless_window
    assert window.chat.empty.mode == "welcome"
    window.chat.composer.set_text("hello?")
    window.chat.composer.send_button.click()
    assert window.chat.banner.isVisible()
    assert "No model is loaded" in window.chat.banner.text.text()
    assert window.chat.composer.text == "hello?"  # nothing lost
    assert window.services.store.list_conversations() == []


def test_a_bad_model_file_shows_a_message_and_the_window_stays_usable(
    qtbot: QtBot, modelless_window: MainWindow, tmp_path: Path
) -> None:
    window = modelless_window
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"this is not a model" * 100)
    with qtbot.waitSignal(window.services.engine.load_failed, timeout=30_000):
        window.header.picker.load(str(bad))
    assert window.chat.banner.isVisible()
    assert window.chat.banner.kind == "error"
    assert "broken could not be loaded" in window.chat.banner.text.text()
    assert window.services.engine.loaded is None
    assert window.services.engine.state == "idle"
    assert window.header.picker.name_label.text() == "Select a model to load"
    window.new_chat()  # still responsive
    assert window.chat.empty.mode == "welcome"


def test_unexpected_errors_are_logged_and_shown_once(
    qtbot: QtBot, ember_app: QApplication, ember_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_file = setup_file_logging()
    shown: list[str] = []
    reporter = ErrorReporter()
    monkeypatch.setattr(reporter, "show_dialog", lambda summary, details: shown.append(summary))
    reporter.install()
    try:

        def boom() -> None:
            raise RuntimeError("worker exploded")

        with qtbot.waitSignals([reporter.error_reported, reporter.error_reported]):
            thread = threading.Thread(target=boom, name="boom")
            thread.start()
            thread.join()
            try:
                raise ValueError("slot exploded")
            except ValueError as error:
                reporter.report((ValueError, error, error.__traceback__), "test")
    finally:
        reporter.uninstall()
    assert shown == ["RuntimeError: worker exploded"]
    assert reporter.count == 2
    text = log_file.read_text()
    assert "worker exploded" in text and "slot exploded" in text and "Traceback" in text
