"""Attaching files in the composer (issue 13, item 1): chips with name, size and pages once the
file is read off the GUI thread; a file Ember cannot read says why on its chip and does not
block sending; removing a chip removes the file (and stops its reading); files dropped on the
chat or pasted into the message box are attached. Real files, built as the core's tests build
them; a fake engine (nothing is sent to a model here)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, QUrl
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.attachments.store import attachments_dir
from app.ui.chat.attachments_bar import CHIP_WIDTH, LEFT_OUT
from app.ui.main_window import MainWindow
from tests.helpers.attaching import chip_texts, drop_files
from tests.helpers.builders import long_pdf, pdf_bytes_garbage
from tests.helpers.fake_app import WAIT_MS, FakeEngine

FAKE_ENGINE = FakeEngine()  # the `window` fixture is on the fake engine


def chips_settled(window: MainWindow) -> bool:
    return not window.controller.attachments.reading


def test_text_markdown_and_pdf_show_their_name_size_and_pages(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("The tide turns at noon.\n" * 100, encoding="utf-8")
    readme = tmp_path / "readme.md"
    readme.write_text("# Title\n\nSome words.\n", encoding="utf-8")
    report = long_pdf(tmp_path / "report.pdf", pages=12)
    composer = window.chat.composer
    composer.set_text("What do these say?")
    composer.attach_files([notes, readme, report])

    assert composer.attachments_bar.isVisible()
    assert set(chip_texts(window)) == {"notes.txt", "readme.md", "report.pdf"}
    assert all(d == "Reading… 0%" for d in chip_texts(window).values())
    assert not composer.send_button.isEnabled()  # sending waits for the files to be read
    qtbot.waitUntil(lambda: chips_settled(window), timeout=WAIT_MS)
    shown = chip_texts(window)
    assert shown["notes.txt"] == "2.4 KB"
    assert shown["readme.md"] == "21 B"
    assert shown["report.pdf"].endswith(" · 12 pages")
    assert composer.send_button.isEnabled()
    # Each was copied into EMBER_HOME by its hash.
    stored = [f for f in attachments_dir().rglob("*") if f.is_file()]
    assert {p.suffix for p in stored} == {".txt", ".md", ".pdf"}


def test_a_garbage_pdf_says_why_on_its_chip_and_does_not_block_the_others(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(pdf_bytes_garbage())
    good = tmp_path / "good.txt"
    good.write_text("fine", encoding="utf-8")
    composer = window.chat.composer
    composer.set_text("Read these")
    composer.attach_files([good, broken])
    qtbot.waitUntil(lambda: chips_settled(window), timeout=WAIT_MS)

    chip = next(c for c in composer.attachments_bar.chips.values() if "broken" in c.toolTip())
    detail = chip.detail_label.text()
    assert detail.startswith("broken.pdf could not be read as a PDF")
    assert detail.endswith(LEFT_OUT)
    assert chip.property("state") == "error"
    # Alone on its row, as wide as the bar, so its sentence is read in two or three lines.
    bar = composer.attachments_bar
    qtbot.waitUntil(lambda: chip.width() > 2 * CHIP_WIDTH)  # laid out on the next turn
    assert chip.x() == 0 and chip.y() > 0  # under the other file's chip
    assert chip.detail_label.height() >= chip.detail_label.heightForWidth(chip.detail_label.width())
    assert bar.isVisible()
    assert composer.send_button.isEnabled()  # the other file is sent; this one left out


def test_removing_a_chip_removes_the_file_and_stops_its_reading(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    big = long_pdf(tmp_path / "big.pdf", pages=200)
    small = tmp_path / "small.txt"
    small.write_text("small", encoding="utf-8")
    composer = window.chat.composer
    tray = composer.attachments
    big_key, small_key = composer.attachments.add_paths([big, small])
    pending = tray.file(big_key)
    assert pending is not None and pending.task is not None
    task = pending.task

    composer.attachments_bar.chips[big_key].remove_button.click()
    assert tray.file(big_key) is None
    assert big_key not in composer.attachments_bar.chips
    assert pending.cancel.is_set()  # the reading's own cancel flag: it stops at its next step
    qtbot.waitUntil(lambda: task.settled, timeout=WAIT_MS)
    assert task.state == "cancelled"  # and never calls back
    qtbot.waitUntil(lambda: chips_settled(window), timeout=WAIT_MS)
    composer.attachments_bar.chips[small_key].remove_button.click()
    assert not tray.files and not composer.attachments_bar.isVisible()


def test_files_dropped_on_the_chat_become_chips(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    first, second = tmp_path / "a.txt", tmp_path / "b.md"
    first.write_text("one", encoding="utf-8")
    second.write_text("# two", encoding="utf-8")
    drop = drop_files(window.chat, [first, second])
    assert drop.isAccepted()
    assert set(chip_texts(window)) == {"a.txt", "b.md"}
    qtbot.waitUntil(lambda: chips_settled(window), timeout=WAIT_MS)
    assert chip_texts(window)["a.txt"] == "3 B"


def test_a_file_pasted_into_the_message_box_is_attached_not_typed(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    pasted = tmp_path / "pasted.txt"
    pasted.write_text("pasted text", encoding="utf-8")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(pasted))])
    QApplication.clipboard().setMimeData(mime)
    composer = window.chat.composer
    composer.input.setFocus()
    composer.input.paste()
    assert composer.text == ""
    assert set(chip_texts(window)) == {"pasted.txt"}
    qtbot.waitUntil(lambda: chips_settled(window), timeout=WAIT_MS)


def test_a_long_pdf_shows_its_reading_progress_on_its_chip(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    report = long_pdf(tmp_path / "long.pdf", pages=120)
    composer = window.chat.composer
    shown: list[str] = []

    def on_updated(key: int) -> None:
        shown.append(composer.attachments_bar.chips[key].detail_label.text())

    composer.attachments.file_updated.connect(on_updated)  # after the bar's own slot
    composer.attachments.add_paths([report])
    qtbot.waitUntil(lambda: chips_settled(window), timeout=WAIT_MS)
    composer.attachments.file_updated.disconnect(on_updated)

    percents = [int(t.removeprefix("Reading… ").removesuffix("%")) for t in shown[:-1]]
    assert percents == sorted(percents) and len(set(percents)) == len(percents)
    assert any(0 < p < 100 for p in percents)
    assert shown[-1] == chip_texts(window)["long.pdf"] and shown[-1].endswith(" · 120 pages")
