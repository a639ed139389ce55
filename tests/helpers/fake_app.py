"""The real window on a ParallelFakeWorker: fast, deterministic GUI tests of chats that answer
at the same time, switch models, and survive restarts and crashes (no real model needed)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytestqt.qtbot import QtBot

from app.chats.models import Message
from app.engine.types import LoadParams
from app.ui.engine_session import api_model_id
from app.ui.main_window import MainWindow
from app.ui.services import Services, create_services
from tests.helpers.parallel_fake import ParallelFakeWorker

FAKE_CTX = 32768
WAIT_MS = 20_000


def model_file(folder: Path, name: str) -> str:
    """A file standing for a model (the fake worker never reads it; the app checks it exists)."""
    path = folder / name
    path.write_bytes(b"GGUF fake")
    return str(path)


def load_fake(worker: ParallelFakeWorker, path: str, n_ctx: int = FAKE_CTX) -> None:
    """Load ``path`` as the app would (under its API id), before a window exists."""
    worker.load(path, LoadParams(n_ctx=n_ctx), api_model_id(path)).result(10)


@dataclass(frozen=True)
class FakeEngine:
    """How the ``fake_worker`` and ``fake_window`` fixtures (tests/ui/conftest.py) are made for
    a test module: its ``FAKE_ENGINE``, or the default."""

    worker: type[ParallelFakeWorker] = ParallelFakeWorker
    options: dict[str, Any] = field(default_factory=dict)  # the worker's keyword arguments
    model: str = "fake-model.gguf"  # the loaded model's file name (the picker shows its stem)
    n_ctx: int = FAKE_CTX
    max_tokens: int = 8  # how long the window's answers may be


def fake_services(worker: ParallelFakeWorker, max_tokens: int) -> Services:
    services = create_services(worker=worker)
    services.settings.set("sampling.max_tokens", max_tokens)
    services.settings.set("sampling.temperature", 0.0)
    return services


def show_window(qtbot: QtBot, services: Services) -> MainWindow:
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


@contextmanager
def fake_window_on(
    qtbot: QtBot, worker: ParallelFakeWorker, max_tokens: int
) -> Iterator[MainWindow]:
    """The real window on ``worker``, on fresh services over this test's EMBER_HOME; closed
    with its services at the end (the worker stays: a restart opens another window on it)."""
    services = fake_services(worker, max_tokens)
    window = show_window(qtbot, services)
    try:
        yield window
    finally:
        window.close()
        services.close()


@contextmanager
def own_fake_window(
    qtbot: QtBot, folder: Path, model: str = "fake-model.gguf", max_tokens: int = 4
) -> Iterator[MainWindow]:
    """The real window on a ParallelFakeWorker of its own with ``model`` (a file made in
    ``folder``) loaded; for a test whose module's ``fake_window`` fixture is made otherwise."""
    worker = ParallelFakeWorker()
    load_fake(worker, model_file(folder, model))
    try:
        with fake_window_on(qtbot, worker, max_tokens) as window:
            yield window
    finally:
        worker.shutdown()


def ask(qtbot: QtBot, window: MainWindow, text: str) -> str:
    """Send ``text`` in the open chat and wait for its answer's first words (or its end);
    returns the answer's message id."""
    controller = window.controller
    started: list[str] = []

    def on_added(message: Message, streaming: bool) -> None:
        if streaming:
            started.append(message.id)

    controller.message_added.connect(on_added)
    window.chat.composer.set_text(text)
    try:
        window.chat.composer.send_button.click()
        assert started, "no answer started"
        store = window.services.store
        qtbot.waitUntil(
            lambda: (
                bool(controller.answer and controller.answer.text)
                or store.get_message(started[0]).status != "streaming"
            ),
            timeout=WAIT_MS,
        )
    finally:
        controller.message_added.disconnect(on_added)
    return started[0]


def finished(qtbot: QtBot, window: MainWindow, message_id: str) -> object:
    """A context manager waiting for the answer ``message_id`` to be finished and saved."""
    return qtbot.waitSignal(
        window.controller.answer_finished,
        timeout=WAIT_MS,
        check_params_cb=lambda m: isinstance(m, Message) and m.id == message_id,
    )
