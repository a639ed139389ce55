"""The library's metadata cache: each model file's GGUF header summary (or why it cannot be
read) and its content fingerprint, keyed by (path, size, mtime) and kept as JSON in Ember's
cache folder, so a rescan of 200 models reads no headers and no file twice. No Qt.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any, Final

from app.config import atomic_write_text
from app.engine.gguf import ArrayInfo, GGUFInfo, read_gguf
from app.engine.gguf_reader import GGUFError
from app.library.same_file import fingerprint

log = logging.getLogger(__name__)

INFO_FIELDS: Final = tuple(f.name for f in dataclasses.fields(GGUFInfo))
CACHE_VERSION: Final = 1


def _slim_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """Metadata worth caching: no vocabulary-sized arrays."""
    return {
        k: v
        for k, v in metadata.items()
        if not isinstance(v, ArrayInfo) and not (isinstance(v, list) and len(v) > 64)
    }


def _info_to_json(info: GGUFInfo) -> dict[str, Any]:
    data = {
        name: getattr(info, name) for name in INFO_FIELDS if name not in ("tensors", "metadata")
    }
    data["metadata"] = _slim_metadata(info.metadata)
    return data


def _info_from_json(data: dict[str, Any]) -> GGUFInfo:
    return GGUFInfo(**{**data, "tensors": ()})


def _slim(info: GGUFInfo) -> GGUFInfo:
    return dataclasses.replace(info, tensors=(), metadata=_slim_metadata(info.metadata))


class MetadataCache:
    """(path, size, mtime) -> header summary or error (and fingerprint), persisted as JSON.

    Not thread-safe: one scan uses one instance (the library holds its lock meanwhile)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        self.used: set[str] = set()
        self.dirty = False
        self._seen: dict[Path, tuple[str, os.stat_result]] = {}  # this scan's stats
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("version") == CACHE_VERSION and data.get("fields") == list(INFO_FIELDS):
                self.entries = dict(data.get("entries", {}))
        except (OSError, ValueError, AttributeError):
            pass

    def _current(
        self, file: Path, real: Path | None = None
    ) -> tuple[str, os.stat_result, dict[str, Any] | None]:
        """The file's key, stat and cache entry if it is still current. Raises OSError."""
        if file in self._seen:  # a fingerprint after the lookup: no second resolve and stat
            key, st = self._seen[file]
        else:
            key, st = str(real or file.resolve()), file.stat()
            self._seen[file] = (key, st)
        self.used.add(key)
        entry = self.entries.get(key)
        if entry and entry.get("size") == st.st_size and entry.get("mtime_ns") == st.st_mtime_ns:
            return key, st, entry
        return key, st, None

    def lookup(self, file: Path, real: Path | None = None) -> tuple[GGUFInfo | None, str | None]:
        """The file's header summary, or why it cannot be read; parses only what changed.
        ``real``: the file's real path, when the caller has resolved it already."""
        try:
            key, st, entry = self._current(file, real)
        except OSError as e:
            return None, f"Cannot read {file}: {e.strerror or e}"
        if entry is not None:
            try:
                info = _info_from_json(entry["info"]) if entry.get("info") else None
                return info, entry.get("error")
            except (TypeError, KeyError):
                pass
        info, error = None, None
        try:
            info = _slim(read_gguf(file))
        except GGUFError as e:
            error = str(e)
        except OSError as e:
            error = f"Cannot read {file}: {e.strerror or e}"
        self.entries[key] = {
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "info": _info_to_json(info) if info else None,
            "error": error,
        }
        self.dirty = True
        return info, error

    def fingerprint(self, file: Path, size: int) -> str | None:
        """The file's content fingerprint (:func:`app.library.same_file.fingerprint`),
        computed once per (path, size, mtime)."""
        try:
            _key, _st, entry = self._current(file)
        except OSError:
            return None
        if entry is not None and isinstance(entry.get("fingerprint"), str):
            return str(entry["fingerprint"])
        found = fingerprint(file, size)
        if found is not None and entry is not None:
            entry["fingerprint"] = found
            self.dirty = True
        return found

    def save(self, prune: bool = False) -> None:
        """Write what changed; ``prune`` (after a full scan only) also forgets the files this
        run did not see. A single lookup must not prune: it sees one file."""
        stale = set(self.entries) - self.used if prune else set()
        for key in stale:
            del self.entries[key]
        if not (self.dirty or stale):
            return
        data = {"version": CACHE_VERSION, "fields": list(INFO_FIELDS), "entries": self.entries}
        try:
            atomic_write_text(self.path, json.dumps(data, separators=(",", ":")))
        except OSError as e:  # a cache is optional
            log.warning("Could not write the library cache %s: %s", self.path, e)
