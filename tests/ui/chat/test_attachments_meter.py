"""The context meter under the composer counts the files attached but not sent yet (issue 13):
it grows when a file is read and shrinks when its chip is removed, and its tooltip says in
words whether a file goes in whole or only its most relevant passages do.

On the fake engine of test_attachments_send.py (a 4096-token context): what is measured is
the meter's estimate, which follows ``build_context``'s rule (whole files within 75% of the
room, else about the retrieval budget)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.attachments.context import TOP_K
from app.engine.fitting import estimate_tokens
from app.ui.chat.composer import AttachedCost
from app.ui.main_window import MainWindow
from tests.helpers.attaching import ATTACH_CTX, RECORDING, attach
from tests.helpers.builders import long_pdf
from tests.helpers.fake_app import WAIT_MS

FAKE_ENGINE = RECORDING


NOTE = "The tide at Ardmore Point turns at seven.\n" * 40  # about 1,600 characters


def _key(window: MainWindow, name: str) -> int:
    return next(f.key for f in window.controller.attachments.files if f.name == name)


def test_the_meter_grows_with_each_file_read_and_shrinks_when_one_is_removed(
    qtbot: QtBot, ember_app: QApplication, window: MainWindow, tmp_path: Path
) -> None:
    meter = window.chat.composer.meter
    qtbot.waitUntil(lambda: meter.total == ATTACH_CTX, timeout=WAIT_MS)
    before = meter.used
    note = tmp_path / "note.txt"
    note.write_text(NOTE, encoding="utf-8")

    attach(qtbot, window, note)
    qtbot.waitUntil(lambda: meter.used > before, timeout=WAIT_MS)
    with_note = meter.used
    assert with_note - before >= estimate_tokens(NOTE)  # the whole file, named and delimited
    assert meter.attached.whole == ("note.txt",)
    assert "note.txt goes in whole" in meter.toolTip()
    assert f"(files ~{meter.attached.tokens:,})" in meter.label.text()

    pdf = long_pdf(tmp_path / "report.pdf")
    attach(qtbot, window, pdf)
    qtbot.waitUntil(lambda: meter.used > with_note, timeout=WAIT_MS)
    assert meter.attached.retrieved == ("report.pdf",)
    tip = meter.toolTip()
    assert "report.pdf is too long to go in whole" in tip
    assert f"only the passages most relevant to your question go in (up to {TOP_K})" in tip
    assert meter.used < ATTACH_CTX  # capped by the room, not the PDF's 40 pages of text

    window.controller.attachments.remove(_key(window, "report.pdf"))
    assert meter.used == with_note
    assert "report.pdf" not in meter.toolTip()
    window.controller.attachments.remove(_key(window, "note.txt"))
    assert meter.used == before
    assert meter.attached == AttachedCost()
    assert "files" not in meter.label.text()


def test_a_file_still_being_read_is_named_and_not_counted(
    qtbot: QtBot, ember_app: QApplication, window: MainWindow, tmp_path: Path
) -> None:
    composer = window.chat.composer
    qtbot.waitUntil(lambda: composer.meter.total == ATTACH_CTX, timeout=WAIT_MS)
    big = tmp_path / "big.txt"
    big.write_text("words " * 200_000, encoding="utf-8")
    composer.attach_files([big])
    # Its result comes back through the GUI thread's event loop, which has not run yet.
    assert composer.attached_cost() == AttachedCost(reading=("big.txt",))
    assert "big.txt is still being read and not counted yet" in composer.meter.toolTip()
    qtbot.waitUntil(lambda: not window.controller.attachments.reading, timeout=WAIT_MS)
    assert composer.meter.attached.retrieved == ("big.txt",)
