"""While a long attached file is indexed and embedded before an answer, the answer's message
says how far it got, and Stop stops it: the real window, the real test model as the embedder
("The loaded model"), a PDF too long to go whole.

Proves: the message shows "Reading report.pdf…", then the percent growing through indexing
and embedding (the label the person sees, not only a signal), then "Thinking" once the model
reads the prompt; Stop while the first chunks are embedded (an engine job) ends the answer as
stopped and the preparing task at its next step, before every chunk has a vector."""

from __future__ import annotations

import re
from pathlib import Path

from pytestqt.qtbot import QtBot

from app.attachments.chunks import chunk_document
from app.attachments.embedder import EMBEDDING_SETTING, LOADED
from app.attachments.extract import extract
from app.attachments.index import ChunkIndex
from app.ui.chat.attached_prompt import ReadingProgress
from app.ui.chat.waiting_label import THINKING, reading_text
from app.ui.main_window import MainWindow
from tests.helpers.attaching import drop_files
from tests.helpers.builders import QUESTION, long_pdf
from tests.helpers.window import ANSWER_TIMEOUT, type_and_send, widget

PERCENT = re.compile(r"^Reading report\.pdf… (\d+)%$")


def test_reading_text() -> None:
    assert reading_text(["report.pdf"], 0, 0) == "Reading report.pdf…"
    assert reading_text(["report.pdf"], 2, 5) == "Reading report.pdf… 40%"
    assert reading_text(["a.pdf", "b.pdf", "c.txt"], 5, 5) == "Reading 3 files… 100%"


def test_progress_is_sent_a_percent_at_a_time() -> None:
    sent: list[object] = []
    progress = ReadingProgress(sent.append, "key", ["report.pdf"])
    for done in (0, 1, 2, 1000, 1001, 2000, 1999):  # of 2,000: forward only
        progress(done, 2000)
    assert sent == [
        ("key", "Reading report.pdf… 0%"),
        ("key", "Reading report.pdf… 50%"),
        ("key", "Reading report.pdf… 100%"),
    ]


def attach(qtbot: QtBot, window: MainWindow, path: Path) -> None:
    window.services.settings.set(EMBEDDING_SETTING, LOADED)
    drop_files(window.chat, [path])
    tray = window.controller.attachments
    qtbot.waitUntil(lambda: bool(tray.files) and not tray.reading, timeout=ANSWER_TIMEOUT)


def shown_labels(window: MainWindow) -> list[tuple[str, bool]]:
    """What the answer's waiting label shows each time the answer's waiting text changes."""
    seen: list[tuple[str, bool]] = []

    def look(message_id: str, _text: str) -> None:  # after the pane has updated the view
        label = widget(window, message_id).thinking
        seen.append((label.text(), label.isVisible()))

    window.controller.answer_waiting.connect(look)
    return seen


def test_the_answer_says_how_far_the_file_is_read(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    attach(qtbot, window, long_pdf(tmp_path / "report.pdf", pages=12))
    seen = shown_labels(window)
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT) as done:
        type_and_send(window, QUESTION)
    assert done.args[0].status == "complete"
    texts = [text for text, visible in seen if visible]
    assert texts[0] == "Reading report.pdf…"
    percents = [int(m.group(1)) for t in texts if (m := PERCENT.match(t))]
    assert percents == sorted(percents) and percents[0] == 0 and percents[-1] == 100
    assert any(50 < p < 100 for p in percents)  # indexed (half), then embedded batch by batch
    # then the model reads the prompt (with its progress, issue 23's Deliver 4)
    assert seen[-1][0].startswith((THINKING, "Reading the prompt"))
    assert not widget(window, done.args[0].id).thinking.isVisible()


def test_stop_while_the_file_is_embedded_stops_it(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    report = long_pdf(tmp_path / "report.pdf", pages=40)
    attach(qtbot, window, report)
    seen = shown_labels(window)
    controller = window.controller

    def embedding() -> bool:  # indexed (the first half): the first chunks are being embedded
        return any((m := PERCENT.match(t)) and int(m.group(1)) >= 50 for t, _ in seen)

    type_and_send(window, QUESTION)
    answer = controller.answer
    assert answer is not None
    qtbot.waitUntil(embedding, timeout=ANSWER_TIMEOUT)
    task = answer.prepared
    assert task is not None and not task.finished.is_set()
    with qtbot.waitSignal(controller.answer_finished, timeout=ANSWER_TIMEOUT) as stopped:
        window.chat.composer.send_button.click()  # the Stop button while busy
    assert stopped.args[0].status == "stopped"
    qtbot.waitUntil(task.finished.is_set, timeout=ANSWER_TIMEOUT)
    document = extract(report)
    with ChunkIndex(stopped.args[0].conversation_id) as index:
        assert index.vectors.count(document.sha256) < len(list(chunk_document(document)))
    assert not controller.busy
