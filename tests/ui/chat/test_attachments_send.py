"""Sending a message with attached files (issue 13, items 2-4): the engine gets the documents
(whole, or the passages relevant to the question with their pages), the bubble keeps the
user's own text with the files as chips under it, the user message records the files (and they
are kept in EMBER_HOME), a new window on the same EMBER_HOME shows them again, an answer built
from passages shows its sources, and a follow-up still gets the earlier files.

On a fake engine that records the requests it gets (the real model's answers are not what is
tested here: what reaches it is)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.attachments.store import stored_path
from app.chats.models import Message
from app.ui.chat.message_attachments import SourcesLine
from app.ui.main_window import MainWindow
from tests.helpers.attaching import (
    RECORDING,
    RecordingWorker,
    attach,
    send_and_finish,
    user_content,
)
from tests.helpers.builders import FACT, FACT_PAGE, QUESTION, long_pdf
from tests.helpers.fake_app import WAIT_MS, fake_services, show_window
from tests.helpers.mcp_config import time_server
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.tool_turn import offer_tools
from tests.helpers.window import on_remote_stub, widget

FAKE_ENGINE = RECORDING


def shown_sources(qtbot: QtBot, window: MainWindow, answer: Message) -> SourcesLine:
    """The answer's sources line, once its streamed text is all on screen (the answer's
    widget finishes then)."""
    shown = widget(window, answer.id)
    qtbot.waitUntil(lambda: shown.sources_line is not None, timeout=WAIT_MS)
    assert shown.sources_line is not None
    return shown.sources_line


def test_a_short_document_reaches_the_model_whole_and_the_chat_keeps_it(
    qtbot: QtBot,
    ember_app: QApplication,
    window: MainWindow,
    fake_worker: RecordingWorker,
    tmp_path: Path,
) -> None:
    notes = tmp_path / "tides.md"
    notes.write_text("# Tides\n\nThe tide turns at noon in Ardmore harbour.\n", encoding="utf-8")
    size = notes.stat().st_size
    chip = f"tides.md  ·  {size} B"
    attach(qtbot, window, notes)
    answer = send_and_finish(qtbot, window, "When does the tide turn?")

    sent = user_content(fake_worker.requests[-1])
    assert '<file name="tides.md">' in sent
    assert "The tide turns at noon in Ardmore harbour." in sent
    assert sent.endswith("When does the tide turn?")  # the question after its files
    # The bubble shows the user's own words, the file as a chip under it.
    store = window.services.store
    question = store.get_message(answer.parent_id or "")
    bubble = widget(window, question.id)
    assert bubble.text_label is not None and bubble.text_label.text() == "When does the tide turn?"
    assert bubble.attachment_chips is not None
    assert [c.text() for c in bubble.attachment_chips.chips] == [chip]
    # The message records the file; the copy is in EMBER_HOME; the composer is empty again.
    (entry,) = question.metadata["attachments"]
    assert entry["name"] == "tides.md" and entry["size"] == size
    assert stored_path(entry["sha256"], entry["suffix"]).read_bytes() == notes.read_bytes()
    assert not window.controller.attachments.files
    assert not window.chat.composer.attachments_bar.isVisible()
    # The answer names what it was given.
    assert "tides.md (whole)" in shown_sources(qtbot, window, answer).text().replace("&nbsp;", " ")

    # A new window on the same EMBER_HOME shows the chip again.
    conversation_id = window.controller.conversation_id
    window.close()
    window.services.close()
    services = fake_services(fake_worker, max_tokens=8)
    again = show_window(qtbot, services)
    try:
        again.controller.open_conversation(conversation_id)
        shown = widget(again, question.id)
        assert shown.attachment_chips is not None
        assert [c.text() for c in shown.attachment_chips.chips] == [chip]
    finally:
        again.close()
        services.close()


def test_a_long_pdf_gives_the_passage_of_the_fact_and_the_answer_cites_its_page(
    qtbot: QtBot, window: MainWindow, fake_worker: RecordingWorker, tmp_path: Path
) -> None:
    report = long_pdf(tmp_path / "report.pdf", pages=40)
    attach(qtbot, window, report)
    answer = send_and_finish(qtbot, window, QUESTION)

    sent = user_content(fake_worker.requests[-1])
    assert FACT in sent
    assert f'<excerpt file="report.pdf" page="{FACT_PAGE}">' in sent
    assert "<file name=" not in sent  # not whole: it does not fit in a 4,096-token context
    # Its sources, under the answer: the fact's page among them, its passage one click away.
    line = shown_sources(qtbot, window, answer)
    assert line.isVisible()
    wheres = [s["where"] for s in line.sources]
    assert f"report.pdf, page {FACT_PAGE}" in wheres[:3]
    assert f"report.pdf, page {FACT_PAGE}" in line.text().replace("&nbsp;", " ")
    screen = window.screen().availableGeometry()
    low = QPoint(screen.left() + 100, screen.bottom() - 20)  # a link near the screen's bottom
    line.show_passage(wheres.index(f"report.pdf, page {FACT_PAGE}"), low)
    popup = line.popup
    assert popup is not None and popup.isVisible()
    assert FACT in popup.text.text()
    assert "\n" not in popup.text.text()  # the PDF's line ends joined: one paragraph
    assert screen.contains(popup.frameGeometry())  # shown above the link, on the screen
    popup.close()

    # A follow-up: the earlier question still carries the passages it was given, the same
    # text as the first time (the engine's prefix cache reuses it).
    send_and_finish(qtbot, window, "Thank you. Who keeps the lighthouse?")
    first, follow_up = fake_worker.requests[-2], fake_worker.requests[-1]
    assert follow_up.messages[-3] == first.messages[-1]
    assert FACT in str(follow_up.messages[-3].get("content"))
    assert user_content(follow_up) == "Thank you. Who keeps the lighthouse?"


def test_a_follow_up_rebuilds_a_whole_document_from_its_stored_copy(
    qtbot: QtBot, window: MainWindow, fake_worker: RecordingWorker, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("Puffins nest on the northern cliffs.", encoding="utf-8")
    attach(qtbot, window, notes)
    send_and_finish(qtbot, window, "Where do puffins nest?")
    notes.unlink()  # the chat's copy is what counts
    from app.ui.chat import attaching

    attaching._cache.clear()  # read again from EMBER_HOME, as after a restart
    send_and_finish(qtbot, window, "And in winter?")
    first, follow_up = fake_worker.requests[-2], fake_worker.requests[-1]
    assert follow_up.messages[-3] == first.messages[-1]
    assert "Puffins nest on the northern cliffs." in str(follow_up.messages[-3].get("content"))


def test_a_remote_model_gets_the_attached_document_too(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    with on_remote_stub(window) as stub:
        notes = tmp_path / "notes.txt"
        notes.write_text("The ferry leaves at seven.", encoding="utf-8")
        attach(qtbot, window, notes)
        send_and_finish(qtbot, window, "When does the ferry leave?")
        chats = [body for _, path, body in stub.hits if path == "/v1/chat/completions"]
        sent = chats[-1]["messages"][-1]["content"]  # (the model list is read meanwhile)
        assert '<file name="notes.txt">' in sent and "The ferry leaves at seven." in sent
        assert sent.endswith("When does the ferry leave?")


def test_an_answer_with_tools_gets_the_attached_document_too(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    scripted = ScriptedEngine(["It leaves at seven."])  # the tool loop's engine: no calls
    offer_tools(window, time_server(), scripted)
    notes = tmp_path / "notes.txt"
    notes.write_text("The ferry leaves at seven.", encoding="utf-8")
    attach(qtbot, window, notes)
    answer = send_and_finish(qtbot, window, "When does the ferry leave?")
    assert [s["where"] for s in answer.metadata["sources"]] == ["notes.txt (whole)"]
    sent = user_content(scripted.requests[-1])
    assert '<file name="notes.txt">' in sent and "The ferry leaves at seven." in sent
    assert sent.endswith("When does the ferry leave?")


def test_files_of_a_turn_left_out_for_room_are_named_under_the_answer(
    qtbot: QtBot, window: MainWindow, fake_worker: RecordingWorker, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    ledger.write_text("The harbour ledger lists barrels of cider. " * 200, encoding="utf-8")
    attach(qtbot, window, ledger)
    send_and_finish(qtbot, window, "What does the ledger list?")
    assert '<file name="ledger.txt">' in user_content(fake_worker.requests[-1])  # whole, at first

    # A long PDF next, and a question many of its passages match: they take half the context,
    # and the ledger's turn no longer fits beside them.
    attach(qtbot, window, long_pdf(tmp_path / "report.pdf", pages=40))
    answer = send_and_finish(qtbot, window, "What do the mill, the granary and the canal do?")
    assert len(answer.metadata["sources"]) > 2
    sent = fake_worker.requests[-1].messages
    assert not any("barrels of cider" in str(m.get("content")) for m in sent)
    assert answer.metadata["dropped_turns"] == 2
    (note,) = answer.metadata["attachments_left_out"]
    assert note.startswith("ledger.txt was left out: the earlier message it came with no longer")
    assert note in shown_sources(qtbot, window, answer).text().replace("&nbsp;", " ")
