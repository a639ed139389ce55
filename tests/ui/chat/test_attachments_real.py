"""The issue's "done when", in the window with the real test model (2,048-token context): a
40-page PDF dropped on the chat, a question about a fact on one page, and the answer cites that
page. What this proves: the real tokenizer's counts, the real context fitting and the real
engine take the retrieved passages (the answer completes, nothing is cut for room). What it
cannot: that the tiny model's words are right; the sources come from retrieval, not from it."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from tests.helpers.attaching import drop_files
from tests.helpers.builders import FACT_PAGE, QUESTION, long_pdf
from tests.helpers.window import ANSWER_TIMEOUT, send, widget


def test_a_dropped_40_page_pdf_answers_with_the_fact_s_page_as_a_source(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    report = long_pdf(tmp_path / "report.pdf", pages=40)
    drop_files(window.chat, [report])
    tray = window.controller.attachments
    qtbot.waitUntil(lambda: not tray.reading, timeout=ANSWER_TIMEOUT)
    (chip,) = window.chat.composer.attachments_bar.chips.values()
    assert chip.detail_label.text().endswith(" · 40 pages")

    answer = send(qtbot, window, QUESTION)
    assert answer.status == "complete" and answer.content
    assert "dropped_turns" not in answer.metadata  # the passages fit beside the question
    wheres = [s["where"] for s in answer.metadata["sources"]]
    assert f"report.pdf, page {FACT_PAGE}" in wheres[:3]
    shown = widget(window, answer.id)
    qtbot.waitUntil(lambda: shown.sources_line is not None, timeout=ANSWER_TIMEOUT)
    assert shown.sources_line is not None
    assert f"report.pdf, page {FACT_PAGE}" in shown.sources_line.text().replace("&nbsp;", " ")
