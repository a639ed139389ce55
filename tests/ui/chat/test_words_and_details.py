"""Issue 23's "words and details", each as a person met it: the bad-GGUF error in words, full
stops, a long chat title in its delete toast, the download toast after a failure, blockquotes
with a side bar, source links whole, no stock icons on dialog buttons, one measure of free
memory, an import icon unlike Downloads', two ways to a model not numbered as steps, a sent
file that opens on a click, and sibling arrows only when they work."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QLabel, QStyle
from pytestqt.qtbot import QtBot

from app.chats.models import Message
from app.engine import backends, sizing
from app.engine.gguf import read_gguf
from app.engine.gguf_format import human_bytes
from app.engine.gguf_reader import NotGGUFError
from app.library.download_state import Download, DownloadState
from app.ui import icons, theme
from app.ui.chat.markdown import MarkdownRenderer
from app.ui.chat.message_attachments import AttachmentChips, SourcesLine
from app.ui.chat.message_widget import MessageWidget
from app.ui.main_window import MainWindow
from app.ui.toast import Toast


def test_a_file_that_is_not_a_gguf_is_described_in_words(tmp_path: Path) -> None:
    path = tmp_path / "notes.gguf"
    path.write_text("This is not a model at all.")
    with pytest.raises(NotGGUFError) as info:
        read_gguf(path)
    message = str(info.value)
    assert "the text “This is …”" in message and "b'" not in message
    assert message.endswith("download a .gguf file.")
    binary = tmp_path / "blob.gguf"
    binary.write_bytes(bytes([0x89, 0x50, 0x4E, 0x47, 0, 1, 2, 3]) + bytes(60))
    with pytest.raises(NotGGUFError, match="the bytes 89 50 4E 47 00 01 02 03"):
        read_gguf(binary)


def test_a_load_that_failed_says_so_in_sentences(window: MainWindow, tmp_path: Path) -> None:
    path = tmp_path / "notes.gguf"
    path.write_text("This is not a model at all.")
    try:
        read_gguf(path)
    except NotGGUFError as error:
        window.chat._on_load_failed(str(path), error)  # type: ignore[arg-type]
    text = window.chat.banner.text.text()
    assert "download a .gguf file. Still using " in text and text.endswith(".")


def test_deleting_a_long_titled_chat_names_it(qtbot: QtBot, window: MainWindow) -> None:
    title = "A chat about the tides of the North Sea and the moon's part in them"
    conversation = window.services.store.create_conversation(title=title)
    window.sidebar.refresh()
    window.sidebar.delete(conversation.id)
    toast = window.findChild(Toast)
    assert toast is not None and toast.isVisible()
    assert toast.label.text().startswith("“A chat about the tides of the North")
    assert toast.label.text().endswith("…” deleted") and "“Chat”" not in toast.label.text()


def _download(state: DownloadState) -> Download:
    return Download(
        "d1", "owner/repo", "main", ("model-Q4_K_M.gguf",), state, 10, 1, 0.0, None,
        "network down" if state == DownloadState.FAILED else None, None, None, (),
    )  # fmt: skip


def test_the_downloading_toast_goes_when_the_download_fails(window: MainWindow) -> None:
    pane = window.models_pane
    pane._on_download_started(_download(DownloadState.DOWNLOADING))
    toast = window.findChild(Toast)
    assert toast is not None and toast.isVisible() and "Downloading" in toast.label.text()
    pane.bridge.changed.emit(_download(DownloadState.DOWNLOADING))
    assert toast.isVisible()
    pane.bridge.changed.emit(_download(DownloadState.FAILED))
    assert not toast.isVisible()


def test_blockquotes_have_a_side_bar_and_source_links_stay_whole(
    qtbot: QtBot, ember_app: QApplication
) -> None:
    renderer = MarkdownRenderer(theme.LIGHT)
    html = "".join(getattr(s, "html", "") for s in renderer.segments("> a quoted line"))
    assert f'bgcolor="{theme.LIGHT.border_strong}"' in html and "a quoted line" in html
    line = SourcesLine()
    qtbot.addWidget(line)
    line.set_sources([{"file": "report.pdf", "where": "report.pdf, page 3 / 16"}], [])
    assert "page&nbsp;3&nbsp;/&nbsp;16" in line.text()


def test_dialog_buttons_carry_no_stock_icons(qtbot: QtBot, ember_app: QApplication) -> None:
    box = QDialogButtonBox(
        QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
    )
    qtbot.addWidget(box)
    box.show()
    for button in box.buttons():
        assert button.icon().isNull(), button.text()
    # whatever the desktop's theme says (offscreen has no icons anyway): the app's sheet
    # turns them off (a green arrow on OK on a Linux desktop)
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    assert "dialogbuttonbox-buttons-have-icons: 0" in app.styleSheet()
    hint = QStyle.StyleHint.SH_DialogButtonBox_ButtonsHaveIcons
    assert box.style().styleHint(hint, None, box) == 0


def test_free_memory_is_one_number_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sizing, "available_memory", lambda: 22_500_000_000)
    cpu = backends.Device("CPU", "A CPU", "CPU", "cpu", 25_300_000_000, 32_000_000_000)
    hw = backends.Hardware(
        library_dir="/x",
        dynamic=True,
        backends=("CPU",),
        devices=(cpu,),
        cpu_variant="haswell",
        cpu_features=("AVX2",),
        system_info="",
        not_loaded=(),
    )
    row = dict(backends.describe(hw))["Device CPU"]
    assert f"{human_bytes(22_500_000_000)} free" in row  # what a model's fit badge says


def test_the_import_icon_is_not_the_download_icon(window: MainWindow) -> None:
    assert icons.svg("chat-import", "#000") != icons.svg("download", "#000")
    assert window.sidebar.import_button.property("emberIcon") == "chat-import"


def test_the_two_ways_to_a_model_are_not_numbered(window: MainWindow) -> None:
    empty = window.chat.empty
    empty.show_welcome()
    texts = [label.text() for label in empty.findChildren(QLabel) if label.isVisibleTo(empty)]
    assert "1" not in texts and "2" not in texts
    assert any(t.startswith("Or download") for t in texts)


def test_a_sent_file_opens_on_a_click(
    qtbot: QtBot, ember_app: QApplication, ember_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.attachments.store import stored_path

    data = b"minutes of the meeting"
    sha = hashlib.sha256(data).hexdigest()
    path = stored_path(sha, ".txt")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    opened: list[str] = []

    def open_url(url: QUrl) -> bool:
        opened.append(url.toLocalFile())
        return True

    monkeypatch.setattr(QDesktopServices, "openUrl", open_url)
    chips = AttachmentChips()
    qtbot.addWidget(chips)
    chips.set_files([{"name": "minutes.txt", "sha256": sha, "suffix": ".txt", "size": 22}])
    chips.show()
    from PySide6.QtCore import Qt

    qtbot.mouseClick(chips.chips[0], Qt.MouseButton.LeftButton)
    assert opened == [str(path)]
    assert QUrl.fromLocalFile(opened[0]).isLocalFile()


def test_sibling_arrows_show_only_when_they_work(qtbot: QtBot, ember_app: QApplication) -> None:
    message = Message("m1", "c1", "q1", "assistant", "An answer", "complete", 0.0, {}, 1, 0, 2)
    widget = MessageWidget(message, MarkdownRenderer(theme.LIGHT))
    qtbot.addWidget(widget)
    widget.show()
    assert widget.next_button.isVisibleTo(widget) and widget.sibling_label.isVisibleTo(widget)
    widget.set_answering(True)  # its chat writes an answer: switching would do nothing
    assert not widget.next_button.isVisibleTo(widget) and not widget.previous_button.isVisibleTo(
        widget
    )
    assert widget.sibling_label.text() == "1/2"
    widget.set_answering(False)
    assert widget.next_button.isVisibleTo(widget)


def test_an_answers_stats_line_is_level_with_its_text(
    qtbot: QtBot, ember_app: QApplication
) -> None:
    """Finding 10: an older answer's stats started ~90 px in, after the room its hidden
    Copy/Regenerate/Delete buttons kept. The stats come first now, level with the text."""
    from PySide6.QtCore import QPoint

    meta = {"tokens": 12, "ttft": 0.4, "tps": 30.0, "finish_reason": "stop"}
    message = Message("m1", "c1", "q1", "assistant", "An answer", "complete", 0.0, meta)
    widget = MessageWidget(message, MarkdownRenderer(theme.LIGHT))
    qtbot.addWidget(widget)
    widget.resize(700, 200)
    widget.show()
    qtbot.waitExposed(widget)
    assert widget.body is not None and widget.stats_label.text().startswith("12 tokens")
    text_x = widget.body.mapTo(widget, QPoint(0, 0)).x()
    stats_x = widget.stats_label.mapTo(widget, QPoint(0, 0)).x()
    assert abs(stats_x - text_x) <= 4, (stats_x, text_x)
    assert not widget.copy_button.isVisible()  # not hovered: hidden, and nothing moved for it
