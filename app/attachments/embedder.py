"""Where chunk embeddings come from: the :class:`Embedder` protocol and two engines for it.

- :class:`EngineEmbedder`: the loaded model's own embeddings, as embedding jobs on the engine
  worker that owns it (mean-pooled hidden states, ``app.engine.llamacpp.LlamaCppModel.embed``).
  The caller waits on the job, so it must not be the GUI thread: the app prepares attached
  files on a background lane, the CLI on its main thread.
- :class:`GgufEmbedder`: a second small GGUF chosen for embeddings only, loaded lazily on the
  first batch into an engine worker of its own (its own thread owns that llama.cpp context,
  as the main worker owns the chat model's), so it never displaces the chat model.

An :class:`Embedders` (one per app) turns the user's choice (``EMBEDDING_SETTING``:
``"auto"``, ``"loaded"``, ``"off"`` or a GGUF path) into one of them or None (BM25 only), and
owns the second model.

The default is ``"auto"``: the smallest embedding GGUF in the library (a BERT-family model:
nomic-embed, bge, …) when there is one, else words alone. Not the loaded chat model by
default: it embeds at the cost of reading each long file as a prompt, a few seconds for the
270M test model but minutes for a 7B one on a CPU, while the user waits for the answer; the
user may still choose it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from app.attachments.document import CancelFlag
from app.attachments.errors import AttachmentCancelledError

if TYPE_CHECKING:
    from app.engine.types import LoadedModel
    from app.engine.worker import EngineWorker
    from app.library.local import Library

EMBEDDING_SETTING = "attachments.embedding_model"
AUTO = "auto"  # the default: an embedding GGUF from the library, else words alone
LOADED = "loaded"  # the chat model's own embeddings
OFF = "off"
CANCEL_POLL_S = 0.25  # how often a wait on an embedding job looks at the caller's cancel flag
GGUF_CONTEXT = 2048  # tokens: a chunk is at most ~500, and this keeps the second model small


class Embedder(Protocol):
    """Texts to vectors. ``model_id`` names the vector space (two embedders with the same id
    must give comparable vectors); ``dims`` is the vectors' length; ``max_tokens`` the most
    tokens one text may have."""

    @property
    def model_id(self) -> str: ...

    @property
    def dims(self) -> int: ...

    @property
    def max_tokens(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def embed_max_tokens(n_ctx: int) -> int:
    """The engine's limit on one embedding input for a model loaded with ``n_ctx``."""
    from app.engine.llamacpp import EMBED_MAX_TOKENS

    return max(1, min(EMBED_MAX_TOKENS, n_ctx))


class EngineEmbedder:
    """The embeddings of ``model`` (a model loaded in ``worker``), one job per batch. A set
    ``cancel`` cancels the job being waited on and raises AttachmentCancelledError."""

    def __init__(
        self, worker: EngineWorker, model: LoadedModel, cancel: CancelFlag | None = None
    ) -> None:
        self._worker = worker
        self._model = model
        self._cancel = cancel
        self._dims: int | None = None

    @property
    def model_id(self) -> str:
        return f"{Path(self._model.path).name}@{self._model.path}"

    @property
    def max_tokens(self) -> int:
        return embed_max_tokens(self._model.n_ctx)

    @property
    def dims(self) -> int:
        if self._dims is None:
            self._dims = len(self.embed(["dimensions"])[0])
        return self._dims

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        from app.engine.types import EmbeddingRequest, Finished

        job = self._worker.submit(EmbeddingRequest(list(texts), model=self._model.model_id))
        while True:
            if self._cancel is not None and self._cancel.is_set():
                job.cancel()  # queued or running: the engine ends it with "cancelled"
            try:
                final = job.wait(CANCEL_POLL_S if self._cancel is not None else None)
                break
            except TimeoutError:
                continue
        if isinstance(final, Finished) and final.reason == "cancelled":
            raise AttachmentCancelledError("the attached files' embeddings")
        vectors: list[list[float]] = job.result()
        self._dims = len(vectors[0]) if vectors else self._dims
        return vectors


@dataclass(eq=False)
class _Second:
    """The embedding GGUF's worker and model, shared by a GgufEmbedder's cancel-bound views."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    worker: EngineWorker | None = None
    model: LoadedModel | None = None


class GgufEmbedder:
    """An embedding GGUF in an engine worker of its own, loaded on first use; ``close()``
    unloads it and stops that worker (the owner calls it at shutdown). Thread-safe;
    :meth:`bound` gives a view with another cancel flag sharing the loaded model."""

    def __init__(
        self, path: str | Path, cancel: CancelFlag | None = None, *, _second: _Second | None = None
    ) -> None:
        self.path = str(path)
        self._cancel = cancel
        self._second = _second or _Second()

    def bound(self, cancel: CancelFlag | None) -> GgufEmbedder:
        return GgufEmbedder(self.path, cancel, _second=self._second)

    def _loaded(self) -> EngineEmbedder:
        second = self._second
        with second.lock:
            if second.worker is None or second.model is None:
                from app.engine.types import LoadParams
                from app.engine.worker import EngineWorker

                worker = EngineWorker(max_queue=4)
                try:
                    params = LoadParams(n_ctx=GGUF_CONTEXT, n_parallel=1, cache_ram_mb=0)
                    model = worker.load(self.path, params, model_id="embeddings").result()
                except BaseException:
                    worker.shutdown()
                    raise
                second.worker, second.model = worker, model
            return EngineEmbedder(second.worker, second.model, self._cancel)

    @property
    def loaded(self) -> bool:
        return self._second.worker is not None

    @property
    def model_id(self) -> str:
        return f"{Path(self.path).name}@{self.path}"

    @property
    def max_tokens(self) -> int:
        return embed_max_tokens(GGUF_CONTEXT)

    @property
    def dims(self) -> int:
        return self._loaded().dims

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self._loaded().embed(texts)

    def close(self) -> None:
        second = self._second
        with second.lock:
            worker, second.worker, second.model = second.worker, None, None
        if worker is not None:
            worker.shutdown()


def embedding_choice(settings: Any) -> str:
    """The user's choice: ``AUTO``, ``LOADED``, ``OFF`` or a GGUF path (``settings``:
    app.config.Settings)."""
    value = settings.get(EMBEDDING_SETTING)
    return value if isinstance(value, str) and value else AUTO


def library_embedding_model(library: Library | None) -> str | None:
    """The smallest usable embedding GGUF in ``library`` (its last scan), or None."""
    if library is None:
        return None
    from app.engine.gguf import EMBEDDING_ARCHITECTURES

    found = [
        m
        for m in library.models
        if m.error is None and m.info is not None and m.info.architecture in EMBEDDING_ARCHITECTURES
    ]
    return str(min(found, key=lambda m: (m.size, m.name)).path) if found else None


class Embedders:
    """The app's source of embedders: the choice is read per question; an embedding GGUF
    stays loaded while it is the choice, and ``close()`` (at quit) unloads it. Thread-safe."""

    def __init__(self, library: Library | None = None) -> None:
        self.library = library  # where AUTO looks for an embedding GGUF
        self._lock = threading.Lock()
        self._gguf: GgufEmbedder | None = None

    def get(
        self,
        choice: str,
        worker: EngineWorker | None,
        model: LoadedModel | None,
        cancel: CancelFlag | None = None,
    ) -> Embedder | None:
        """The embedder ``choice`` names, or None (off, no embedding GGUF for AUTO, or no
        local model loaded to use). AUTO may read the library: call it off the GUI thread."""
        if choice == AUTO:
            choice = library_embedding_model(self.library) or OFF
        with self._lock:
            stale = self._gguf if self._gguf is not None and self._gguf.path != choice else None
            if stale is not None:
                self._gguf = None
            if choice not in (OFF, LOADED) and self._gguf is None:
                self._gguf = GgufEmbedder(choice)
            gguf = self._gguf
        if stale is not None:
            stale.close()  # the choice changed: free its memory
        if gguf is not None:
            return gguf.bound(cancel)
        if choice == LOADED and worker is not None and model is not None:
            return EngineEmbedder(worker, model, cancel)
        return None

    def close(self) -> None:
        with self._lock:
            gguf, self._gguf = self._gguf, None
        if gguf is not None:
            gguf.close()
