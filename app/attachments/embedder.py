"""Where chunk embeddings come from: the :class:`Embedder` protocol and two engines for it.

- :class:`EngineEmbedder`: the loaded model's own embeddings, as embedding jobs on the engine
  worker that owns it (mean-pooled hidden states, ``app.engine.llamacpp.LlamaCppModel.embed``).
  The caller waits on the job, so it must not be the GUI thread: the app prepares attached
  files on a background lane, the CLI on its main thread.
- :class:`GgufEmbedder`: a second small GGUF chosen for embeddings only, loaded lazily on the
  first batch into an engine worker of its own (its own thread owns that llama.cpp context,
  as the main worker owns the chat model's), so it never displaces the chat model.

:func:`embedder_for` turns the user's choice (``EMBEDDING_SETTING``: ``"loaded"``, ``"off"``
or a GGUF path) into one of them or None (BM25 only).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from app.attachments.document import CancelFlag
from app.attachments.errors import AttachmentCancelledError

if TYPE_CHECKING:
    from app.engine.types import LoadedModel
    from app.engine.worker import EngineWorker

EMBEDDING_SETTING = "attachments.embedding_model"
LOADED = "loaded"  # the default: the chat model's own embeddings
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


class GgufEmbedder:
    """An embedding GGUF in an engine worker of its own, loaded on first use; ``close()``
    unloads it and stops that worker (the owner calls it at shutdown). Thread-safe."""

    def __init__(self, path: str | Path, cancel: CancelFlag | None = None) -> None:
        self.path = str(path)
        self._cancel = cancel
        self._lock = threading.Lock()
        self._worker: EngineWorker | None = None
        self._inner: EngineEmbedder | None = None

    def _loaded(self) -> EngineEmbedder:
        with self._lock:
            if self._inner is None:
                from app.engine.types import LoadParams
                from app.engine.worker import EngineWorker

                worker = EngineWorker(max_queue=4)
                try:
                    params = LoadParams(n_ctx=GGUF_CONTEXT, n_parallel=1, cache_ram_mb=0)
                    model = worker.load(self.path, params, model_id="embeddings").result()
                except BaseException:
                    worker.shutdown()
                    raise
                self._worker = worker
                self._inner = EngineEmbedder(worker, model, self._cancel)
            return self._inner

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
        with self._lock:
            worker, self._worker, self._inner = self._worker, None, None
        if worker is not None:
            worker.shutdown()


def embedding_choice(settings: Any) -> str:
    """The user's choice: ``LOADED``, ``OFF`` or a GGUF path (``settings``: app.config.Settings)."""
    value = settings.extra(EMBEDDING_SETTING, LOADED)
    return value if isinstance(value, str) and value else LOADED


def embedder_for(
    choice: str,
    worker: EngineWorker | None,
    model: LoadedModel | None,
    cancel: CancelFlag | None = None,
) -> Embedder | None:
    """The embedder the choice names, or None (off, or no local model loaded to use)."""
    if choice == OFF:
        return None
    if choice == LOADED:
        if worker is None or model is None:
            return None
        return EngineEmbedder(worker, model, cancel)
    return GgufEmbedder(choice, cancel)
