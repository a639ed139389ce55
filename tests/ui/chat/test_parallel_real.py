"""Two chats answering at once with the real model, through the real window (issue 10, item
7): ask in one, switch, ask in another; stopping the first leaves the second to finish, and
each answer is saved in its own conversation."""

from __future__ import annotations

import dataclasses

import pytest
from pytestqt.qtbot import QtBot

from app.chats.models import Message
from app.engine.types import SamplingParams
from app.ui.main_window import MainWindow
from tests.helpers.engine_checks import NO_END
from tests.helpers.window import ANSWER_TIMEOUT, LONG_PROMPT, set_max_tokens, type_and_send

pytestmark = pytest.mark.slow

# Greedy, and end-of-turn / end-of-text banned: every answer writes text until max_tokens.


def _started(window: MainWindow, text: str) -> str:
    ids: list[str] = []

    def on_added(message: Message, streaming: bool) -> None:
        if streaming:
            ids.append(message.id)

    window.controller.message_added.connect(on_added)
    type_and_send(window, text)
    window.controller.message_added.disconnect(on_added)
    assert len(ids) == 1
    return ids[0]


def test_two_chats_get_answers_at_once_and_stop_separately(
    qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    controller, store = window.controller, window.services.store
    chat_sampling = controller.sampling_params

    def sampling() -> SamplingParams:
        return dataclasses.replace(chat_sampling(), temperature=0.0, logit_bias=NO_END)

    monkeypatch.setattr(controller, "sampling_params", sampling)
    ended: list[Message] = []
    controller.answer_finished.connect(ended.append)

    set_max_tokens(window, 400)
    long_answer = _started(window, LONG_PROMPT)
    long_chat = controller.conversation_id
    with qtbot.waitSignal(controller.stream_text, timeout=ANSWER_TIMEOUT):
        pass
    window.new_chat()
    set_max_tokens(window, 16)
    short_answer = _started(window, "Name three colours:")
    short_chat = controller.conversation_id
    assert long_chat and short_chat and long_chat != short_chat
    assert {a.message_id for a in controller.answers.all()} == {long_answer, short_answer}
    assert window.chat.composer.busy

    controller.open_conversation(long_chat)
    assert controller.answer is not None and controller.answer.message_id == long_answer
    controller.stop()  # the long answer's own stop
    qtbot.waitUntil(
        lambda: {m.id for m in ended} == {long_answer, short_answer}, timeout=ANSWER_TIMEOUT
    )

    stopped, done = store.get_message(long_answer), store.get_message(short_answer)
    assert stopped.status == "stopped" and stopped.conversation_id == long_chat
    assert done.status == "complete" and done.conversation_id == short_chat
    assert done.content.strip() and 0 < done.metadata["tokens"] <= 16
    for chat in (long_chat, short_chat):
        branch = store.active_branch(chat)
        assert [m.role for m in branch] == ["user", "assistant"]
        assert store.get_conversation(chat).model == window.services.engine.loaded.path  # type: ignore[union-attr]
    assert window.services.engine.running_answers == 0
    assert not window.chat.composer.busy
