"""Which models the server can name: a small interface over the local library.

The server needs only two things from wherever models live: a list (for ``GET /v1/models``)
and "which file is this id?" (for just-in-time loading). :class:`ModelCatalog` is that
interface; :class:`LibraryCatalog` adapts Ember's local library, :class:`StaticCatalog` holds
explicit entries (``ember serve --model some/file.gguf``), :class:`ChainCatalog` combines them.

Catalogs are called from a thread pool (scans touch the disk), so implementations must be
thread-safe.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from app.engine.gguf import EMBEDDING_ARCHITECTURES

if TYPE_CHECKING:
    from app.library.local import Library
    from app.library.local_model import LocalModel

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ModelMeta:
    """What the routes need from a model's GGUF header."""

    vocab_size: int | None = None
    context_length: int | None = None
    has_fim: bool = False
    chat_template: str | None = None
    architecture: str | None = None

    @property
    def embedding_only(self) -> bool:
        return self.architecture in EMBEDDING_ARCHITECTURES


@dataclass(frozen=True, slots=True)
class CatalogModel:
    id: str
    path: str
    context_length: int | None = None  # the trained context, when known
    size_bytes: int = 0
    created: int = 0  # unix seconds (the file's modification time)
    owned_by: str = "local"
    meta: ModelMeta | None = None  # None: read from the file's header when needed
    # what Ollama-style names are made of (app/server/names.py)
    repo_id: str | None = None
    quant: str | None = None
    name: str = ""
    # the vision projector a just-in-time load takes with it (the library's choice), if any
    mmproj: str | None = None


class CatalogError(Exception):
    """A name that matches no usable model for a reason worth telling (ambiguous, broken)."""


class ModelCatalog(Protocol):
    def list_models(self) -> list[CatalogModel]:
        """Every model a request may name."""
        ...

    def resolve(self, name: str) -> CatalogModel | None:
        """The model ``name`` means, or None. May raise CatalogError to explain a miss."""
        ...


def by_name(catalog: ModelCatalog, name: str) -> CatalogModel | None:
    """The model an Ollama-style name (``gemma:latest``, ``hf.co/owner/repo:Q4_K_M``) or an
    alias made by ``/api/copy`` means, or None."""
    from app.server.names import alias_store, find, named_models

    if not name.strip():
        return None
    return find(name, named_models(catalog.list_models(), alias_store().load()))


def refresh(catalog: ModelCatalog) -> None:
    """Forget what a catalog remembers of the disk (a model was just downloaded or deleted)."""
    for inner in getattr(catalog, "catalogs", (catalog,)):
        if isinstance(inner, LibraryCatalog):
            inner.refresh()


def check_deletable(catalog: ModelCatalog, model_id: str) -> None:
    """Raise CatalogError saying why :func:`delete` would refuse ``model_id``."""
    for inner in getattr(catalog, "catalogs", (catalog,)):
        if isinstance(inner, LibraryCatalog) and inner.library.get(model_id) is not None:
            return
    raise CatalogError(
        "It is not a model in Ember's library (a model file opened directly is not deleted)."
    )


def delete(catalog: ModelCatalog, model_id: str) -> str | None:
    """Remove a library model: Ember's own files are deleted (None); another app's model is
    hidden, its files untouched, and the note saying so is returned. Raises CatalogError
    saying why not (not in the library)."""
    from app.library.hidden import hidden_note
    from app.library.local_model import LibraryError

    for inner in getattr(catalog, "catalogs", (catalog,)):
        model = inner.library.get(model_id) if isinstance(inner, LibraryCatalog) else None
        if isinstance(inner, LibraryCatalog) and model is not None:
            try:
                removal = inner.library.delete(model_id)
            except LibraryError as e:
                raise CatalogError(str(e)) from e
            inner.refresh()
            return hidden_note(model.name, model.path) if removal == "hidden" else None
    raise CatalogError(
        "It is not a model in Ember's library (a model file opened directly is not deleted)."
    )


def entry_for_file(path: str | Path, model_id: str | None = None) -> CatalogModel:
    """A catalog entry for a model file outside the library; its id (unless given) is
    :func:`~app.library.quant.file_model_id`'s."""
    p = Path(path).expanduser()
    try:
        st = p.stat()
        size, created = st.st_size, int(st.st_mtime)
    except OSError:
        size, created = 0, 0
    from app.config import paths
    from app.library.quant import file_model_id, parse_quant

    return CatalogModel(
        id=model_id or file_model_id(p, paths().models_dir),
        path=str(p.resolve()) if p.exists() else str(p),
        size_bytes=size,
        created=created,
        quant=parse_quant(p.name),
    )


class StaticCatalog:
    """A fixed list of models."""

    def __init__(self, models: Iterable[CatalogModel] = ()) -> None:
        self._models = {m.id: m for m in models}
        self._lock = threading.Lock()

    def add(self, model: CatalogModel) -> None:
        with self._lock:
            self._models[model.id] = model

    def list_models(self) -> list[CatalogModel]:
        with self._lock:
            return list(self._models.values())

    def resolve(self, name: str) -> CatalogModel | None:
        with self._lock:
            return self._models.get(name)


class ChainCatalog:
    """The first catalog that knows a name wins; lists are merged (first id wins)."""

    def __init__(self, *catalogs: ModelCatalog) -> None:
        self.catalogs = catalogs

    def list_models(self) -> list[CatalogModel]:
        seen: dict[str, CatalogModel] = {}
        for catalog in self.catalogs:
            for m in catalog.list_models():
                seen.setdefault(m.id, m)
        return list(seen.values())

    def resolve(self, name: str) -> CatalogModel | None:
        named = by_name(self, name)  # names are made over the merged list: check them first
        if named is not None:
            return named
        first_error: CatalogError | None = None
        for catalog in self.catalogs:
            try:
                found = catalog.resolve(name)
            except CatalogError as e:
                first_error = first_error or e
                continue
            if found is not None:
                return found
        if first_error is not None:
            raise first_error
        return None


class LibraryCatalog:
    """Ember's local library as a catalog. Rescans at most every ``rescan_after`` seconds, and
    once more when a name is not found (a model downloaded a moment ago)."""

    def __init__(self, library: Library | None = None, rescan_after: float = 10.0) -> None:
        if library is None:
            from app.library.local import Library

            library = Library()
        self.library = library
        self.rescan_after = rescan_after
        self._lock = threading.Lock()  # guards _scanned_at (the Library has its own lock)
        self._scanned_at = float("-inf")

    def _scan(self, max_age: float) -> list[LocalModel]:
        if time.monotonic() - self._scanned_at > max_age:
            self.library.scan()
            self._scanned_at = time.monotonic()
        return self.library.models

    def list_models(self) -> list[CatalogModel]:
        with self._lock:
            return [_from_local(m) for m in self._scan(self.rescan_after) if m.error is None]

    def refresh(self) -> None:
        """Scan again on the next call."""
        with self._lock:
            self._scanned_at = float("-inf")

    def resolve(self, name: str) -> CatalogModel | None:
        found = self._resolve(name)
        return found if found is not None else by_name(self, name)

    def _resolve(self, name: str) -> CatalogModel | None:
        from app.library.local_model import AmbiguousModelError, LibraryError

        with self._lock:
            models = self._scan(self.rescan_after)
            if name not in {m.id for m in models}:
                models = self._scan(1.0)
            # A request never makes Ember open (or remember) a file outside its library: a
            # path is compared as text with the library's own files; only the CLI opens one.
            found = library_file(name, models)
            try:
                found = found or self.library.find(name, paths=False)
            except AmbiguousModelError as e:
                raise CatalogError(str(e).replace("\n ", "")) from e
            except LibraryError:
                return None
            if found.id not in {m.id for m in models}:
                return None
            if found.error:
                raise CatalogError(f"{found.name} cannot be used: {found.error}")
            entry = _from_local(found)
            place = self.library.place_named(found, name)  # one place of a file at several
            return replace(entry, path=str(place)) if place is not None else entry


def library_file(name: str, models: list[LocalModel]) -> LocalModel | None:
    """The library's model one of whose files is at ``name`` (compared as paths, without
    touching the file system: a request may name any path)."""
    if "\0" in name or len(name) > 4096:
        return None
    wanted = os.path.normpath(os.path.abspath(os.path.expanduser(name.strip())))
    return next(
        (m for m in models if any(os.path.abspath(p) == wanted for p in (*m.parts, *m.locations))),
        None,
    )


def _from_local(m: LocalModel) -> CatalogModel:
    try:
        created = int(m.path.stat().st_mtime)
    except OSError:
        created = 0
    owner = m.repo_id.split("/", 1)[0] if m.repo_id else m.source
    return CatalogModel(
        id=m.id,
        path=str(m.path),
        context_length=m.info.context_length if m.info else None,
        size_bytes=m.size,
        created=created,
        owned_by=owner,
        meta=ModelMeta(
            m.info.vocab_size,
            m.info.context_length,
            m.info.has_fim,
            m.info.chat_template,
            m.info.architecture,
        )
        if m.info
        else None,
        repo_id=m.repo_id,
        quant=m.quant,
        name=m.name,
        mmproj=str(m.mmproj) if m.mmproj is not None else None,
    )
