"""Files attached in the composer and not sent belong to the chat they were attached in, as its
unsent text does: another chat shows its own (none at first), coming back shows them again
(one still being read goes on meanwhile), and sending sends the open chat's files only; a new
chat's files go with it when it becomes a conversation. Real files; a fake engine."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.chats.models import Message
from app.ui.main_window import MainWindow
from tests.helpers.attaching import chip_texts
from tests.helpers.builders import long_pdf
from tests.helpers.fake_app import WAIT_MS, FakeEngine

FAKE_ENGINE = FakeEngine()  # the `window` fixture is on the fake engine


def note(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_text(f"{name} says the tide turns at noon.\n", encoding="utf-8")
    return path


def settled(window: MainWindow) -> bool:
    return not window.controller.attachments.reading


def send(qtbot: QtBot, window: MainWindow, text: str) -> Message:
    """Send ``text`` from the composer; the question saved (its answer is stopped)."""
    controller = window.controller
    window.chat.composer.set_text(text)
    window.chat.composer.send_button.click()
    question = next(m for m in reversed(controller.branch) if m.role == "user")
    controller.stop()
    qtbot.waitUntil(lambda: not controller.busy, timeout=WAIT_MS)
    return question


def sent_names(message: Message) -> list[str]:
    return [str(e["name"]) for e in message.metadata.get("attachments", [])]


def chats_one_and_two(window: MainWindow) -> tuple[str, str]:
    """Two new chats' ids, the first one open."""
    store = window.services.store
    one, two = (store.create_conversation(title).id for title in ("One", "Two"))
    window.controller.open_conversation(one)
    return one, two


def test_unsent_files_stay_with_their_chat(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    controller, composer = window.controller, window.chat.composer
    one, two = chats_one_and_two(window)
    composer.attach_files([note(tmp_path, "one.txt")])
    qtbot.waitUntil(lambda: settled(window), timeout=WAIT_MS)
    assert set(chip_texts(window)) == {"one.txt"}

    controller.open_conversation(two)  # another chat starts with no files
    assert chip_texts(window) == {} and not composer.attachments_bar.isVisible()
    assert controller.attachments.files == []
    composer.attach_files([note(tmp_path, "two.txt")])
    qtbot.waitUntil(lambda: settled(window), timeout=WAIT_MS)

    controller.open_conversation(one)  # back: its file is still there, and only it
    assert set(chip_texts(window)) == {"one.txt"} and composer.attachments_bar.isVisible()
    question = send(qtbot, window, "What does it say?")
    assert sent_names(question) == ["one.txt"]
    assert chip_texts(window) == {}

    controller.open_conversation(two)  # sending in One took nothing from Two
    assert set(chip_texts(window)) == {"two.txt"}
    assert sent_names(send(qtbot, window, "And this one?")) == ["two.txt"]


def test_a_file_still_being_read_goes_on_while_another_chat_is_open(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    controller, composer = window.controller, window.chat.composer
    one, two = chats_one_and_two(window)
    composer.attach_files([long_pdf(tmp_path / "report.pdf", pages=40)])
    assert controller.attachments.reading
    controller.open_conversation(two)
    assert chip_texts(window) == {} and settled(window)  # Two has nothing being read
    assert composer.send_button.isEnabled() or not composer.text  # nothing of One's blocks Two
    controller.open_conversation(one)
    assert set(chip_texts(window)) == {"report.pdf"}
    qtbot.waitUntil(lambda: settled(window), timeout=WAIT_MS)
    assert chip_texts(window)["report.pdf"].endswith(" · 40 pages")


def test_a_new_chat_s_files_go_with_it_when_it_is_sent(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    controller, composer = window.controller, window.chat.composer
    other = window.services.store.create_conversation("Other")
    controller.open_conversation(other.id)
    composer.attach_files([note(tmp_path, "other.txt")])
    qtbot.waitUntil(lambda: settled(window), timeout=WAIT_MS)
    controller.new_conversation()
    assert chip_texts(window) == {}
    composer.attach_files([note(tmp_path, "new.txt")])
    qtbot.waitUntil(lambda: settled(window), timeout=WAIT_MS)
    controller.open_conversation(other.id)
    controller.new_conversation()  # the new chat's files wait for it, as its text does
    assert set(chip_texts(window)) == {"new.txt"}

    question = send(qtbot, window, "What is new?")
    assert sent_names(question) == ["new.txt"]
    conversation_id = controller.conversation_id
    assert conversation_id is not None and question.conversation_id == conversation_id
    composer.attach_files([note(tmp_path, "later.txt")])  # the chat it became owns these
    qtbot.waitUntil(lambda: settled(window), timeout=WAIT_MS)
    controller.open_conversation(other.id)
    assert set(chip_texts(window)) == {"other.txt"}
    controller.open_conversation(conversation_id)
    assert set(chip_texts(window)) == {"later.txt"}
    controller.new_conversation()
    assert chip_texts(window) == {}
