"""The Server page for Ollama's clients: the Ollama-compatible URL, the `ollama` Python and Open
WebUI snippets (the Python one run as a user pastes it, against uvicorn serving the GUI's own
engine worker and the real Gemma model), and the optional Ollama port."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import ollama
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from app.ui.server.request_log_view import pretty_body
from tests.helpers.fake_ollama import fake_ollama
from tests.helpers.net import free_port
from tests.helpers.server_page import (
    WAIT_MS,
    nothing_listens,
    serving_with_a_new_key,
    show_server_page,
    start,
    wait_state,
)


def test_the_ollama_snippet_really_works_and_is_logged(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window, key, root = serving_with_a_new_key(qtbot, make_window)
    page = window.server_pane
    assert page.ollama_label.text() == f"Ollama-compatible API: {root}"

    snippet = page.snippets.text("Ollama")
    assert f'host="{root}"' in snippet and f"Bearer {key}" in snippet
    assert key not in page.snippets.shown_text("Ollama")  # hidden on screen, copied whole
    script = snippet.replace("    messages=", '    options={"num_predict": 4},\n    messages=')
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "NO_PROXY": "*"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    webui = page.snippets.text("Open WebUI")
    assert f"OLLAMA_BASE_URL={root} open-webui serve" in webui and key in webui

    panel = page.log_panel
    qtbot.waitUntil(lambda: panel.model.rowCount() == 1, timeout=WAIT_MS)
    (record,) = window.server.request_log.records()
    assert record.path == "/api/chat" and record.status == 200 and record.completion_tokens


def _with_an_ollama_port(make_window: Callable[[], MainWindow]) -> tuple[MainWindow, int, int]:
    """A window on the Server page for a free port, with the Ollama port setting on another
    (11434 in real life): the window and the two ports."""
    port, extra = free_port(), free_port()
    window = show_server_page(make_window, port)
    window.services.settings.set("server.ollama_port", extra)
    window.server_pane.form.load()
    return window, port, extra


def test_the_ollama_port_setting_listens_there_too(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window, port, extra = _with_an_ollama_port(make_window)
    page = window.server_pane
    assert page.form.ollama_port.isChecked()
    start(qtbot, window)
    controller = window.server
    qtbot.waitUntil(lambda: len(controller.ollama_urls) == 2, timeout=WAIT_MS)
    both = f"http://127.0.0.1:{port} and http://127.0.0.1:{extra}"
    qtbot.waitUntil(lambda: both in page.ollama_label.text(), timeout=WAIT_MS)
    with ollama.Client(host=f"http://127.0.0.1:{extra}") as client:
        assert client.list().models is not None

    qtbot.mouseClick(page.form.ollama_port, Qt.MouseButton.LeftButton)  # unticked: a restart
    assert window.services.settings.get("server.ollama_port") == 0
    assert page.restart_notice.isVisibleTo(page)
    qtbot.mouseClick(page.restart_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not page.restart_notice.isVisibleTo(page), timeout=WAIT_MS)
    wait_state(qtbot, controller, "running")
    assert controller.ollama_urls == [f"http://127.0.0.1:{port}"]
    assert nothing_listens(extra)


def test_a_taken_ollama_port_is_said_and_the_main_port_serves(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    port = free_port()
    window = show_server_page(make_window, port)
    with fake_ollama() as taken:
        window.services.settings.set("server.ollama_port", taken)
        page = window.server_pane
        page.form.load()
        start(qtbot, window)
        qtbot.waitUntil(
            lambda: "taken by Ollama itself" in page.ollama_label.text(), timeout=WAIT_MS
        )
    assert window.server.state == "running"
    assert "--ollama-port" not in page.ollama_label.text()


def test_a_streamed_ollama_answer_reads_as_its_text_in_the_log() -> None:
    lines = [
        {"model": "m", "message": {"role": "assistant", "content": "Hel"}, "done": False},
        {"model": "m", "message": {"role": "assistant", "content": "lo"}, "done": False},
        {
            "model": "m",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
        },
    ]
    stream = "\n".join(json.dumps(line) for line in lines) + "\n"
    shown = pretty_body(stream)
    assert shown.startswith("Streamed answer (done reason: stop):\n\nHello\n")
    assert stream.strip() in shown  # the lines as they came, after the text
    generated = '{"response": "a", "done": false}\n{"response": "b", "done": false}\n{"trunc'
    assert pretty_body(generated).startswith("Streamed answer (done reason: none):\n\nab")
    truncated_request = '{"model": "m", "messages": [{"role": "user", "content": "aaaa'
    assert pretty_body(truncated_request) == truncated_request  # not a stream: as it came


def test_restart_asked_while_the_server_still_starts_is_done_after_it(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window, port, extra = _with_an_ollama_port(make_window)
    controller = window.server
    controller.set_enabled(True)  # the start runs on the task runner: the step is busy
    window.services.settings.set("server.ollama_port", 0)
    controller.restart()  # asked before the start finished: it was dropped
    qtbot.waitUntil(lambda: not controller.needs_restart(), timeout=WAIT_MS)
    wait_state(qtbot, controller, "running")
    assert controller.ollama_urls == [f"http://127.0.0.1:{port}"]
    assert nothing_listens(extra)
