"""The Server page and the status bar's API switch, against the real thing: uvicorn on
127.0.0.1 serving the GUI's own engine worker (the real Gemma model), called with the real
``openai`` SDK, curl and httpx."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml  # type: ignore[import-untyped,unused-ignore]
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.ui.main_window import MainWindow
from app.ui.nav_rail import SERVER
from app.ui.server.request_log_view import pretty_body
from app.ui.server.request_table import COLUMNS
from tests.helpers.net import free_port
from tests.helpers.server_page import (
    START_TIMEOUT,
    click_switch,
    nothing_listens,
    pane,
    start,
    start_with_a_new_key,
    wait_state,
)
from tests.helpers.window import LONG_PROMPT

ANSWER_TIMEOUT = 90_000


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def server_window(make_window: Callable[[], MainWindow], port: int) -> MainWindow:
    """A window whose server uses a free port, with the status bar's switch attached."""
    window = make_window()
    window.status.attach_server(window.server)  # idempotent: main_window may do it too
    window.server_pane.form.port.setValue(port)
    window.server_pane.form.flush()
    window.show_page(SERVER)
    return window


def loaded_stem(worker: EngineWorker) -> str:
    (model,) = worker.loaded_models()
    return Path(model.path).name.removesuffix(".gguf")


def test_switch_serves_the_gui_model_and_logs_requests_with_bodies(
    qtbot: QtBot, server_window: MainWindow, engine_worker: EngineWorker, port: int
) -> None:
    window = server_window
    assert window.status.server_toggle.label.text() == "API server · off"
    base_url = start(qtbot, window)
    assert base_url == f"http://127.0.0.1:{port}/v1"
    assert pane(window).url_label.text() == base_url
    assert window.status.server_toggle.label.text() == f"API · http://127.0.0.1:{port}"
    assert window.status.server_toggle.switch.isChecked()
    assert window.services.settings.get("server.enabled") is True

    (loaded,) = engine_worker.loaded_models()
    with openai.OpenAI(base_url=base_url, api_key="unused") as client:
        ids = [m.id for m in client.models.list().data]
        assert loaded.model_id in ids
        answer = client.chat.completions.create(
            model=loaded_stem(engine_worker),  # what the snippets send
            messages=[{"role": "user", "content": "Say hello to the log"}],
            max_tokens=8,
            temperature=0,
        )
    # The GUI's own worker answered with the model it had loaded; nothing else was loaded.
    assert answer.model == loaded.model_id
    assert [m.model_id for m in engine_worker.loaded_models()] == [loaded.model_id]
    assert answer.usage is not None
    content = answer.choices[0].message.content or ""

    panel = pane(window).log_panel
    qtbot.waitUntil(lambda: panel.model.rowCount() == 2, timeout=5000)
    row = [panel.model.index(0, c).data() for c in range(len(COLUMNS))]
    assert row[1:4] == ["POST", "/v1/chat/completions", loaded_stem(engine_worker)]
    assert row[4] == f"{answer.usage.prompt_tokens} → {answer.usage.completion_tokens}"
    assert row[6] == "200"
    assert panel.model.index(1, 2).data() == "/v1/models"

    table = panel.table
    assert not panel.details.isVisible()
    cell = table.visualRect(panel.model.index(0, 2)).center()
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=cell)
    assert panel.details.isVisible()
    assert "Say hello to the log" in panel.details.request_view.text.toPlainText()
    response = panel.details.response_view.text.toPlainText()
    assert '"completion_tokens": ' in response
    assert content.strip()[:5] in response

    # Off from the status bar: the port is free again and the choice is saved.
    qtbot.mouseClick(window.status.server_toggle.switch, Qt.MouseButton.LeftButton)
    wait_state(qtbot, window.server, "stopped")
    assert nothing_listens(port)
    assert not pane(window).switch.isChecked()
    assert window.status.server_toggle.label.text() == "API server · off"
    assert window.services.settings.get("server.enabled") is False


def test_the_switch_is_remembered_across_a_restart(
    qtbot: QtBot, make_window: Callable[[], MainWindow], port: int
) -> None:
    first = make_window()
    first.status.attach_server(first.server)
    first.server_pane.form.port.setValue(port)
    first.server_pane.form.flush()
    qtbot.mouseClick(first.status.server_toggle.switch, Qt.MouseButton.LeftButton)
    wait_state(qtbot, first.server, "running")
    # Quit the way the app does: window, then services (the server stops first).
    first.close()
    first.services.close()
    assert nothing_listens(port)

    second = make_window()
    second.status.attach_server(second.server)
    assert second.server.state == "stopped"
    second.start_background_services()
    wait_state(qtbot, second.server, "running")
    assert second.server_pane.switch.isChecked()
    assert second.status.server_toggle.switch.isChecked()
    assert second.server_pane.form.port.value() == port
    reply = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10)
    assert reply.status_code == 200


def test_local_network_needs_a_key_and_the_banner_offers_one(
    qtbot: QtBot, server_window: MainWindow, port: int
) -> None:
    window = server_window
    form = pane(window).form
    qtbot.mouseClick(form.network_button, Qt.MouseButton.LeftButton)
    assert window.services.settings.get("server.host") == "0.0.0.0"
    assert form.network_warning.isVisible()
    assert form.warning_generate.isVisible()  # no key yet

    with qtbot.waitSignal(window.server.start_failed, timeout=5000) as failed:
        click_switch(qtbot, window)
    assert "API key" in failed.args[0]
    banner = pane(window).banner
    assert banner.isVisible()
    assert "API key" in banner.text.text()
    assert not pane(window).switch.isChecked()
    assert window.server.state == "failed"
    assert nothing_listens(port)

    # The banner's action makes a key and starts.
    action = next(b for b in banner.findChildren(QPushButton) if b.text())
    assert action.text() == "Generate a key and start"
    qtbot.mouseClick(action, Qt.MouseButton.LeftButton)
    wait_state(qtbot, window.server, "running")
    key = window.services.settings.get("server.api_key")
    assert key.startswith("sk-ember-")
    assert form.key.text() == key
    assert not form.warning_generate.isVisible()
    url = f"http://127.0.0.1:{port}/v1/models"
    assert httpx.get(url, timeout=10).status_code == 401
    authorized = httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert authorized.status_code == 200


def test_a_taken_port_is_an_error_and_the_switch_goes_back_off(
    qtbot: QtBot, server_window: MainWindow, port: int
) -> None:
    window = server_window
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen(1)
        with qtbot.waitSignal(window.server.start_failed, timeout=START_TIMEOUT) as failed:
            click_switch(qtbot, window)
        assert f"Port {port}" in failed.args[0]
        assert "already in use" in failed.args[0]
        qtbot.waitUntil(lambda: not pane(window).switch.isChecked(), timeout=2000)
        assert pane(window).banner.isVisible()
        assert "already in use" in pane(window).banner.text.text()
        assert window.status.server_toggle.label.text() == "API server · error"
        assert not window.status.server_toggle.switch.isChecked()
        assert window.services.settings.get("server.enabled") is False

        # The banner offers the next free port.
        banner = pane(window).banner
        action = next(b for b in banner.findChildren(QPushButton) if b.text())
        assert action.text().startswith("Use port ")
        qtbot.mouseClick(action, Qt.MouseButton.LeftButton)
        wait_state(qtbot, window.server, "running")
        assert window.server.status.port not in (None, port)
        assert window.services.settings.get("server.port") == window.server.status.port
        assert not banner.isVisible()


def test_a_port_taken_at_start_up_keeps_the_wish_for_next_time(
    qtbot: QtBot, make_window: Callable[[], MainWindow], port: int
) -> None:
    """The server was on when Ember quit; at the next start its port is taken for now. The
    switch shows off with the error, but the next launch tries again."""
    window = make_window()
    window.services.settings.set("server.port", port)
    window.services.settings.set("server.enabled", True)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen(1)
        with qtbot.waitSignal(window.server.start_failed, timeout=START_TIMEOUT):
            window.start_background_services()
    assert not pane(window).switch.isChecked()
    assert window.services.settings.get("server.enabled") is True
    click_switch(qtbot, window)  # the user's own choice is remembered as before
    wait_state(qtbot, window.server, "running")
    click_switch(qtbot, window)
    wait_state(qtbot, window.server, "stopped")
    assert window.services.settings.get("server.enabled") is False


class _Ticker:
    """Counts GUI event loop turns: a blocked GUI thread counts none."""

    def __init__(self) -> None:
        self.ticks = 0
        self.timer = QTimer()
        self.timer.setInterval(5)
        self.timer.timeout.connect(self._tick)

    def _tick(self) -> None:
        self.ticks += 1


def _stream_in_thread(base_url: str, model: str) -> tuple[threading.Thread, threading.Event, list]:
    """A streamed chat running on its own thread; ``first`` is set at the first chunk."""
    first = threading.Event()
    outcome: list[object] = []

    def run() -> None:
        try:
            with openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0) as client:
                stream = client.chat.completions.create(
                    model=model,
                    messages=[{"role": "user", "content": LONG_PROMPT}],
                    max_tokens=1500,
                    stream=True,
                )
                for chunk in stream:
                    first.set()
                    if chunk.choices and chunk.choices[0].finish_reason:
                        outcome.append(chunk.choices[0].finish_reason)
            outcome.append("ended")
        except Exception as error:  # the server going away mid-stream is expected here
            first.set()
            outcome.append(error)

    thread = threading.Thread(target=run, name="test-stream", daemon=True)
    thread.start()
    return thread, first, outcome


def test_starting_and_stopping_with_a_stream_open_never_block_the_gui(
    qtbot: QtBot,
    server_window: MainWindow,
    engine_worker: EngineWorker,
    port: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.server.runner import ServerRunner

    ran_on: dict[str, threading.Thread] = {}  # where the server's start and stop ran
    for name in ("start", "stop"):
        real = getattr(ServerRunner, name)

        def recording(
            self: object, *args: object, _name: str = name, _real: Any = real, **kwargs: object
        ) -> Any:
            ran_on.setdefault(_name, threading.current_thread())
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(ServerRunner, name, recording)
    window = server_window
    ticker = _Ticker()
    ticker.timer.start()
    click_switch(qtbot, window)
    assert window.server.wanted and pane(window).switch.isChecked()
    wait_state(qtbot, window.server, "running")
    assert ran_on["start"] is not threading.main_thread()  # it imports and binds: not here

    url = window.server.base_url
    assert url is not None
    thread, first, outcome = _stream_in_thread(url, loaded_stem(engine_worker))
    qtbot.waitUntil(first.is_set, timeout=ANSWER_TIMEOUT)
    gateway = window.server.gateway
    assert gateway is not None and gateway.active_jobs == 1

    ticks = ticker.ticks
    qtbot.mouseClick(pane(window).switch, Qt.MouseButton.LeftButton)
    wait_state(qtbot, window.server, "stopped")
    assert ran_on["stop"] is not threading.main_thread()  # it waits for the open stream
    assert ticker.ticks > ticks  # the GUI kept turning while the server stopped
    ticker.timer.stop()
    thread.join(15)
    assert not thread.is_alive()
    assert outcome  # the client saw its stream end (cancelled) or the connection close
    assert nothing_listens(port)
    assert gateway.active_jobs == 0


def test_closing_the_window_with_a_stream_open_does_not_hang(
    qtbot: QtBot, server_window: MainWindow, engine_worker: EngineWorker, port: int
) -> None:
    window = server_window
    url = start(qtbot, window)
    thread, first, _outcome = _stream_in_thread(url, loaded_stem(engine_worker))
    qtbot.waitUntil(first.is_set, timeout=ANSWER_TIMEOUT)

    window.close()  # returns: the server's graceful shutdown does not wait for the stream
    window.services.close()
    thread.join(15)
    assert not thread.is_alive()
    assert nothing_listens(port)
    # The shared engine still works: the API's job was cancelled, not left running.
    assert engine_worker.loaded_models()


def test_snippets_fill_in_the_url_model_and_key_and_really_work(
    qtbot: QtBot, server_window: MainWindow, engine_worker: EngineWorker, port: int
) -> None:
    window = server_window
    view = pane(window).snippets
    form = pane(window).form
    stem = loaded_stem(engine_worker)
    key = start_with_a_new_key(qtbot, window)
    url = window.server.base_url
    assert url is not None

    curl = view.text("curl")
    assert url in curl and stem in curl and f"Bearer {key}" in curl
    assert key not in view.shown_text("curl")  # the key is hidden on screen
    qtbot.mouseClick(form.show_key, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: key in view.shown_text("curl"), timeout=2000)

    qtbot.mouseClick(view.tabs["curl"], Qt.MouseButton.LeftButton)
    qtbot.mouseClick(view.copy_button, Qt.MouseButton.LeftButton)
    from PySide6.QtGui import QGuiApplication

    assert QGuiApplication.clipboard().text() == curl

    if shutil.which("curl"):  # the snippet as a user pastes it (answer kept short)
        command = curl.replace('"messages"', '"max_tokens": 6, "messages"')
        done = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, timeout=120, check=True
        )
        assert '"chat.completion"' in done.stdout

    python = view.text("Python")
    assert f'base_url="{url}"' in python and f'api_key="{key}"' in python
    script = python.replace("    messages=", "    max_tokens=6,\n    messages=")
    env = {**os.environ, "NO_PROXY": "*"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr

    config = yaml.safe_load(view.text("Continue"))
    (model,) = config["models"]
    assert model["apiBase"] == url and model["model"] == stem and model["apiKey"] == key

    panel = pane(window).log_panel
    qtbot.waitUntil(lambda: panel.model.rowCount() == 2, timeout=5000)


def test_changing_a_setting_while_running_offers_a_restart(
    qtbot: QtBot, server_window: MainWindow, port: int
) -> None:
    window = server_window
    start(qtbot, window)
    notice = pane(window).restart_notice
    assert not notice.isVisible()
    new_port = free_port()
    pane(window).form.port.setValue(new_port)
    qtbot.waitUntil(notice.isVisible, timeout=3000)
    qtbot.mouseClick(pane(window).restart_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: window.server.state == "running" and window.server.status.port == new_port,
        timeout=START_TIMEOUT,
    )
    assert not notice.isVisible()
    assert nothing_listens(port)
    assert pane(window).url_label.text() == f"http://127.0.0.1:{new_port}/v1"


class TestJustInTimeLoads:
    """A request naming another library model loads it on the GUI's worker; the GUI's
    header and status bar follow (its own worker here: the shared one must stay as it is)."""

    @pytest.fixture
    def engine_worker(self, gemma_path: Path) -> Iterator[EngineWorker]:
        worker = EngineWorker()
        worker.load(str(gemma_path), LoadParams(n_ctx=512)).result(180)
        yield worker
        worker.shutdown()

    def test_the_gui_follows_a_model_the_api_loaded(
        self,
        qtbot: QtBot,
        ember_home: Path,
        gemma_path: Path,
        make_window: Callable[[], MainWindow],
        port: int,
    ) -> None:
        copy = ember_home / "models" / "test" / "gemma-copy" / "gemma-copy.gguf"
        copy.parent.mkdir(parents=True)
        try:
            os.link(gemma_path, copy)
        except OSError:
            shutil.copyfile(gemma_path, copy)
        window = make_window()
        window.services.settings.set("load.n_ctx", 512)
        window.status.attach_server(window.server)
        window.server_pane.form.port.setValue(port)
        window.server_pane.form.flush()
        window.show_page(SERVER)
        engine = window.services.engine
        assert engine.loaded is not None and engine.loaded.path == str(gemma_path)
        url = start(qtbot, window)

        with (
            qtbot.waitSignal(engine.model_loaded, timeout=ANSWER_TIMEOUT) as loaded,
            openai.OpenAI(base_url=url, api_key="unused") as client,
        ):
            client.completions.create(model="gemma-copy", prompt="Hi", max_tokens=2)
        assert loaded.args[0].path == str(copy)
        assert engine.loaded is not None and engine.loaded.path == str(copy)
        assert "gemma-copy" in window.status.state_label.text()
        library_id = "test/gemma-copy/gemma-copy.gguf"
        qtbot.waitUntil(lambda: library_id in pane(window).snippets.text("Python"), timeout=2000)


def test_a_streamed_response_body_shows_the_answer_first() -> None:
    stream = (
        'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
        'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
        "data: {trunc… (120 bytes not kept) …\n\n"
        'data: {"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}\n\n'
        "data: [DONE]\n\n"
    )
    shown = pretty_body(stream)
    assert shown.startswith("Streamed answer (finish reason: stop):\n\nHello\n")
    assert shown.endswith(stream)
    assert pretty_body('{"a": [1]}') == '{\n  "a": [\n    1\n  ]\n}'
    assert pretty_body("") == ""
