"""Attached files at the edges: sending while a file is still being read is refused with a
sentence, stopping an answer while its files are being prepared stops the preparing, and an
edited question keeps its files. A fake engine that records what it is sent."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from app.attachments.document import Document, Section
from app.chats.models import Message
from app.ui.chat import attached_prompt, attaching
from app.ui.chat.attached_prompt import AttachedPrompt
from app.ui.main_window import MainWindow
from tests.helpers.attaching import (
    RECORDING,
    RecordingWorker,
    attach,
    send_and_finish,
    user_content,
)
from tests.helpers.fake_app import WAIT_MS

FAKE_ENGINE = RECORDING


def held(real: Callable[..., Any], release: threading.Event) -> Callable[..., Any]:
    """``real``, once ``release`` is set (or its own cancel flag, if it got one)."""

    def wait_then_call(*args: Any, **kwargs: Any) -> Any:
        cancel = kwargs.get("cancel") or (args[3] if len(args) > 3 else None)
        while not release.wait(0.01):
            if cancel is not None and cancel.is_set():
                raise RuntimeError("cancelled while held")
        return real(*args, **kwargs)

    return wait_then_call


def test_sending_while_a_file_is_read_says_to_wait(
    qtbot: QtBot, window: MainWindow, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    monkeypatch.setattr(attaching, "extract", held(attaching.extract, release))
    notes = tmp_path / "slow.txt"
    notes.write_text("Read slowly.", encoding="utf-8")
    controller = window.controller
    window.chat.composer.attach_files([notes])
    assert controller.attachments.reading
    problems: list[tuple[str, str]] = []
    controller.problem.connect(lambda kind, text: problems.append((kind, text)))

    assert not controller.send("What does it say?")  # as Enter would, were it enabled
    assert problems == [
        ("busy", "slow.txt is still being read; send once its chip shows its size.")
    ]
    assert controller.conversation is None  # nothing saved
    assert window.chat.composer.send_button.toolTip() == "Sends once slow.txt is read"
    release.set()
    qtbot.waitUntil(lambda: not controller.attachments.reading, timeout=WAIT_MS)
    send_and_finish(qtbot, window, "What does it say?")


def test_stopping_while_the_files_are_prepared_stops_preparing_them(
    qtbot: QtBot,
    window: MainWindow,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("Plenty of words.", encoding="utf-8")
    attach(qtbot, window, notes)
    started = threading.Event()
    flags: list[threading.Event] = []

    def prepare(
        history: Sequence[Message],
        budget: int,
        conversation_id: str,
        cancel: threading.Event,
        **kwargs: Any,
    ) -> AttachedPrompt:
        if flags:  # the next answer's files: prepared as usual
            return real(history, budget, conversation_id, cancel, **kwargs)
        flags.append(cancel)
        started.set()
        cancel.wait(WAIT_MS / 1000)
        raise RuntimeError("stopped")

    real = attached_prompt.prepare_prompt
    monkeypatch.setattr(attached_prompt, "prepare_prompt", prepare)
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS) as finished:
        window.chat.composer.set_text("Summarize it")
        window.chat.composer.send_button.click()
        qtbot.waitUntil(started.is_set, timeout=WAIT_MS)  # its tokens are counted first
        window.controller.stop()
    answer = finished.args[0]
    assert isinstance(answer, Message) and answer.status == "stopped"
    assert flags and flags[0].is_set()  # the worker's preparing was told to stop
    qtbot.waitUntil(lambda: not window.controller.answers.all())
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS):
        window.controller.regenerate(answer.id)  # the stopped one's end arrives before this
    assert not [r for r in caplog.records if r.levelname == "ERROR"]  # a stop is no failure


def test_an_edited_question_keeps_its_files(
    qtbot: QtBot, window: MainWindow, fake_worker: RecordingWorker, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("The bridge opens at six.", encoding="utf-8")
    attach(qtbot, window, notes)
    first = send_and_finish(qtbot, window, "When does the bridge open?")
    question_id = first.parent_id or ""
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS):
        window.controller.edit_and_resend(question_id, "When does the bridge open, please?")
    edited = window.controller.branch[-2]
    assert edited.id != question_id and edited.content == "When does the bridge open, please?"
    assert [e["name"] for e in edited.metadata["attachments"]] == ["notes.txt"]
    sent = user_content(fake_worker.requests[-1])
    assert "The bridge opens at six." in sent
    assert sent.endswith("When does the bridge open, please?")


def document(number: int, chars: int) -> Document:
    return Document(f"d{number}.txt", chars, f"{number:064x}", "text", (Section("x" * chars),))


def test_the_documents_cache_keeps_the_newest_within_its_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(attaching, "_cache", OrderedDict())
    monkeypatch.setattr(attaching, "CACHED_CHARS", 100)
    for number in range(3):
        attaching.remember_document(document(number, 60))
    assert [d.name for d in attaching._cache.values()] == ["d2.txt"]  # 120 > 100 characters
    attaching.remember_document(document(3, 500))  # larger than the limit: still kept
    assert [d.name for d in attaching._cache.values()] == ["d3.txt"]
    monkeypatch.setattr(attaching, "CACHED_CHARS", 10_000)
    for number in range(10, 20):
        attaching.remember_document(document(number, 1))
    assert len(attaching._cache) == attaching.CACHED_DOCUMENTS
    assert next(iter(attaching._cache.values())).name == "d12.txt"
