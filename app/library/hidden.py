"""Models hidden from the library: what "delete" does to a model Ember does not own (in
another app's store or a folder the user added), since Ember never writes to or deletes from
a folder that is not its own. Kept in Ember's own data (``hidden_models.json`` in
EMBER_HOME) as the real paths of the hidden files; unhiding removes the path. No Qt.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Final

from app.config import atomic_write_text

log = logging.getLogger(__name__)

MAX_HIDDEN: Final = 10_000  # bounds on a file anyone could edit
MAX_BYTES: Final = 4 << 20


def hidden_note(name: str, path: Path) -> str:
    """What the app, the CLI and the API say when removing a model hid it."""
    return (
        f"Hid {name}: Ember never deletes another app's files, so it stays at {path}. "
        "Settings → Models lists hidden models (`ember rm --unhide PATH` in a terminal)."
    )


def real(path: Path) -> str:
    """The key a file is hidden by: its real path (the same file by any link is hidden)."""
    try:
        return str(path.resolve())
    except (OSError, RuntimeError, ValueError):  # a loop, a NUL
        return os.path.abspath(path)


class HiddenModels:
    """The set of hidden files, persisted in ``path``. Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def load(self) -> frozenset[str]:
        """The hidden real paths (empty when the file is missing or unusable)."""
        try:
            if self.path.stat().st_size > MAX_BYTES:
                raise ValueError(f"larger than {MAX_BYTES} bytes")
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return frozenset()
        except (OSError, ValueError, RecursionError) as e:
            log.warning("Ignoring the hidden models list %s: %s", self.path, e)
            return frozenset()
        paths = data.get("paths") if isinstance(data, dict) else None
        if not isinstance(paths, list):
            return frozenset()
        return frozenset(p for p in paths[:MAX_HIDDEN] if isinstance(p, str) and p)

    def hide(self, paths: list[Path]) -> None:
        with self._lock:
            self._write(self.load() | {real(p) for p in paths})

    def unhide(self, path: str | Path) -> bool:
        """Show ``path`` again; False when it was not hidden."""
        key = str(path)
        with self._lock:
            current = self.load()
            keys = {key, real(Path(key))} & current
            if not keys:
                return False
            self._write(current - keys)
            return True

    def _write(self, paths: frozenset[str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, json.dumps({"version": 1, "paths": sorted(paths)}, indent=1))
