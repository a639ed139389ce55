"""Two chats answering at the same time (issue 10, item 7), on a fake engine that writes
several answers at once as Engine v2 does: each answer goes into its own conversation, each
chat has its own stop button, and opening a chat that is answering shows its answer live."""

from __future__ import annotations

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from app.ui.sidebar.conversation_list import ANSWERING_ROLE, ID_ROLE
from tests.helpers.fake_app import (
    WAIT_MS,
    FakeEngine,
    ask,
    finished,
)
from tests.helpers.parallel_fake import ParallelFakeWorker
from tests.helpers.window import widget

# Long answers: each test stops them (or lets them end) when it chooses.
FAKE_ENGINE = FakeEngine(options={"tokens_per_second": 150}, max_tokens=20_000)


def test_two_chats_stream_at_once_each_with_its_own_stop(
    qtbot: QtBot, window: MainWindow, fake_worker: ParallelFakeWorker
) -> None:
    controller, store = window.controller, window.services.store
    first = ask(qtbot, window, "First question")
    first_chat = controller.conversation_id
    window.new_chat()
    assert not window.chat.composer.busy  # the new chat is not answering
    second = ask(qtbot, window, "Second question")
    second_chat = controller.conversation_id
    assert first_chat and second_chat and first_chat != second_chat

    qtbot.waitUntil(lambda: fake_worker.running == 2, timeout=WAIT_MS)
    assert window.services.engine.running_answers == 2
    qtbot.waitUntil(lambda: "2 answers running" in window.status.state_label.text())
    qtbot.waitUntil(lambda: answering(window) == {first_chat, second_chat})  # dots in the list
    # The first answer goes on, saved into its own chat while another one is on screen.
    qtbot.waitUntil(lambda: len(store.get_message(first).content) > 20, timeout=WAIT_MS)
    assert widget(window, second).streaming and window.chat.view.widget_for(first) is None

    # Back to the first chat: its answer is shown as it is being written.
    controller.open_conversation(first_chat)
    shown = widget(window, first)
    assert shown.streaming and window.chat.composer.busy
    with qtbot.waitSignal(
        controller.stream_text, timeout=WAIT_MS, check_params_cb=lambda mid, _t: mid == first
    ):
        pass
    assert shown.plain_text == controller.answer.text

    # Its stop button stops it, and only it.
    with finished(qtbot, window, first) as done:
        window.chat.composer.send_button.click()
    assert done.args[0].status == "stopped"
    assert not window.chat.composer.busy
    other = controller.answers.get(second_chat)
    assert other is not None and other.handle is not None and other.handle.final is None
    tokens = other.tokens
    qtbot.waitUntil(lambda: other.tokens > tokens, timeout=WAIT_MS)  # still writing
    qtbot.waitUntil(lambda: window.services.engine.running_answers == 1)
    assert "answers running" not in window.status.state_label.text()
    qtbot.waitUntil(lambda: answering(window) == {second_chat})

    controller.open_conversation(second_chat)
    assert window.chat.composer.busy
    with finished(qtbot, window, second) as done:
        qtbot.keyClick(window.chat.composer.input, Qt.Key.Key_Escape)
    assert done.args[0].status == "stopped"

    for chat, question, answer in (
        (first_chat, "First question", first),
        (second_chat, "Second question", second),
    ):
        branch = store.active_branch(chat)
        assert [m.role for m in branch] == ["user", "assistant"]
        assert branch[0].content == question
        assert branch[1].id == answer and branch[1].status == "stopped"
        assert branch[1].content and branch[1].metadata["tokens"] > 0
    assert fake_worker.most_at_once == 2
    qtbot.waitUntil(lambda: answering(window) == set())


def answering(window: MainWindow) -> set[str]:
    """The conversations the sidebar marks as writing an answer."""
    rows = [window.sidebar.list.item(r) for r in range(window.sidebar.list.count())]
    return {str(item.data(ID_ROLE)) for item in rows if item.data(ANSWERING_ROLE)}


def test_answers_that_end_on_their_own_each_land_in_their_chat(
    qtbot: QtBot, window: MainWindow, fake_worker: ParallelFakeWorker
) -> None:
    window.services.settings.set("sampling.max_tokens", 300)
    window.new_chat()  # takes the new default
    first = ask(qtbot, window, "One")
    first_chat = window.controller.conversation_id
    ended: list[str] = []
    window.controller.answer_finished.connect(lambda message: ended.append(message.id))
    window.new_chat()
    second = ask(qtbot, window, "Two")
    qtbot.waitUntil(lambda: {first, second} <= set(ended), timeout=WAIT_MS)
    store = window.services.store
    done = store.get_message(first)
    assert done.status == "complete" and done.conversation_id == first_chat
    assert done.metadata["tokens"] == 300
    assert store.get_message(second).status == "complete"
    assert widget(window, second).streaming is False  # on screen, finished in place
    assert not window.chat.composer.busy
    assert window.services.engine.running_answers == 0
