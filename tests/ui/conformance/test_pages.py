"""Every page, panel, popup and dialog at 640×480 (the minimum), 942×588, 1280×800 and
1920×1080, light and dark: no text cut without "…", nothing outside its parent or over a
sibling, no sideways scroll bar where text should wrap, every control named and reachable from
the keyboard, the window never larger than the screen. Screenshots of every state go to
``EMBER_GUI_SHOTS`` (default ``build/gui-conformance/``)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSize
from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from tests.helpers.conformance import known
from tests.helpers.conformance.shots import SIZES, THEMES, Shots, shots_folder
from tests.helpers.conformance.walk import walk_everything
from tests.helpers.hub_server import FakeHub

pytestmark = pytest.mark.gui_conformance


@pytest.mark.parametrize("themed", THEMES, indirect=True)
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_state_is_readable_and_whole(
    qtbot: QtBot,
    conformance_window: MainWindow,
    hub: FakeHub,
    themed: str,
    size: tuple[int, int],
) -> None:
    shots = Shots(shots_folder() / f"{size[0]}x{size[1]}-{themed}")
    problems = walk_everything(qtbot, conformance_window, shots, QSize(*size), hub)
    shots.folder.mkdir(parents=True, exist_ok=True)
    (shots.folder / "problems.txt").write_text("\n".join(problems) + "\n", "utf-8")
    problems, gone = known.sort_out(problems, size)
    assert not gone, f"known problems no longer seen (take them off known.py): {gone}"
    assert not problems, "\n".join(problems)
