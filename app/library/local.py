"""The local library: every GGUF model on this machine that Ember can run.

Sources, listed in place (never copied): Ember's own models folder (``models/<owner>/<repo>/``,
plus ``models/@imported/`` for imported files), the Hugging Face cache
(``models--owner--repo/snapshots/<commit>/``), LM Studio's models folders, and folders the user
adds. Split models (``-00001-of-00003.gguf``) are one entry that loads from its first part;
vision projectors (``mmproj*.gguf``) are attached to the models in their folder, never listed
alone. Partial downloads never appear: they live in ``downloads/`` as ``.part`` files.

Metadata comes from each file's GGUF header, cached in ``cache_path`` by (path, size, mtime)
so a rescan of 200 models reads no headers. Ember owns only what is under its models folder; a
``.ember.json`` manifest in each repository folder records where a file came from.

No Qt; thread-safe (one lock: the GUI and the API server share one instance).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final, Literal, TypeVar, cast

from app.config import atomic_write_text, paths
from app.engine.gguf import ArrayInfo, GGUFError, GGUFInfo, read_gguf
from app.library.local_files import (
    _INFO_FIELDS,
    MANIFEST_NAME,
    AmbiguousModelError,
    LibraryError,
    LocalModel,
    NoMatchingModelError,
    NotOwnedError,
    Source,
    _copy_atomic,
    _Found,
    _group_folder,
    _link,
    _walk_gguf,
    default_hf_cache_dir,
    default_lmstudio_dirs,
    now_iso,
    read_manifest,
    update_manifest,
)

__all__ = [
    "MANIFEST_NAME",
    "AmbiguousModelError",
    "Library",
    "LibraryError",
    "LocalModel",
    "NoMatchingModelError",
    "NotOwnedError",
    "Source",
    "default_hf_cache_dir",
    "default_lmstudio_dirs",
    "now_iso",
    "read_manifest",
    "update_manifest",
]
from app.library.quant import file_model_id, model_stem, parse_quant, quant_sort_key, split_name

log = logging.getLogger(__name__)

IMPORTED_DIR: Final = "@imported"  # '@' cannot appear in a Hub owner name, so no clash
_SOURCE_RANK: Final[dict[str, int]] = {
    "ember": 0,
    "imported": 1,
    "hf-cache": 2,
    "lmstudio": 3,
    "folder": 4,
}
_CACHE_VERSION: Final = 1
_REPO_PART_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _slim_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """Metadata worth caching: no vocabulary-sized arrays."""
    return {
        k: v
        for k, v in metadata.items()
        if not isinstance(v, ArrayInfo) and not (isinstance(v, list) and len(v) > 64)
    }


def _info_to_json(info: GGUFInfo) -> dict[str, Any]:
    data = {
        name: getattr(info, name) for name in _INFO_FIELDS if name not in ("tensors", "metadata")
    }
    data["metadata"] = _slim_metadata(info.metadata)
    return data


def _info_from_json(data: dict[str, Any]) -> GGUFInfo:
    return GGUFInfo(**{**data, "tensors": ()})


def _slim(info: GGUFInfo) -> GGUFInfo:
    return dataclasses.replace(info, tensors=(), metadata=_slim_metadata(info.metadata))


class _MetadataCache:
    """(path, size, mtime) -> header summary or error, persisted as JSON."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        self.used: set[str] = set()
        self.dirty = False
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("version") == _CACHE_VERSION and data.get("fields") == list(_INFO_FIELDS):
                self.entries = dict(data.get("entries", {}))
        except (OSError, ValueError, AttributeError):
            pass

    def lookup(self, file: Path) -> tuple[GGUFInfo | None, str | None]:
        key = str(file.resolve())
        try:
            st = file.stat()
        except OSError as e:
            return None, f"Cannot read {file}: {e.strerror or e}"
        self.used.add(key)
        entry = self.entries.get(key)
        if entry and entry.get("size") == st.st_size and entry.get("mtime_ns") == st.st_mtime_ns:
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

    def save(self, prune: bool = False) -> None:
        """Write what changed; ``prune`` (after a full scan only) also forgets the files this
        run did not see. A single lookup must not prune: it sees one file."""
        stale = set(self.entries) - self.used if prune else set()
        for key in stale:
            del self.entries[key]
        if not (self.dirty or stale):
            return
        data = {"version": _CACHE_VERSION, "fields": list(_INFO_FIELDS), "entries": self.entries}
        try:
            atomic_write_text(self.path, json.dumps(data, separators=(",", ":")))
        except OSError as e:  # a cache is optional
            log.warning("Could not write the library cache %s: %s", self.path, e)


# --- the library ---------------------------------------------------------------------------


_M = TypeVar("_M", bound=Callable[..., Any])


def _locked(method: _M) -> _M:
    """Run a Library method under the library's lock."""

    @functools.wraps(method)
    def wrapper(self: Library, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return cast(_M, wrapper)


class Library:
    """The models on this machine. ``scan()`` first; ``find``/``delete`` use the last scan.

    Thread-safe: the app scans on background threads while the API server resolves names, so
    every public method holds one lock (a scan that started before ``add_folder`` cannot put
    back a list without the new folder).
    """

    def __init__(
        self,
        models_dir: Path | None = None,
        extra_dirs: Iterable[Path] = (),
        hf_cache_dir: Path | None = None,
        lmstudio_dirs: Iterable[Path] | None = None,
        cache_path: Path | None = None,
    ) -> None:
        self.models_dir = Path(models_dir) if models_dir is not None else paths().models_dir
        self.extra_dirs: list[Path] = [Path(d) for d in extra_dirs]
        self.hf_cache_dir = (
            Path(hf_cache_dir) if hf_cache_dir is not None else default_hf_cache_dir()
        )
        self.lmstudio_dirs = tuple(
            Path(d) for d in (default_lmstudio_dirs() if lmstudio_dirs is None else lmstudio_dirs)
        )
        self.cache_path = (
            cache_path if cache_path is not None else paths().cache_dir / "library.json"
        )
        self._models: list[LocalModel] | None = None
        self._lock = threading.RLock()

    # scanning ----------------------------------------------------------------------------------

    @_locked
    def scan(self) -> list[LocalModel]:
        """Find every model; reads headers only for new or changed files."""
        cache = _MetadataCache(self.cache_path)
        seen: set[Path] = set()
        models: list[LocalModel] = []
        for found in self._find_all():
            try:
                real = found.parts[0].resolve()
            except OSError:
                continue
            if real in seen:
                continue
            seen.add(real)
            models.append(self._describe(found, cache))
        cache.save(prune=True)
        models.sort(
            key=lambda m: (_SOURCE_RANK[m.source], m.name.lower(), quant_sort_key(m.quant), m.id)
        )
        self._models = models
        return list(models)

    @property
    def models(self) -> list[LocalModel]:
        """The last scan's result (scanning now if there was none)."""
        with self._lock:
            return list(self._models) if self._models is not None else self.scan()

    def _find_all(self) -> Iterator[_Found]:
        yield from self._find_ember()
        yield from self._find_hf_cache()
        for root in self.lmstudio_dirs:
            yield from self._find_two_level(root, "lmstudio")
        for root in self.extra_dirs:
            yield from self._find_plain(root, "folder")

    def _find_ember(self) -> Iterator[_Found]:
        root = self.models_dir
        for folder, names in _walk_gguf(root):
            rel_folder = folder.relative_to(root).parts
            imported = bool(rel_folder) and rel_folder[0] == IMPORTED_DIR
            repo_id = None
            if (
                not imported
                and len(rel_folder) >= 2
                and all(_REPO_PART_RE.match(p) for p in rel_folder[:2])
            ):
                repo_id = "/".join(rel_folder[:2])
            base = root / Path(*rel_folder[:2]) if len(rel_folder) >= 2 else root
            for parts, projectors, error in _group_folder(folder, names):
                rel = parts[0].relative_to(base).as_posix()
                source: Source = "imported" if imported else "ember"
                yield _Found(source, root, parts, projectors, repo_id, rel, error)

    def _find_hf_cache(self) -> Iterator[_Found]:
        root = self.hf_cache_dir
        try:
            repos = sorted(
                p for p in root.iterdir() if p.name.startswith("models--") and p.is_dir()
            )
        except OSError:
            return
        for repo_dir in repos:
            repo_id = repo_dir.name.removeprefix("models--").replace("--", "/", 1)
            snapshots = repo_dir / "snapshots"
            try:
                main = (repo_dir / "refs" / "main").read_text(encoding="utf-8").strip()
            except OSError:
                main = ""
            try:
                commits = sorted(
                    (p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.name != main
                )
            except OSError:
                continue
            for snapshot in commits:
                for folder, names in _walk_gguf(snapshot):
                    for parts, projectors, error in _group_folder(folder, names):
                        rel = parts[0].relative_to(snapshot).as_posix()
                        yield _Found("hf-cache", root, parts, projectors, repo_id, rel, error)

    def _find_two_level(self, root: Path, source: Source) -> Iterator[_Found]:
        """LM Studio: ``<root>/<publisher>/<repo>/<file>.gguf``."""
        for folder, names in _walk_gguf(root):
            rel_folder = folder.relative_to(root).parts
            repo_id = "/".join(rel_folder[:2]) if len(rel_folder) >= 2 else None
            base = root / Path(*rel_folder[:2]) if len(rel_folder) >= 2 else root
            for parts, projectors, error in _group_folder(folder, names):
                yield _Found(
                    source,
                    root,
                    parts,
                    projectors,
                    repo_id,
                    parts[0].relative_to(base).as_posix(),
                    error,
                )

    def _find_plain(self, root: Path, source: Source) -> Iterator[_Found]:
        for folder, names in _walk_gguf(root):
            for parts, projectors, error in _group_folder(folder, names):
                yield _Found(
                    source,
                    root,
                    parts,
                    projectors,
                    None,
                    parts[0].relative_to(root).as_posix(),
                    error,
                )

    def _describe(self, found: _Found, cache: _MetadataCache) -> LocalModel:
        first = found.parts[0]
        owned = found.source in ("ember", "imported")
        model_id = file_model_id(first, self.models_dir) if owned else str(first)
        size = 0
        for part in found.parts:
            with contextlib.suppress(OSError):
                size += part.stat().st_size
        info, error = cache.lookup(first)
        quant = parse_quant(found.rel) or (info.quantization if info else None)
        name = model_stem(found.rel)
        return LocalModel(
            id=model_id,
            name=name,
            path=first,
            size=size,
            source=found.source,
            owned=owned,
            parts=tuple(found.parts),
            projectors=tuple(found.projectors),
            repo_id=found.repo_id,
            filename=found.rel,
            quant=quant,
            info=info,
            error=found.error or error,
        )

    # lookup ------------------------------------------------------------------------------------

    @_locked
    def get(self, model_id: str) -> LocalModel | None:
        return next((m for m in self.models if m.id == model_id), None)

    @_locked
    def find(self, name_or_path: str, *, paths: bool = True) -> LocalModel:
        """The model a user means (``ember run NAME``): an id, a file path (unless ``paths`` is
        False, as for API requests), ``owner/repo``, ``owner/repo:QUANT`` (or ``:FILENAME``),
        or a unique part of a name. Raises NoMatchingModelError / AmbiguousModelError."""
        query = name_or_path.strip()
        if not query:
            raise NoMatchingModelError(
                "Name a model: an id, a path, owner/repo[:QUANT] or part of a name."
            )
        models = self.models
        exact = [m for m in models if m.id == query]
        if exact:
            return exact[0]
        by_path = self._find_path(query, models) if paths else None
        if by_path is not None:
            return by_path
        repo, sep, spec = query.rpartition(":") if ":" in query else (query, "", "")
        if "/" in repo:
            in_repo = [m for m in models if m.repo_id and m.repo_id.lower() == repo.lower()]
            if sep:
                want = spec.lower()
                in_repo = [
                    m
                    for m in in_repo
                    if (m.quant or "").lower() == want
                    or m.filename.lower() == want
                    or m.path.name.lower() == want
                    or m.name.lower() == want
                ]
            if in_repo or sep:
                return self._one(query, in_repo, pull_hint=True)
        needle = query.lower()
        named = [m for m in models if m.name.lower() == needle or m.path.name.lower() == needle]
        if len(named) == 1:
            return named[0]
        matches = named or [
            m
            for m in models
            if needle in m.id.lower()
            or needle in m.name.lower()
            or needle in (m.repo_id or "").lower()
        ]
        return self._one(query, matches, pull_hint="/" in query)

    @staticmethod
    def _one(query: str, matches: list[LocalModel], pull_hint: bool) -> LocalModel:
        if len(matches) == 1:
            return matches[0]
        if not matches:
            hint = (
                f" Download it with `ember pull {query}`."
                if pull_hint
                else " `ember ls` lists them."
            )
            raise NoMatchingModelError(f"No model matches {query!r}.{hint}")
        ids = [m.id for m in matches]
        listed = "\n  ".join(ids)
        raise AmbiguousModelError(
            f"{query!r} matches {len(ids)} models; name one of:\n  {listed}", ids
        )

    def _find_path(self, query: str, models: list[LocalModel]) -> LocalModel | None:
        try:
            candidate = Path(query).expanduser()
            if not candidate.is_file():
                return None
        # a name no file can have: too long (ENAMETOOLONG), a NUL, '~someone' unknown
        except (OSError, ValueError, RuntimeError):
            return None
        real = candidate.resolve()
        for m in models:
            if any(p.resolve() == real for p in m.parts):
                return m
        if not candidate.name.lower().endswith(".gguf"):
            raise NoMatchingModelError(f"{query} is not a .gguf model file.")
        cache = _MetadataCache(self.cache_path)
        found = _Found("folder", candidate.parent, [candidate], [], None, candidate.name)
        for parts, projectors, error in _group_folder(
            candidate.parent, [p.name for p in candidate.parent.iterdir()]
        ):
            if any(p.resolve() == real for p in parts):
                found = _Found(
                    "folder", candidate.parent, parts, projectors, None, parts[0].name, error
                )
        model = self._describe(found, cache)
        cache.save()
        return model

    # import / delete ---------------------------------------------------------------------------

    @_locked
    def import_file(
        self,
        path: Path | str,
        mode: Literal["copy", "link"] = "copy",
        projector: Path | str | None = None,
    ) -> LocalModel:
        """Bring a .gguf (all its parts, if split, and an optional projector) into Ember's
        models folder under ``@imported/<name>/``: a copy, or a link to the original
        (symlink; a hard link where symlinks are not allowed, as on Windows without admin)."""
        if mode not in ("copy", "link"):
            raise ValueError("mode must be 'copy' or 'link'")
        src = Path(path).expanduser()
        if not src.is_file():
            raise LibraryError(f"There is no file at {src}.")
        if not src.name.lower().endswith(".gguf"):
            raise LibraryError(f"{src.name} is not a .gguf file; Ember imports GGUF models.")
        read_gguf(src)  # a clear GGUFError now beats a broken entry later
        sources = self._parts_of(src)
        if projector is not None:
            sources.append(Path(projector).expanduser())
        dest_dir = self.models_dir / IMPORTED_DIR / model_stem(src.name)
        existing = [
            dest_dir / s.name
            for s in sources
            if (dest_dir / s.name).exists() or (dest_dir / s.name).is_symlink()
        ]
        if existing:
            raise LibraryError(
                f"{src.name} is already imported ({existing[0]}); delete it first to import "
                "it again."
            )
        dest_dir.mkdir(parents=True, exist_ok=True)
        done: list[Path] = []
        try:
            for s in sources:
                target = dest_dir / s.name
                if mode == "copy":
                    _copy_atomic(s, target)
                else:
                    _link(s, target)
                done.append(target)
                entry = {"imported_from": str(s.resolve()), "mode": mode, "imported_at": now_iso()}
                update_manifest(dest_dir, s.name, entry)
        except BaseException:
            for target in done:
                target.unlink(missing_ok=True)
                update_manifest(dest_dir, target.name, None)
            with contextlib.suppress(OSError):
                dest_dir.rmdir()
            raise
        self.scan()
        model_id = (dest_dir / sources[0].name).relative_to(self.models_dir).as_posix()
        model = self.get(model_id)
        if model is None:  # pragma: no cover - the file was just written
            raise LibraryError(f"Imported {src.name} but cannot find it in {self.models_dir}.")
        return model

    @staticmethod
    def _parts_of(src: Path) -> list[Path]:
        split = split_name(src.name)
        if split is None:
            return [src]
        parts = []
        for i in range(1, split.count + 1):
            part = src.with_name(f"{split.base}-{i:05d}-of-{split.count:05d}.gguf")
            if not part.is_file():
                raise LibraryError(
                    f"{src.name} is part of a split model, but {part.name} is missing."
                )
            parts.append(part)
        return parts

    @_locked
    def delete(self, model_id: str) -> None:
        """Delete an Ember-owned model's files (all parts; its projectors when no other model
        in the folder uses them). Models found elsewhere raise :class:`NotOwnedError`: Ember
        only lists them (the GUI can offer to remove the folder from the list instead)."""
        model = self.get(model_id)
        if model is None:
            raise NoMatchingModelError(f"No model with id {model_id!r}; `ember ls` lists them.")
        if not model.owned:
            where = {
                "hf-cache": "the Hugging Face cache",
                "lmstudio": "LM Studio's models folder",
            }.get(model.source, "a folder you added")
            raise NotOwnedError(
                f"{model.name} is not Ember's file: it is in {where} ({model.path}). "
                "Ember only lists it; "
                "delete it there, or remove its folder from Ember's list."
            )
        root = Path(os.path.abspath(self.models_dir))
        folder = model.path.parent
        others = [m for m in self.models if m.id != model.id and m.path.parent == folder]
        victims = list(model.parts) + ([] if others else list(model.projectors))
        for victim in victims:
            absolute = Path(os.path.abspath(victim))  # the link itself, never its target
            if not absolute.is_relative_to(root):
                raise LibraryError(f"Refusing to delete {victim}: it is outside {root}.")
        repo_dir = self._manifest_dir(model)
        for victim in victims:
            victim.unlink(missing_ok=True)
            update_manifest(
                repo_dir,
                Path(os.path.abspath(victim))
                .relative_to(Path(os.path.abspath(repo_dir)))
                .as_posix(),
                None,
            )
        self._prune_empty(folder, root)
        self._models = None

    def _manifest_dir(self, model: LocalModel) -> Path:
        rel = model.path.relative_to(self.models_dir).parts
        return self.models_dir.joinpath(*rel[:2]) if len(rel) > 2 else model.path.parent

    @staticmethod
    def _prune_empty(folder: Path, root: Path) -> None:
        current = Path(os.path.abspath(folder))
        while current != root and current.is_relative_to(root):
            try:
                current.rmdir()
            except OSError:
                return
            current = current.parent

    # folders -----------------------------------------------------------------------------------

    @_locked
    def add_folder(self, folder: Path | str) -> tuple[Path, ...]:
        """Also list models in ``folder``; returns the new list (the caller persists it)."""
        path = Path(folder).expanduser().resolve()
        if not path.is_dir():
            raise LibraryError(f"{path} is not a folder.")
        if path not in self.extra_dirs:
            self.extra_dirs.append(path)
            self._models = None
        return tuple(self.extra_dirs)

    @_locked
    def remove_folder(self, folder: Path | str) -> tuple[Path, ...]:
        """Stop listing ``folder`` (nothing is deleted); returns the new list."""
        path = Path(folder).expanduser()
        resolved = path.resolve()
        self.extra_dirs = [d for d in self.extra_dirs if d not in (path, resolved)]
        self._models = None
        return tuple(self.extra_dirs)
