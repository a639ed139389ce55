"""The local library: every GGUF model on this machine that Ember can run.

Sources, listed in place (never copied): Ember's own models folder (``models/<owner>/<repo>/``,
plus ``models/@imported/`` for imported files), the Hugging Face cache, LM Studio's models
folders, Ollama's, llama.cpp's, Jan's and GPT4All's stores (:mod:`app.library.stores`), and
folders the user adds. Split models (``-00001-of-00003.gguf``) are one entry that loads from
its first part; vision projectors (``mmproj*.gguf``) are attached to the models in their
folder, never listed alone. Partial downloads never appear: they live in ``downloads/``.

The same file reached by several paths (a link, a copy in another app's folder, an Ollama blob
equal to a Hub download) is one entry listing its ``locations`` (:mod:`app.library.same_file`).
Ember owns only what is under its models folder: deleting anything else hides it
(:mod:`app.library.hidden`), because Ember never writes to or deletes from another app's folder.

Metadata comes from each file's GGUF header, cached by (path, size, mtime)
(:mod:`app.library.metadata_cache`) so a rescan of 200 models reads no headers.

No Qt; thread-safe (one lock: the GUI and the API server share one instance).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final, Literal, TypeVar, cast

from app.config import Settings, paths
from app.library.gguf_folders import (
    Found,
    find_ember,
    find_hf_cache,
    find_plain,
    find_two_level,
    found_for_file,
)
from app.library.hidden import HiddenModels
from app.library.imports import import_files
from app.library.local_model import LibraryError, LocalModel, NoMatchingModelError
from app.library.lookup import match_name
from app.library.manifest import update_manifest
from app.library.metadata_cache import MetadataCache
from app.library.quant import file_model_id, model_stem, parse_quant, quant_sort_key
from app.library.same_file import group_same
from app.library.stores import (
    SOURCES_SETTING,
    Store,
    default_hf_cache_dir,
    default_lmstudio_dirs,
    enabled,
    known_stores,
)

log = logging.getLogger(__name__)

_SOURCE_RANK: Final[dict[str, int]] = {
    "ember": 0,
    "imported": 1,
    "hf-cache": 2,
    "lmstudio": 3,
    "ollama": 4,
    "llama.cpp": 5,
    "jan": 6,
    "gpt4all": 7,
    "folder": 8,
}
_OWNED: Final = ("ember", "imported")

Removal = Literal["deleted", "hidden"]

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

    ``stores``: the other apps' stores to read; None (the default) means those
    :func:`known_stores` that Settings → Models has on (``library.sources``), read anew at
    each scan. Thread-safe: the app scans on background threads while the API server
    resolves names, so every public method holds one lock.
    """

    def __init__(
        self,
        models_dir: Path | None = None,
        extra_dirs: Iterable[Path] = (),
        hf_cache_dir: Path | None = None,
        lmstudio_dirs: Iterable[Path] | None = None,
        cache_path: Path | None = None,
        *,
        stores: Iterable[Store] | None = None,
        hidden_path: Path | None = None,
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
        self.stores = tuple(stores) if stores is not None else None
        self.hidden = HiddenModels(
            hidden_path if hidden_path is not None else paths().home / "hidden_models.json"
        )
        self._models: list[LocalModel] | None = None
        self._lock = threading.RLock()

    # scanning ----------------------------------------------------------------------------------

    def active_stores(self) -> tuple[Store, ...]:
        """The other apps' stores this scan reads."""
        if self.stores is not None:
            return self.stores
        switches = Settings().get(SOURCES_SETTING)
        return tuple(s for s in known_stores() if enabled(s, switches))

    @_locked
    def scan(self) -> list[LocalModel]:
        """Find every model; reads headers only for new or changed files."""
        cache = MetadataCache(self.cache_path)
        hidden = self.hidden.load()
        seen: set[Path] = set()
        ids: set[str] = set()
        models: list[LocalModel] = []
        for found in self._find_all():
            try:
                real = found.parts[0].resolve()
            except (OSError, RuntimeError):
                continue
            if real in seen:
                continue
            seen.add(real)
            if found.source not in _OWNED and str(real) in hidden:
                continue
            model = self._describe(found, cache, real)
            if model.id in ids:  # an app's name twice (Ollama's two stores): the path is unique
                model = dataclasses.replace(model, id=str(model.path))
            ids.add(model.id)
            models.append(model)
        models.sort(
            key=lambda m: (_SOURCE_RANK[m.source], m.name.lower(), quant_sort_key(m.quant), m.id)
        )
        models = _one_per_file(models, cache)
        cache.save(prune=True)
        self._models = models
        return list(models)

    @property
    def models(self) -> list[LocalModel]:
        """The last scan's result (scanning now if there was none)."""
        with self._lock:
            return list(self._models) if self._models is not None else self.scan()

    def _find_all(self) -> Iterator[Found]:
        yield from find_ember(self.models_dir)
        yield from find_hf_cache(self.hf_cache_dir)
        for root in self.lmstudio_dirs:
            yield from find_two_level(root, "lmstudio")
        for store in self.active_stores():
            yield from store.find()
        for root in self.extra_dirs:
            yield from find_plain(root, "folder")

    def _describe(self, found: Found, cache: MetadataCache, real: Path | None = None) -> LocalModel:
        first = found.parts[0]
        owned = found.source in _OWNED
        model_id = file_model_id(first, self.models_dir) if owned else str(first)
        if found.source == "ollama" and found.name:
            model_id = found.name  # Ollama's own name: its blob's path means nothing to people
        size = 0
        for part in found.parts:
            with contextlib.suppress(OSError):
                size += part.stat().st_size
        info, error = cache.lookup(first, real)
        quant = parse_quant(found.rel) or (info.quantization if info else None)
        return LocalModel(
            id=model_id,
            name=found.name or model_stem(found.rel),
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
            app_details=found.details,
        )

    # lookup ------------------------------------------------------------------------------------

    def place_named(self, model: LocalModel, name: str) -> Path | None:
        """Which of ``model``'s locations ``name`` means by its id or path (a request naming
        one place of a file found at several loads it from there), or None."""
        wanted = os.path.abspath(os.path.expanduser(name)) if "\0" not in name else ""
        for place, alias in zip(model.locations[1:], model.aliases, strict=False):
            if alias == name:
                return place
        return next((p for p in model.locations if os.path.abspath(p) == wanted), None)

    @_locked
    def get(self, model_id: str) -> LocalModel | None:
        return next((m for m in self.models if m.id == model_id), None)

    @_locked
    def find(self, name_or_path: str, *, paths: bool = True) -> LocalModel:
        """The model a user means (``ember run NAME``): an id, a file path (unless ``paths`` is
        False, as for API requests), or a name (:func:`app.library.lookup.match_name`).
        Raises NoMatchingModelError / AmbiguousModelError."""
        query = name_or_path.strip()
        if not query:
            raise NoMatchingModelError(
                "Name a model: an id, a path, owner/repo[:QUANT] or part of a name."
            )
        models = self.models
        exact = [m for m in models if m.id == query]
        exact = exact or [m for m in models if query in m.aliases]
        if exact:
            return exact[0]
        by_path = self._find_path(query, models) if paths else None
        if by_path is not None:
            return by_path
        return match_name(query, models)

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
            if any(p.resolve() == real for p in (*m.parts, *m.locations)):
                return m
        if not candidate.name.lower().endswith(".gguf"):
            raise NoMatchingModelError(f"{query} is not a .gguf model file.")
        cache = MetadataCache(self.cache_path)
        model = self._describe(found_for_file(candidate), cache)
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
        models folder under ``@imported/<name>/`` (:func:`app.library.imports.import_files`)."""
        first = import_files(self.models_dir, path, mode, projector)
        self.scan()
        model = self.get(first.relative_to(self.models_dir).as_posix())
        if model is None:  # pragma: no cover - the file was just written
            raise LibraryError(f"Imported {first.name} but cannot find it in {self.models_dir}.")
        return model

    @_locked
    def delete(self, model_id: str) -> Removal:
        """Remove a model: an Ember-owned model's files are deleted (all parts; its
        projectors when no other model in the folder uses them): ``"deleted"``. Any other
        model (another app's store, the Hugging Face cache, a folder you added) is hidden,
        its files untouched: ``"hidden"`` (:meth:`unhide` shows it again)."""
        model = self.get(model_id)
        if model is None:
            raise NoMatchingModelError(f"No model with id {model_id!r}; `ember ls` lists them.")
        if not model.owned:
            self.hidden.hide([p for p in (model.path, *model.locations)])
            self._models = None
            return "hidden"
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
        return "deleted"

    @_locked
    def unhide(self, path: str | Path) -> bool:
        """List a hidden model again; False when ``path`` was not hidden."""
        shown = self.hidden.unhide(path)
        if shown:
            self._models = None
        return shown

    def hidden_paths(self) -> list[str]:
        """The files hidden from the library (their real paths), sorted."""
        return sorted(self.hidden.load())

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


def _one_per_file(models: list[LocalModel], cache: MetadataCache) -> list[LocalModel]:
    """The same file found at several paths kept once (the first, in source order), listing
    every path as its ``locations``; fingerprints come from (and go to) the cache."""
    groups = group_same(
        [(m.path, m.size) for m in models],
        fingerprint=cache.fingerprint,
        hints=[_header_key(m) for m in models],
    )
    kept = []
    for group in groups:
        first = models[group[0]]
        if len(group) > 1:
            first = dataclasses.replace(
                first,
                locations=tuple(models[i].path for i in group),
                aliases=tuple(models[i].id for i in group[1:]),
            )
        kept.append(first)
    return kept


def _header_key(model: LocalModel) -> Hashable:
    """What the header (read already) says that two different files rarely share: files
    whose keys differ are not the same, without reading them."""
    info = model.info
    if info is None:
        return None
    return (
        info.tensor_count,
        len(info.metadata),
        info.name,
        info.architecture,
        info.file_type,
        info.parameter_count,
        info.chat_template,
    )
