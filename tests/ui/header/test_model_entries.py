"""The picker's entries: a base model (no chat template) says so, in the picker and once in
the chat; the same GGUF reached by two paths is one entry that lists its locations."""

from __future__ import annotations

import shutil
from pathlib import Path

from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.config import Settings
from app.library.local import Library
from app.library.same_file import group_same
from app.ui.header.model_list import BASE_NOTICE, ModelChoices, remember_model
from app.ui.main_window import MainWindow
from tests.helpers.gguf_writer import write_gguf
from tests.helpers.window import send

CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}"


def _library(tmp_path: Path, *folders: Path) -> Library:
    return Library(
        tmp_path / "models", extra_dirs=folders, hf_cache_dir=tmp_path / "hf", lmstudio_dirs=()
    )


def test_the_same_file_in_two_folders_is_one_entry_listing_both(
    qtbot: QtBot, ember_app: QApplication, tmp_path: Path
) -> None:
    downloads, disk = tmp_path / "downloads", tmp_path / "disk"
    first = write_gguf(downloads / "gemma-3-270m-Q4_K_M.gguf", chat_template=CHATML, payload=4096)
    second = disk / "gemma-3-270m-q4_k_m.gguf"
    disk.mkdir()
    shutil.copyfile(first, second)  # a copy, not a link: the same size and content
    other = write_gguf(disk / "other-Q4_K_M.gguf", name="Other", chat_template=CHATML, payload=4096)
    # the same size but other content stays its own entry
    assert other.stat().st_size == first.stat().st_size
    settings = Settings()
    catalog = ModelChoices(settings, _library(tmp_path, downloads))
    remember_model(settings, str(second))  # "Open GGUF file…" on the copy
    remember_model(settings, str(other))
    catalog.refresh()
    qtbot.waitUntil(lambda: len(catalog.models) == 2)
    entry = next(m for m in catalog.models if m.path == str(first))
    assert entry.locations == (str(first), str(second))
    assert entry.detail.endswith("· 2 places")
    assert str(first) in entry.tooltip and str(second) in entry.tooltip
    assert "2 places" in entry.tooltip
    assert not entry.base


def test_files_are_read_only_when_their_sizes_match(tmp_path: Path) -> None:
    a = write_gguf(tmp_path / "a.gguf", payload=100)
    b = write_gguf(tmp_path / "b.gguf", payload=9000)
    link = tmp_path / "link.gguf"
    link.symlink_to(a)
    assert group_same([(a, a.stat().st_size), (b, b.stat().st_size), (link, a.stat().st_size)]) == [
        [0, 2],
        [1],
    ]


def test_a_base_model_is_marked_in_the_picker(
    qtbot: QtBot, ember_app: QApplication, tmp_path: Path
) -> None:
    folder = tmp_path / "mine"
    base = write_gguf(folder / "base-Q4_K_M.gguf")  # no chat template
    chat = write_gguf(folder / "chat-Q4_K_M.gguf", name="Chat", chat_template=CHATML)
    catalog = ModelChoices(Settings(), _library(tmp_path, folder))
    catalog.refresh()
    qtbot.waitUntil(lambda: len(catalog.models) == 2)
    by_path = {m.path: m for m in catalog.models}
    assert by_path[str(base)].base and by_path[str(base)].detail.startswith("Base model · ")
    assert "it continues text; for chat pick an instruct model" in by_path[str(base)].tooltip
    assert not by_path[str(chat)].base and "Base" not in by_path[str(chat)].detail


def test_the_chat_says_once_that_the_loaded_model_is_a_base_model(
    qtbot: QtBot, window: MainWindow
) -> None:
    loaded = window.services.engine.loaded
    assert loaded is not None and not loaded.chat_template  # the test model is a base model
    window.services.engine.model_loaded.emit(loaded)  # what a load ends with
    banner = window.chat.banner
    assert banner.isVisible() and BASE_NOTICE in banner.text.text()
    assert BASE_NOTICE.split(":")[1].strip() in window.header.picker.button.toolTip()
    send(qtbot, window, "Hello")
    assert not banner.isVisible()  # not repeated under the answer
    send(qtbot, window, "Again")
    assert not banner.isVisible()


def test_the_models_page_lists_the_same_file_once_with_its_places(
    qtbot: QtBot, ember_app: QApplication, tmp_path: Path
) -> None:
    from app.ui.models.my_models import MyModelsView
    from app.ui.models.widgets import Chip
    from app.ui.task_runner import Lane

    ember = tmp_path / "models" / "google" / "gemma-3-270m-GGUF" / "gemma-3-270m-Q4_K_M.gguf"
    write_gguf(ember, chat_template=CHATML, payload=4096)
    mine = tmp_path / "mine"
    mine.mkdir()
    copy = mine / "gemma-3-270m-q4_k_m.gguf"
    shutil.copyfile(ember, copy)
    library = Library(tmp_path / "models", [mine], tmp_path / "hf", lmstudio_dirs=())
    view = MyModelsView(library, Settings(tmp_path / "settings.json"), Lane("library", 1))
    qtbot.addWidget(view)
    view.refresh()
    qtbot.waitUntil(lambda: view.scanned)
    assert len(view.models) == 1 and len(view.rows) == 1
    row = next(iter(view.rows.values()))
    assert row.places == (ember, copy)
    chips = [c for c in row.findChildren(Chip) if c.text() == "2 places"]
    assert chips and str(copy) in chips[0].toolTip()
