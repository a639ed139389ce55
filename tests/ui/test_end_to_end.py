"""From nothing to chatting and serving, through the window as a person would: find the model
on the (local, fake) Hub, download it, load it from the toast, chat, then switch the API on
and use the same model from the ``openai`` SDK. Each page has its own tests; this one checks
the seams between them (paths, model ids, the page that shows, the shared engine)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import openai
import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.config import paths
from app.engine.worker import EngineWorker
from app.ui.main_window import MainWindow
from app.ui.nav_rail import CHATS, MODELS, SERVER
from app.ui.toast import Toast
from tests.helpers.hub_server import FakeHub, FakeRepo, fake_hub_env
from tests.helpers.net import free_port
from tests.helpers.window import send

REPO = "google/gemma-3-270m-GGUF"
FILE = "gemma-3-270m-Q4_K_M.gguf"
WAIT = 90_000


@pytest.fixture
def engine_worker(idle_worker: EngineWorker) -> EngineWorker:
    """A worker of its own with no model: this test loads what it downloads."""
    return idle_worker


@pytest.fixture
def hub(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory, gemma_path: Path
) -> Iterator[FakeHub]:
    with fake_hub_env(monkeypatch, tmp_path_factory) as fake:
        fake.add(FakeRepo(REPO, {FILE: gemma_path}, downloads=1000, likes=10))
        yield fake


def test_search_download_load_chat_and_serve(
    qtbot: QtBot, hub: FakeHub, make_window: Callable[[], MainWindow]
) -> None:
    window = make_window()
    assert window.services.engine.loaded is None

    # Models page: the search runs as the page opens; open the repository, download the file.
    qtbot.mouseClick(window.rail.buttons[MODELS], Qt.MouseButton.LeftButton)
    models = window.models_pane
    qtbot.waitUntil(lambda: REPO in [r.id for r in models.discover.results], timeout=WAIT)
    models.discover.open_result(REPO)
    qtbot.waitUntil(lambda: FILE in models.detail.rows, timeout=WAIT)
    with qtbot.waitSignal(models.bridge.completed, timeout=WAIT):
        models.detail.rows[FILE].button.click()
    target = paths().models_dir / REPO / FILE

    # The toast's Load loads it and goes back to the chat.
    toast = window.findChild(Toast, "Toast")
    assert toast is not None
    qtbot.waitUntil(toast.isVisible)
    toast.action_button.click()
    assert window.current_page == CHATS
    engine = window.services.engine
    qtbot.waitUntil(lambda: engine.loaded is not None, timeout=WAIT)
    assert engine.loaded is not None and Path(engine.loaded.path) == target
    assert window.header.picker.name_label.text() == "gemma-3-270m-Q4_K_M"

    answer = send(qtbot, window, "Hello!")
    assert answer.status == "complete" and answer.content.strip()

    # Server page: switch it on; the SDK sees the loaded model once, by a readable id.
    qtbot.mouseClick(window.rail.buttons[SERVER], Qt.MouseButton.LeftButton)
    port = free_port()
    window.server_pane.form.port.setValue(port)
    window.server_pane.form.flush()
    qtbot.mouseClick(window.status.server_toggle.switch, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.server.state == "running", timeout=WAIT)
    base_url = window.server.base_url
    assert base_url == f"http://127.0.0.1:{port}/v1"
    with openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0) as client:
        listed = client.models.list().data
        loaded_entries = [m for m in listed if getattr(m, "state", None) == "loaded"]
        assert len(loaded_entries) == 1, [m.id for m in listed]
        model_id = loaded_entries[0].id
        assert model_id == f"{REPO}/{FILE}"  # its library id (as `ember ls` shows), no path
        reply = client.chat.completions.create(
            model=model_id,
            messages=[{"role": "user", "content": "Hi"}],
            max_tokens=8,
            temperature=0,
            logit_bias={"1": -100, "106": -100},  # no end of turn: some text, every time
        )
    assert reply.choices[0].message.content
    assert [m.path for m in engine.worker.loaded_models()] == [str(target)]  # no second load
    qtbot.waitUntil(lambda: window.server.request_log.records() != [], timeout=WAIT)
