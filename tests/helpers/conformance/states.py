"""Building the states the conformance suite looks at: a chat holding every kind of message, the
pages with their content (Discover with a repository open, a download, the request log), and
each dialog and panel. Everything is fake but drawn by the real widgets: the messages come from
the store, the Hub from tests/helpers/hub_server.py, answers from the fake worker.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from app.config import paths
from app.server.requestlog import RequestRecord
from app.ui.loaded_models import LoadedModelsButton
from app.ui.main_window import MainWindow
from app.ui.nav_rail import CHATS, MODELS, SERVER
from app.ui.toast import Toast
from tests.helpers.gguf_writer import gguf_bytes
from tests.helpers.hub_server import FakeHub, FakeRepo

LONG_TITLE = "Capital cities of Europe and the rivers that run through each of them"
REPO = "bartowski/Qwen2.5-Coder-7B-Instruct-GGUF"
WAIT_MS = 20_000

ANSWER = """Here is a **summary** with a list, a quote and some code:

1. Paris lies on the Seine.
2. Vienna and Budapest lie on the Danube.

> Rivers were the highways of the old world.

```python
def capitals(rivers: dict[str, list[str]]) -> list[str]:
    return sorted(city for cities in rivers.values() for city in cities)
```

| City | River |
| --- | --- |
| Prague | Vltava |
"""


def loaded_models_button(window: MainWindow) -> LoadedModelsButton:
    """The status bar's loaded models, once it knows the fake model is loaded."""
    button = window.status.loaded_models
    assert button is not None
    deadline = time.monotonic() + WAIT_MS / 1000
    while not button.residents and time.monotonic() < deadline:
        QApplication.processEvents()
        time.sleep(0.01)
    return button


def settle() -> None:
    for _ in range(3):
        QApplication.processEvents()


def fill_chat(window: MainWindow) -> str:
    """A conversation with every kind of message; returns its id (and opens it)."""
    store = window.services.store
    conversation = store.create_conversation(LONG_TITLE)
    for n in range(3):
        store.create_conversation(f"Older chat {n}: a question about something else entirely")
    cid = conversation.id
    sha = hashlib.sha256(b"report").hexdigest()
    store.add_message(
        cid,
        "user",
        "What do the attached files say about rivers?",
        metadata={
            "attachments": [
                {"name": "annual-report-2024-final-version.pdf", "size": 803_000, "pages": 40,
                 "sha256": sha, "suffix": ".pdf"},
                {"name": "notes.md", "size": 1_200, "sha256": sha, "suffix": ".md"},
            ]
        },
    )  # fmt: skip
    stats = {
        "model": "Qwen2.5-Coder-7B-Instruct-Q4_K_M",
        "tokens": 2048,
        "prompt_tokens": 60,
        "cached_tokens": 29,
        "ttft": 0.42,
        "tps": 23.5,
        "generation_seconds": 87.1,
        "finish_reason": "length",
    }
    store.add_message(
        cid,
        "assistant",
        ANSWER,
        metadata={
            **stats,
            "sources": [
                {"file": "annual-report-2024-final-version.pdf", "where":
                 "annual-report-2024-final-version.pdf, page 16", "text": "The Danube…"},
                {"file": "notes.md", "where": 'notes.md, section "Rivers of Central Europe"',
                 "text": "Vltava"},
            ],
        },
    )  # fmt: skip
    store.add_message(cid, "user", "What time is it in Prague?")
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_current_time", "arguments": '{"timezone": "Europe/Prague"}'},
    }
    store.add_message(cid, "assistant", "", metadata={"tool_calls": [call], **stats})
    store.add_message(
        cid,
        "tool",
        '{"time": "2026-12-05T03:10:00+01:00"}',
        metadata={
            "tool_call_id": "call_1",
            "name": "get_current_time",
            "server": "time",
            "tool": "get_current_time",
            "decision": "allow",
            "output": {"content": [{"type": "text", "text": '{"time": "03:10"}'}]},
        },
    )
    store.add_message(cid, "assistant", "It is ten past three in the morning in Prague.",
                      metadata=stats)  # fmt: skip
    store.add_message(cid, "user", "And a longer story, please.")
    store.add_message(cid, "assistant", "Once upon a time", status="stopped", metadata=stats)
    store.add_message(
        cid,
        "assistant",
        "",
        status="error",
        metadata={"error": "The model stopped answering: out of memory while reading the "
                  "prompt. Close other programs or pick a smaller model."},
    )  # fmt: skip
    window.controller.open_conversation(cid)
    window.sidebar.request_refresh()  # made in the store directly: list them
    settle()
    return cid


def ask_for_a_tool(window: MainWindow) -> None:
    """The card that asks before a tool runs, above the composer."""
    from app.tools.loop import ToolCall

    call = ToolCall(
        "call_2", "time__get_current_time", '{"timezone": "Europe/Prague"}', "time",
        "get_current_time",
    )  # fmt: skip
    window.chat.tool_panel.show_request(call)


def settle_tool_call(window: MainWindow) -> None:
    window.chat.tool_panel.clear()


def attach_a_file(qtbot: QtBot, window: MainWindow) -> None:
    """A file attached to the message being written: its chip, once read."""
    path = paths().home / "meeting-notes-for-the-quarterly-review.md"  # the test's EMBER_HOME
    path.write_text("# Notes\n\nThe Danube flows through four capitals.\n", "utf-8")
    composer = window.chat.composer
    composer.attach_files([path])
    qtbot.waitUntil(lambda: not composer.attachments.reading, timeout=WAIT_MS)


def show_banner(window: MainWindow) -> None:
    window.chat.banner.show_message(
        "error",
        "This file is not a GGUF model: it starts with something else. Pick a .gguf file.",
        [("Open another file…", lambda: None)],
    )


def show_toast(window: MainWindow) -> None:
    Toast.show_in(window, f"“{LONG_TITLE}” deleted", "Undo", lambda: None)


def log_record(n: int) -> RequestRecord:
    return RequestRecord(
        n, time.time(), "POST", "/v1/chat/completions", 200, 12.34,
        "Qwen2.5-Coder-7B-Instruct-Q4_K_M", 12345, 23456, True, "127.0.0.1", "{}", "{}", None,
    )  # fmt: skip


def hub_repos(hub: FakeHub) -> None:
    quants = ("Q2_K", "Q4_K_M", "Q5_K_M", "Q8_0")
    stem = "Qwen2.5-Coder-7B-Instruct"
    files: dict[str, object] = {f"{stem}-{q}.gguf": gguf_bytes(quant=q, name=stem) for q in quants}
    card = "# Qwen2.5 Coder\n\nA model for code. " + "It writes code well. " * 30
    hub.add(FakeRepo(REPO, files, card=card, downloads=803_412, likes=1_234))
    for n in range(5):
        name = f"someone-with-a-long-name/Model-Number-{n}-with-a-long-name-GGUF"
        hub.add(FakeRepo(name, {f"m{n}-Q4_K_M.gguf": gguf_bytes(quant="Q4_K_M")},
                         downloads=10**n, likes=n))  # fmt: skip


def search_discover(qtbot: QtBot, window: MainWindow) -> None:
    """Discover's results (most downloaded first)."""
    window.show_page(MODELS)
    pane = window.models_pane
    pane.show_tab("discover")
    pane.activate()
    qtbot.waitUntil(lambda: REPO in [r.id for r in pane.discover.results], timeout=WAIT_MS)
    settle()


def open_discover_repo(qtbot: QtBot, window: MainWindow) -> None:
    search_discover(qtbot, window)
    pane = window.models_pane
    pane.discover.open_result(REPO)
    qtbot.waitUntil(lambda: bool(pane.detail.rows), timeout=WAIT_MS)
    settle()


def start_a_download(qtbot: QtBot, window: MainWindow, hub: FakeHub) -> None:
    """A download under way (the Hub sends it slowly), for the Downloads tab."""
    from app.library.download_state import DownloadState

    hub.throttle_bps = 200
    pane = window.models_pane
    pane.detail.rows["Qwen2.5-Coder-7B-Instruct-Q8_0.gguf"].button.click()

    def running() -> bool:
        return any(d.state == DownloadState.DOWNLOADING for d in pane.bridge.downloads.values())

    qtbot.waitUntil(running, timeout=WAIT_MS)
    settle()


def pause_downloads(qtbot: QtBot, window: MainWindow, hub: FakeHub) -> None:
    """Pause what runs (so nothing is left downloading), and let the Hub answer quickly."""
    from app.library.download_state import DownloadState

    pane = window.models_pane
    for download in list(pane.bridge.downloads.values()):
        row = pane.downloads.row(download.id)
        if row is not None and download.state == DownloadState.DOWNLOADING:
            row.primary.click()
    qtbot.waitUntil(
        lambda: all(d.state != DownloadState.DOWNLOADING for d in pane.bridge.downloads.values()),
        timeout=WAIT_MS,
    )
    hub.throttle_bps = None


def fill_server_log(window: MainWindow) -> None:
    window.show_page(SERVER)
    panel = window.server_pane.log_panel
    for n in range(4):
        panel.add_record(log_record(n))
    settle()


def back_to_chats(window: MainWindow) -> None:
    window.show_page(CHATS)
    settle()


State = Callable[[], QWidget]
