"""Ember's record of where each file in its models folder came from: a ``.ember.json``
manifest in each repository folder (``models/<owner>/<repo>/``), one entry per file, written
atomically. Downloads and imports write it; deleting a file removes its entry. No Qt.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from app.config import atomic_write_text

MANIFEST_NAME: Final = ".ember.json"
_manifest_lock = threading.Lock()


def read_manifest(folder: Path) -> dict[str, dict[str, Any]]:
    """The manifest's file entries of a repository folder ({} when there is none)."""
    try:
        data = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    return (
        {k: v for k, v in files.items() if isinstance(v, dict)} if isinstance(files, dict) else {}
    )


def update_manifest(folder: Path, filename: str, entry: dict[str, Any] | None, **top: Any) -> None:
    """Set (or, with ``entry=None``, remove) one file's entry; written atomically."""
    with _manifest_lock:
        files = read_manifest(folder)
        if entry is None:
            files.pop(filename, None)
        else:
            files[filename] = entry
        path = folder / MANIFEST_NAME
        if not files:
            path.unlink(missing_ok=True)
            return
        data = {"version": 1, **top, "files": files}
        atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True))


def now_iso() -> str:
    """Now, as the manifests and download records write times (UTC, to the second)."""
    return datetime.now(UTC).isoformat(timespec="seconds")
