"""Nothing typed or written is lost (issue 11, item 14): the unsent text of each chat is kept
as it is typed, and an answer cut short keeps the stats of what it had produced."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.chats.store import ChatStore
from app.config import Settings, paths
from app.ui.chat.chat_record import DRAFT, PARTIAL_STATS
from app.ui.chat.conversation import ConversationController
from app.ui.chat.drafts import NEW_CHAT_DRAFT
from app.ui.engine_session import EngineSession
from app.ui.main_window import MainWindow
from app.ui.services import Services
from tests.helpers.fake_app import WAIT_MS, FakeEngine, ask, fake_services, show_window
from tests.helpers.parallel_fake import ParallelFakeWorker
from tests.helpers.window import widget

FAKE_ENGINE = FakeEngine(options={"tokens_per_second": 200})


Opened = list[tuple[MainWindow, Services]]


@pytest.fixture
def opened(
    qtbot: QtBot, ember_app: QApplication, fake_worker: ParallelFakeWorker
) -> Iterator[list[tuple[MainWindow, Services]]]:
    """Windows opened by the test (each on fresh services over the same EMBER_HOME, as a
    restart would open them); closed at the end."""
    windows: list[tuple[MainWindow, Services]] = []
    yield windows
    for window, services in windows:
        if window.isVisible():
            window.close()
        services.close()


def _open(qtbot: QtBot, fake_worker: ParallelFakeWorker, opened: Opened) -> MainWindow:
    services = fake_services(fake_worker, max_tokens=20_000)
    window = show_window(qtbot, services)
    opened.append((window, services))
    return window


def test_each_chat_keeps_its_unsent_text_also_after_a_restart(
    qtbot: QtBot,
    fake_worker: ParallelFakeWorker,
    opened: Opened,
) -> None:
    window = _open(qtbot, fake_worker, opened)
    store = window.services.store
    chats = [store.create_conversation(title) for title in ("One", "Two")]
    window.controller.open_conversation(chats[0].id)
    qtbot.keyClicks(window.chat.composer.input, "half a thought")
    window.controller.open_conversation(chats[1].id)
    assert window.chat.composer.text == ""
    qtbot.keyClicks(window.chat.composer.input, "another one")
    # Saved as typed (after a pause), before anything closes: a crash would not lose it.
    qtbot.waitUntil(
        lambda: store.get_conversation(chats[1].id).settings.get(DRAFT) == "another one",
        timeout=WAIT_MS,
    )
    assert store.get_conversation(chats[0].id).settings[DRAFT] == "half a thought"
    window.controller.open_conversation(chats[0].id)
    assert window.chat.composer.text == "half a thought"

    window.new_chat()
    assert window.chat.composer.text == ""
    qtbot.keyClicks(window.chat.composer.input, "a new chat's start")
    window.close()  # flushes what waits for the typing pause
    assert window.services.settings.extra(NEW_CHAT_DRAFT) == "a new chat's start"

    again = _open(qtbot, fake_worker, opened)
    assert again.controller.conversation is None
    assert again.chat.composer.text == "a new chat's start"
    again.controller.open_conversation(chats[1].id)
    assert again.chat.composer.text == "another one"

    # Sending clears the draft: the text is a message now.
    again.controller.open_conversation(chats[0].id)
    message = ask(qtbot, again, again.chat.composer.text)
    assert message
    again.controller.stop()
    qtbot.waitUntil(lambda: not again.controller.busy, timeout=WAIT_MS)
    again.controller.open_conversation(None)
    assert again.chat.composer.text == "a new chat's start"
    assert DRAFT not in again.services.store.get_conversation(chats[0].id).settings


def test_an_answer_cut_short_by_a_crash_keeps_its_text_and_stats(
    qtbot: QtBot,
    ember_app: QApplication,
    fake_worker: ParallelFakeWorker,
    opened: Opened,
) -> None:
    # The app that crashes: its chat logic on the real store, without a window.
    settings = Settings()
    settings.set("sampling.max_tokens", 20_000)
    store = ChatStore(paths().ensure().chats_db)
    engine = EngineSession(settings, fake_worker)
    controller = ConversationController(store, engine, settings)
    assert controller.send("Tell me a long story")
    answer = controller.answer
    assert answer is not None
    chat = answer.conversation_id

    def saved_with_stats() -> None:
        stats = store.get_conversation(chat).settings.get(PARTIAL_STATS, {}).get(answer.message_id)
        assert stats is not None
        assert stats["tokens"] > 5 and stats["tps"] > 0 and stats["ttft"] > 0
        assert store.get_message(answer.message_id).content

    qtbot.waitUntil(saved_with_stats, timeout=WAIT_MS)
    # The crash: nothing more reaches the chat logic, nothing is finished or saved.
    assert answer.handle is not None
    answer.handle.blockSignals(True)
    assert answer.handle.job is not None
    answer.handle.job.cancel()
    saved_text = store.get_message(answer.message_id).content
    stats = store.get_conversation(chat).settings[PARTIAL_STATS][answer.message_id]

    window = _open(qtbot, fake_worker, opened)  # the restart recovers the interrupted answer
    window.controller.open_conversation(chat)
    recovered = window.controller.branch[-1]
    assert recovered.id == answer.message_id
    assert recovered.status == "stopped" and recovered.metadata["interrupted"] is True
    assert recovered.content == saved_text
    assert recovered.metadata["tokens"] == stats["tokens"]
    shown = widget(window, recovered.id)
    assert f"{stats['tokens']:,} tokens" in shown.stats_label.text()
    assert "tok/s" in shown.stats_label.text()
    assert "interrupted" in shown.status_label.text()
    store.close()


def test_closing_mid_answer_saves_its_stats_so_far(
    qtbot: QtBot,
    fake_worker: ParallelFakeWorker,
    opened: Opened,
) -> None:
    window = _open(qtbot, fake_worker, opened)
    message_id = ask(qtbot, window, "Go on for a while")
    answer = window.controller.answer
    assert answer is not None
    # a rate needs two deliveries apart in time: under load one burst can carry them all
    qtbot.waitUntil(
        lambda: (
            answer.tokens > 5
            and answer.first_delta_at is not None
            and (answer.last_delta_at or 0) > answer.first_delta_at
        ),
        timeout=WAIT_MS,
    )
    window.close()
    saved = window.services.store.get_message(message_id)
    assert saved.status == "stopped" and saved.metadata["interrupted"] is True
    assert saved.metadata["tokens"] >= answer.tokens > 5
    assert saved.metadata["tps"] > 0 and saved.metadata["ttft"] > 0
    assert saved.content == answer.text
