"""Chatting with the real model through the real window: send, stop, regenerate, edit."""

from __future__ import annotations

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from tests.helpers.window import (
    ANSWER_TIMEOUT,
    LONG_PROMPT,
    send,
    set_max_tokens,
    type_and_send,
    widget,
)


def test_send_streams_and_saves_the_answer(qtbot: QtBot, window: MainWindow) -> None:
    controller = window.controller
    with qtbot.waitSignals(
        [controller.busy_changed, controller.stream_text, controller.answer_finished],
        order="simple",
        timeout=ANSWER_TIMEOUT,
    ):
        type_and_send(window, "What is the capital of France?")
    answer = controller.branch[-1]
    store = window.services.store
    saved = store.get_message(answer.id)
    assert saved.status == "complete"
    assert saved.content.strip()
    assert saved.metadata["tokens"] > 0
    assert saved.metadata["prompt_tokens"] > 0
    assert [m.role for m in store.active_branch(answer.conversation_id)] == ["user", "assistant"]
    conversation = store.get_conversation(answer.conversation_id)
    assert conversation.title == "What is the capital of France?"
    shown = widget(window, answer.id)
    assert not shown.streaming
    assert shown.body is not None and shown.body.text == saved.content
    assert "tokens" in shown.stats_label.text() and "tok/s" in shown.stats_label.text()
    qtbot.waitUntil(lambda: window.sidebar.list.conversation_ids() == [conversation.id])
    assert window.chat.composer.text == ""
    assert window.chat.composer.meter.used > 0


def test_enter_sends_and_shift_enter_adds_a_line(qtbot: QtBot, window: MainWindow) -> None:
    composer = window.chat.composer
    composer.input.setFocus()
    qtbot.keyClicks(composer.input, "first line")
    qtbot.keyClick(composer.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(composer.input, "second line")
    assert composer.text == "first line\nsecond line"
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT):
        qtbot.keyClick(composer.input, Qt.Key.Key_Return)
    user = window.controller.branch[0]
    assert user.content == "first line\nsecond line"


def test_stop_keeps_the_partial_answer_marked_stopped(qtbot: QtBot, window: MainWindow) -> None:
    set_max_tokens(window, 400)
    with qtbot.waitSignal(window.controller.stream_text, timeout=ANSWER_TIMEOUT):
        type_and_send(window, LONG_PROMPT)
    assert window.chat.composer.busy
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT) as done:
        qtbot.keyClick(window, Qt.Key.Key_Escape)
    stopped = done.args[0]
    assert stopped.status == "stopped"
    assert stopped.content
    saved = window.services.store.get_message(stopped.id)
    assert saved.status == "stopped" and saved.content == stopped.content
    shown = widget(window, stopped.id)
    assert shown.status_label.isVisible()
    assert "stopped" in shown.status_label.text()
    assert not window.chat.composer.busy


def test_streaming_text_is_saved_before_the_answer_ends(qtbot: QtBot, window: MainWindow) -> None:
    set_max_tokens(window, 400)
    with qtbot.waitSignal(window.controller.stream_text, timeout=ANSWER_TIMEOUT):
        type_and_send(window, LONG_PROMPT)
    answer = window.controller.answer
    assert answer is not None
    store = window.services.store

    def saved_while_streaming() -> None:
        message = store.get_message(answer.message_id)
        assert message.status == "streaming"
        assert len(message.content) > 0

    qtbot.waitUntil(saved_while_streaming, timeout=ANSWER_TIMEOUT)
    assert window.controller.busy
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT):
        window.controller.stop()


def test_closing_mid_answer_saves_it_as_far_as_it_got(qtbot: QtBot, window: MainWindow) -> None:
    set_max_tokens(window, 400)
    with qtbot.waitSignal(window.controller.stream_text, timeout=ANSWER_TIMEOUT):
        type_and_send(window, LONG_PROMPT)
    qtbot.waitUntil(lambda: len(window.controller.answer.text) > 4, timeout=ANSWER_TIMEOUT)  # type: ignore[union-attr]
    answer = window.controller.answer
    assert answer is not None
    shown_text = answer.text
    window.close()
    saved = window.services.store.get_message(answer.message_id)
    assert saved.status == "stopped"
    assert saved.metadata.get("interrupted") is True
    assert saved.content.startswith(shown_text)


def test_regenerate_makes_a_sibling_and_arrows_switch(qtbot: QtBot, window: MainWindow) -> None:
    first = send(qtbot, window, "Name a colour.")
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT) as done:
        widget(window, first.id).regenerate_button.click()
    second = done.args[0]
    assert second.id != first.id
    assert second.parent_id == first.parent_id
    assert (second.sibling_index, second.sibling_count) == (1, 2)
    shown = widget(window, second.id)
    assert shown.sibling_label.isVisible() and shown.sibling_label.text() == "2/2"
    assert window.chat.view.widget_for(first.id) is None

    shown.previous_button.click()
    back = widget(window, first.id)
    assert back.sibling_label.text() == "1/2"
    assert window.controller.branch[-1].id == first.id
    back.next_button.click()
    assert widget(window, second.id).sibling_label.text() == "2/2"


def test_edit_and_resend_branches_and_keeps_the_old_one(qtbot: QtBot, window: MainWindow) -> None:
    first_answer = send(qtbot, window, "Name a fruit.")
    question = window.controller.branch[0]
    bubble = widget(window, question.id)
    bubble.edit_button.click()
    edit_box = bubble.edit_box
    assert edit_box is not None
    edit_box.editor.setPlainText("Name a vegetable.")
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT) as done:
        edit_box.send_button.click()
    new_answer = done.args[0]
    branch = window.controller.branch
    assert [m.content for m in branch[:1]] == ["Name a vegetable."]
    assert branch[1].id == new_answer.id
    edited = widget(window, branch[0].id)
    assert edited.sibling_label.text() == "2/2"

    edited.previous_button.click()
    branch = window.controller.branch
    assert branch[0].id == question.id and branch[1].id == first_answer.id
    assert widget(window, question.id).sibling_label.text() == "1/2"
    assert widget(window, first_answer.id).body is not None


def test_delete_message_removes_it_and_what_follows(qtbot: QtBot, window: MainWindow) -> None:
    send(qtbot, window, "Say hello.")
    question = window.controller.branch[0]
    widget(window, question.id).delete_button.click()
    assert window.controller.branch == []
    conversation_id = window.controller.conversation_id
    assert conversation_id is not None
    assert window.services.store.message_count(conversation_id) == 0


def test_copy_message_and_last_answer(qtbot: QtBot, window: MainWindow) -> None:
    from PySide6.QtGui import QGuiApplication

    answer = send(qtbot, window, "Say hello.")
    widget(window, answer.id).copy_button.click()
    assert QGuiApplication.clipboard().text() == answer.content
    QGuiApplication.clipboard().setText("")
    qtbot.keyClick(
        window,
        Qt.Key.Key_C,
        Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
    )
    assert QGuiApplication.clipboard().text() == answer.content
