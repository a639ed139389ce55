"""Where and how the conformance suite saves its screenshots, and the sizes and themes it walks."""

from __future__ import annotations

import os
import re
from pathlib import Path

from PySide6.QtWidgets import QWidget

# the minimum; the default window on a 1024x640 screen; the default window on a 1280x800
# screen (92% of it); a 1280x800 window; a 1920x1080 one
SIZES = [(640, 480), (942, 588), (1177, 736), (1280, 800), (1920, 1080)]
THEMES = ["light", "dark"]
ROOT = Path(__file__).resolve().parents[3]


def shots_folder() -> Path:
    return Path(os.environ.get("EMBER_GUI_SHOTS") or ROOT / "build" / "gui-conformance")


class Shots:
    """Writes one PNG per state: ``<folder>/<size>-<theme>/<nn>-<state>.png``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0

    def save(self, widget: QWidget, state: str) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.count += 1
        name = re.sub(r"[^a-z0-9]+", "-", state.lower()).strip("-")
        path = self.folder / f"{self.count:02d}-{name}.png"
        widget.grab().save(str(path))
        return path
