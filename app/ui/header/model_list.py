"""The models the picker offers: the local library if it exists, else ``*.gguf`` files under
the models folder, plus every file the user opened before. Blocking (disk); call it from a
background task.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.config import Settings, paths
from app.engine.gguf import human_bytes
from app.ui.engine_session import model_name
from app.ui.tasks import run_in_background

log = logging.getLogger(__name__)

RECENT_KEY = "ui.recent_models"
MAX_RECENT = 12


@dataclass(frozen=True, slots=True)
class ModelEntry:
    path: str
    name: str
    size: int
    detail: str  # e.g. "Q4_K_M · 241 MB"


def _entry(path: Path) -> ModelEntry | None:
    try:
        size = path.stat().st_size
    except OSError:
        return None
    name = model_name(str(path))
    quant = _quant_of(name)
    detail = " · ".join(x for x in (quant, human_bytes(size)) if x)
    return ModelEntry(str(path), name, size, detail)


_QUANT = re.compile(r"(?:^|[-.])(I?Q\d(?:_[A-Z0-9]+)*|BF16|F16|F32)(?:$|[-.])", re.IGNORECASE)


def _quant_of(name: str) -> str:
    found = _QUANT.findall(name)
    return found[-1].upper() if found else ""


def _library_paths() -> list[Path] | None:
    """Paths from app.library.local when that module exists (another pane owns it)."""
    try:
        from app.library import local  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return None
    try:
        library: Any = local.Library()  # type: ignore[attr-defined,unused-ignore]
        found: list[Path] = []
        for model in library.scan():
            path = getattr(model, "path", None) or getattr(model, "file", None)
            if path:
                found.append(Path(path))
        return found
    except Exception:
        log.warning("The model library could not be scanned; listing files instead", exc_info=True)
        return None


def scan_models(settings: Settings) -> list[ModelEntry]:
    """Every model to offer, library first, then recently opened files; no duplicates."""
    candidates = _library_paths()
    if candidates is None:
        models_dir = paths().models_dir
        candidates = sorted(models_dir.rglob("*.gguf")) if models_dir.is_dir() else []
    recent = [Path(p) for p in settings.get(RECENT_KEY) if isinstance(p, str)]
    seen: set[str] = set()
    entries: list[ModelEntry] = []
    for path in [*candidates, *recent]:
        key = str(path.resolve()) if path.exists() else str(path)
        if key in seen or "mmproj" in path.name.lower() or not path.is_file():
            continue
        seen.add(key)
        entry = _entry(path)
        if entry is not None:
            entries.append(entry)
    return entries


def remember_model(settings: Settings, path: str) -> None:
    """Put a file the user opened at the front of the recent list."""
    recent = [p for p in settings.get(RECENT_KEY) if isinstance(p, str) and p != path]
    settings.set(RECENT_KEY, [path, *recent][:MAX_RECENT])


class ModelCatalog(QObject):
    """The list of models, refreshed in the background. Signal: ``models_changed(list)``."""

    models_changed = Signal(list)

    def __init__(self, settings: Settings, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.models: list[ModelEntry] = []
        self._scanning = False
        self._again = False

    def refresh(self) -> None:
        """Rescan off the GUI thread. Asked while a scan runs, scan once more after it: the
        running scan may have missed the file that prompted the call."""
        if self._scanning:
            self._again = True
            return
        self._scanning = True
        self._again = False
        run_in_background(lambda: scan_models(self.settings), self._on_scanned, self)

    def add_file(self, path: str) -> None:
        """Remember a file the user opened and list it at once."""
        remember_model(self.settings, path)
        entry = _entry(Path(path))
        if entry is not None and all(m.path != entry.path for m in self.models):
            self.models = [entry, *self.models]
            self.models_changed.emit(list(self.models))
        self.refresh()

    def _on_scanned(self, result: object, error: BaseException | None) -> None:
        self._scanning = False
        if self._again:
            self.refresh()
        if error is not None:
            log.warning("Listing models failed: %s", error)
            return
        if isinstance(result, list) and result != self.models:
            self.models = result
            self.models_changed.emit(list(self.models))
