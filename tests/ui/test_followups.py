"""Loose ends: one home for the sampling defaults, registered settings, background work on the
task runner, damaged chat history and key errors shown to the user, private log files. No model
is loaded here."""

from __future__ import annotations

import ast
import logging
import logging.handlers
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtWidgets import QApplication, QLineEdit, QPushButton, QScrollArea, QToolButton
from pytestqt.qtbot import QtBot

from app.config import SETTINGS, Settings, paths
from app.engine.load_settings import KV_CACHE_CHOICES
from app.engine.remote import ProbeResult
from app.engine.types import ChatRequest, Finished, Request, SamplingParams
from app.engine.worker import EngineWorker, Job, Sink
from app.library.local import Library
from app.ui.bridge import EngineBridge
from app.ui.errors import setup_file_logging
from app.ui.header import model_list
from app.ui.main_window import MainWindow
from app.ui.models.my_models import MyModelsView
from app.ui.settings import presets, provider_editor
from app.ui.settings.settings_dialog import SettingsDialog
from app.ui.task_runner import Lane, tasks
from tests.helpers.damaged_db import damage_page_holding, fill, garbage, page_size
from tests.helpers.fake_model import fake_factory, fake_load_params
from tests.helpers.gguf_writer import write_gguf

ENGINE_WORKER = "idle_worker"  # no model: these tests only look at the window


ROOT = Path(__file__).resolve().parents[2]
SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repeat_penalty")


@pytest.mark.parametrize("name", SAMPLING_FIELDS)
def test_sampling_defaults_and_the_balanced_preset_are_the_engines(name: str) -> None:
    engine = getattr(SamplingParams(), name)
    assert SETTINGS[f"sampling.{name}"].default == engine
    assert presets.PRESETS["Balanced"][name] == engine


def test_a_new_user_starts_on_the_balanced_preset(tmp_path: Path) -> None:
    settings = Settings(tmp_path / "settings.json")
    assert presets.preset_matching(presets.global_defaults(settings)) == "Balanced"


def test_keeping_the_sidebar_in_narrow_windows_is_a_registered_setting(tmp_path: Path) -> None:
    settings = Settings(tmp_path / "settings.json")
    assert settings.get("ui.sidebar_narrow") is False
    settings.set("ui.sidebar_narrow", True)
    assert Settings(tmp_path / "settings.json").get("ui.sidebar_narrow") is True
    with pytest.raises(TypeError):
        settings.set("ui.sidebar_narrow", "yes")


# -- background work on the task runner's network lane --------------------------------------


def test_a_remote_request_starts_on_the_network_lane(qtbot: QtBot, qapp: QApplication) -> None:
    """A provider that hangs while a request starts holds a network thread, never the GUI or a
    thread of its own that nobody shuts down."""
    worker = EngineWorker(model_factory=fake_factory(tokens_per_second=4000))
    worker.load("fake.gguf", fake_load_params()).result(10)
    threads: list[str] = []

    def via(request: Request, sink: Sink) -> Job:
        threads.append(threading.current_thread().name)
        return worker.submit(request, sink)

    try:
        bridge = EngineBridge(worker)
        handle = bridge.submit(
            ChatRequest([{"role": "user", "content": "go"}], SamplingParams(max_tokens=5)), via
        )
        with qtbot.waitSignal(handle.finished, timeout=30_000) as blocker:
            pass
        assert isinstance(blocker.args[0], Finished)
        assert threads == ["ember-network"]
    finally:
        worker.shutdown()


def test_test_connection_waits_on_the_network_lane(
    qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []

    class Engine:
        def probe(self) -> ProbeResult:
            threads.append(threading.current_thread().name)
            return ProbeResult(["tiny-model"], 0.01)

        def shutdown(self) -> None:
            pass

    monkeypatch.setattr(provider_editor, "engine_for", lambda *_args: Engine())
    window.open_settings()
    dialog = window.settings_dialog
    assert dialog is not None
    dialog.show_page("Providers")
    dialog.providers_page.add_provider()
    editor = dialog.providers_page.editor
    editor.name.setText("gpu-box")
    editor.url.setText("http://127.0.0.1:9/v1")
    qtbot.mouseClick(editor.test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: editor.result.property("kind") == "ok")
    assert threads == ["ember-network"]
    dialog.reject()


def test_my_models_rescans_when_asked_while_an_import_runs(
    qtbot: QtBot, ember_app: QApplication, tmp_path: Path
) -> None:
    """The library's runner is busy with something else (an import, a delete): a refresh asked
    meanwhile still scans once it is free."""
    library = Library(tmp_path / "models", hf_cache_dir=tmp_path / "hf", lmstudio_dirs=())
    lane = Lane("library", 1, wait_on_quit=False)
    view = MyModelsView(library, Settings(tmp_path / "settings.json"), lane)
    qtbot.addWidget(view)
    release = threading.Event()
    held: list[object] = []
    tasks().submit(lambda: release.wait(10), held.append, lane=lane)
    model = write_gguf(tmp_path / "models" / "alice" / "Tiny-GGUF" / "Tiny-Q4_K_M.gguf")
    view.refresh()
    release.set()
    qtbot.waitUntil(lambda: [m.path for m in view.models] == [model])
    assert held == [True]


@pytest.mark.parametrize("asks", [1, 3])
def test_the_model_list_scans_on_the_task_runner_once_more_when_asked_mid_scan(
    qtbot: QtBot,
    ember_app: QApplication,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    asks: int,
) -> None:
    """A download that finishes while the picker's list is being scanned still shows up: asked
    once or again and again mid-scan, the list is scanned once more."""
    release = threading.Event()
    calls: list[int] = []
    new = model_list.ModelEntry(str(tmp_path / "new.gguf"), "new", 1, "1 B")

    def scan(_settings: object, _library: object) -> list[model_list.ModelEntry]:
        calls.append(1)
        if len(calls) == 1:
            release.wait(10)  # the first scan started before the file arrived
            return []
        return [new]

    monkeypatch.setattr(model_list, "scan_models", scan)
    catalog = model_list.ModelChoices(Settings(tmp_path / "settings.json"), Library())
    changes: list[list[model_list.ModelEntry]] = []
    catalog.models_changed.connect(changes.append)
    catalog.refresh()
    qtbot.waitUntil(lambda: len(calls) == 1)
    assert [t.name for t in tasks().pending()] == ["list the models"]
    for _ in range(asks):  # the download finished: asks while the first scan runs
        catalog.refresh()
    release.set()
    qtbot.waitUntil(lambda: catalog.models == [new])
    qtbot.waitUntil(lambda: not tasks().busy())
    assert len(calls) == 2
    assert changes == [[new]]  # the first scan changed nothing: no signal


# -- a damaged chat history is said in the window, not only in the log -----------------------


def damaged_history_window(make_window: Callable[[], MainWindow]) -> MainWindow:
    """A window on a healthy history of 150 chats whose store reads every page from the disk
    (a history larger than SQLite's cache), so damage done now is met by the next read."""
    fill(paths().ensure().chats_db, 150)
    window = make_window()
    conn = window.services.store._conn
    assert conn is not None and window.services.store.recovery is None
    conn.execute("PRAGMA cache_size = 1")
    conn.execute("PRAGMA mmap_size = 0")
    # Start-up wrote (the unfinished answers fill left are marked stopped): into the file.
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return window


def chat_id(window: MainWindow, title: str) -> str:
    return next(c.id for c in window.services.store.list_conversations() if c.title == title)


def shows_damage(window: MainWindow) -> bool:
    banner = window.chat.banner
    text = banner.text.text()
    return (
        banner.isVisible()
        and text.startswith("The chat history was damaged")
        and (".damaged-" in text)
    )


def test_a_history_damaged_before_start_is_said_when_the_window_opens(
    make_window: Callable[[], MainWindow],
) -> None:
    db = paths().ensure().chats_db
    fill(db, 30)
    size = page_size(db)
    garbage(db, db.stat().st_size // 2 // size * size)
    window = make_window()
    assert window.services.store.recovery is not None
    assert shows_damage(window)
    assert window.sidebar.list.conversation_ids()  # what was recovered is listed


def test_damage_met_by_a_rename_is_said_and_the_sidebar_lists_the_recovered_history(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window = damaged_history_window(make_window)
    db = paths().chats_db
    conversation_id = chat_id(window, "title-0060")
    damage_page_holding(db, "title-0060")
    assert not window.sidebar.apply_rename(conversation_id, "Renamed")
    assert shows_damage(window)
    store = window.services.store
    assert store.recovery is not None
    recovered = [c.id for c in store.list_conversations()]
    qtbot.waitUntil(lambda: window.sidebar.list.conversation_ids() == recovered)


def test_damage_met_when_opening_a_chat_is_said_and_it_opens_from_the_recovered_history(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window = damaged_history_window(make_window)
    db = paths().chats_db
    conversation_id = chat_id(window, "title-0060")
    damage_page_holding(db, "answer-0060")
    refreshed: list[bool] = []
    window.controller.conversations_changed.connect(lambda: refreshed.append(True))
    window.controller.open_conversation(conversation_id)  # raised StoreDamagedError before
    assert shows_damage(window)
    assert refreshed  # the sidebar lists the recovered history
    opened = window.controller.conversation
    assert opened is not None and opened.id == conversation_id
    assert window.services.store.recovery is not None


# -- the Server page's words ----------------------------------------------------------------


def test_a_short_api_key_on_the_network_is_refused_in_the_pages_words(window: MainWindow) -> None:
    server = window.server
    server.update_settings(host="0.0.0.0", api_key="sk-short")  # an API key, but 8 characters
    messages: list[str] = []
    server.start_failed.connect(messages.append)
    server.set_enabled(True)
    assert messages == [
        "The API key is too short to guard the local network (16 characters or more). Generate one."
    ]
    assert server.state == "failed" and not server.settings.get("server.enabled")


# -- private files ----------------------------------------------------------------------------


def test_the_log_and_its_rotated_files_are_readable_by_the_user_only(
    ember_app: QApplication,
) -> None:
    root = logging.getLogger()
    before = list(root.handlers)
    logs = paths().logs_dir
    old_umask = os.umask(0o022)  # the usual umask: files 0644 unless made private
    try:
        path = setup_file_logging()
        (handler,) = [h for h in root.handlers if h not in before]
        assert isinstance(handler, logging.handlers.RotatingFileHandler)
        logging.getLogger("ember.test").warning("a chat title")
        handler.flush()
        assert "a chat title" in path.read_text(encoding="utf-8")
        handler.doRollover()
        logging.getLogger("ember.test").warning("after the rollover")
        handler.flush()
    finally:
        os.umask(old_umask)
        for added in [h for h in root.handlers if h not in before]:
            root.removeHandler(added)
            added.close()
    assert stat.S_IMODE(logs.stat().st_mode) == 0o700
    for file in (path, path.with_name(path.name + ".1")):
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file


# -- one home for each rule -------------------------------------------------------------------


def test_the_ui_takes_load_parameters_and_kv_cache_types_from_the_engine() -> None:
    """Load parameters and the KV cache choices live in app/engine/load_settings.py; the GUI
    keeps no copy that could drift (the loader, the fit badge and the server agree)."""
    copies = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted((ROOT / "app" / "ui").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if (isinstance(node, ast.FunctionDef) and node.name == "load_params")
        or (
            isinstance(node, ast.Constant)
            and node.value in ("q8_0 (half the memory)", "q4_0 (a quarter)")
        )
    ]
    assert copies == []


def test_the_settings_dialog_offers_the_engines_kv_cache_choices(window: MainWindow) -> None:
    window.open_settings()
    dialog = window.settings_dialog
    assert dialog is not None
    box = dialog.cache_type
    offered = {box.itemData(i): box.itemText(i) for i in range(box.count())}
    assert offered == KV_CACHE_CHOICES
    dialog.reject()


# -- the Settings dialog at its smallest size ---------------------------------------------------


def smallest_settings(window: MainWindow, page: str) -> SettingsDialog:
    window.open_settings()
    dialog = window.settings_dialog
    assert dialog is not None
    dialog.resize(dialog.minimumSize())
    dialog.show_page(page)
    QApplication.processEvents()
    return dialog


def test_every_theme_card_is_whole_at_the_dialogs_smallest_size(window: MainWindow) -> None:
    dialog = smallest_settings(window, "Appearance")
    scroll = dialog.pages.currentWidget()
    assert isinstance(scroll, QScrollArea)
    viewport = scroll.viewport()
    for value in ("system", "light", "dark"):
        card = dialog.findChild(QToolButton, f"theme_{value}")
        assert card is not None
        shown = QRect(card.mapTo(viewport, QPoint(0, 0)), card.size())
        assert viewport.rect().contains(shown), (value, shown, viewport.rect())
        assert card.width() >= card.sizeHint().width()  # not squeezed either
    dialog.reject()


def test_the_data_pages_open_buttons_stand_apart_from_their_fields(window: MainWindow) -> None:
    dialog = smallest_settings(window, "Data")
    buttons = [b for b in dialog.findChildren(QPushButton) if b.text() == "Open"]
    fields = [f for f in dialog.findChildren(QLineEdit) if f.objectName().startswith("path_")]
    assert len(buttons) == len(fields) == 4
    for button in buttons:
        row = button.geometry().center().y()
        (field,) = [f for f in fields if f.geometry().top() <= row <= f.geometry().bottom()]
        assert button.geometry().left() - field.geometry().right() >= 6
    dialog.reject()
