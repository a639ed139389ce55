"""The app searches a long attached file with the embedder chosen in Chat settings: the real
window, the real test model, a PDF too long to go whole.

Proves: with "The loaded model" chosen, each chunk of the file gets a vector in the chat's
index, stored with the loaded model's identity, and the answer still cites the fact's page; by
default (Automatic) with no embedding GGUF in the library, nothing is embedded (words alone),
as with Off. It cannot prove that the tiny model's vectors
rank better than words alone: tests/attachments/test_vectors.py proves the fusion with
vectors whose meaning is known."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.attachments.embedder import AUTO, EMBEDDING_SETTING, LOADED, OFF, embedding_choice
from app.attachments.extract import extract
from app.attachments.index import ChunkIndex
from app.ui.main_window import MainWindow
from tests.helpers.attaching import drop_files
from tests.helpers.builders import QUESTION, long_pdf
from tests.helpers.window import ANSWER_TIMEOUT, send

FACT_PAGE = 9


def ask_about(qtbot: QtBot, window: MainWindow, tmp_path: Path) -> tuple[str, str, list[str]]:
    """Drop a 12-page PDF, ask about its fact: (conversation id, file sha256, source places)."""
    report = long_pdf(tmp_path / "report.pdf", pages=12, fact_page=FACT_PAGE)
    drop_files(window.chat, [report])
    tray = window.controller.attachments
    qtbot.waitUntil(lambda: not tray.reading, timeout=ANSWER_TIMEOUT)
    answer = send(qtbot, window, QUESTION)
    assert answer.status == "complete"
    wheres = [s["where"] for s in answer.metadata["sources"]]
    return answer.conversation_id, extract(report).sha256, wheres


def test_the_loaded_model_chosen_embeds_the_file_s_chunks(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    window.services.settings.set(EMBEDDING_SETTING, LOADED)
    conversation_id, sha256, wheres = ask_about(qtbot, window, tmp_path)
    assert f"report.pdf, page {FACT_PAGE}" in wheres[:3]
    loaded = window.services.engine.loaded
    assert loaded is not None
    with ChunkIndex(conversation_id) as index:
        assert index.vectors.count(sha256) > 0
        stored = index.vectors.model()
        assert stored is not None and loaded.model_id in stored[0]


@pytest.mark.parametrize("choice", [AUTO, OFF])
def test_without_an_embedding_model_the_file_is_searched_by_words_alone(
    qtbot: QtBot, window: MainWindow, tmp_path: Path, choice: str
) -> None:
    window.services.settings.set(EMBEDDING_SETTING, choice)
    assert embedding_choice(window.services.settings) == choice
    conversation_id, sha256, wheres = ask_about(qtbot, window, tmp_path)
    assert f"report.pdf, page {FACT_PAGE}" in wheres[:3]
    with ChunkIndex(conversation_id) as index:
        assert index.vectors.count(sha256) == 0
        assert index.vectors.model() is None
