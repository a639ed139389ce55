"""The GUI's view of the engine: which model is loaded, what the engine is doing, how fast.

``EngineSession`` wraps the engine worker and the bridge. Everything here runs on the GUI
thread and never waits: loading, unloading, chatting and tokenizing are jobs whose results come
back as signals.

Remote models: a chat request whose model is a remote id (``provider::model``) goes to the
``RemoteRouter`` instead of the worker, through the same ``JobHandle`` signals. Selecting a
remote model (``select_remote``) leaves the local model loaded: switching back costs nothing.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from app.config import Settings, paths
from app.engine.providers import RemoteRouter, is_remote_id
from app.engine.types import (
    ChatRequest,
    EngineCrashedError,
    EngineError,
    Failed,
    Finished,
    LoadedModel,
    LoadParams,
    LoadRequest,
    Request,
    UnloadRequest,
)
from app.engine.worker import EngineWorker, Job, Sink
from app.library.quant import model_stem
from app.ui.bridge import EngineBridge, JobHandle
from app.ui.header.remote_models import RemoteCatalog

log = logging.getLogger(__name__)

IDLE = "idle"
LOADING = "loading"
GENERATING = "generating"


def load_params(settings: Settings) -> LoadParams:
    """The load parameters chosen in the Settings dialog (0 means automatic)."""
    cache = settings.get("load.cache_type")
    if cache not in ("f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0"):
        cache = "f16"
    return LoadParams(
        n_ctx=settings.get("load.n_ctx") or None,
        n_gpu_layers=settings.get("load.n_gpu_layers"),
        n_threads=settings.get("load.n_threads") or None,
        n_batch=settings.get("load.n_batch"),
        n_ubatch=settings.get("load.n_batch"),
        flash_attn=settings.get("load.flash_attn"),
        use_mmap=settings.get("load.use_mmap"),
        use_mlock=settings.get("load.use_mlock"),
        cache_type_k=cache,
        cache_type_v=cache,
        n_parallel=max(1, settings.get("load.parallel")),
    )


def api_model_id(path: str) -> str:
    """The id API clients see in /v1/models and send back for a model the app loads: a model
    Ember downloaded or imported keeps its library id (``owner/repo/file.gguf``, as ``ember
    ls`` shows it), so the id does not depend on who loaded it; any other file goes by its
    name, never its full path."""
    models_dir = paths().models_dir
    for candidate, base in ((Path(path), models_dir), (Path(path).resolve(), models_dir.resolve())):
        with contextlib.suppress(ValueError):
            return candidate.relative_to(base).as_posix()
    return model_name(path)


def model_name(path: str) -> str:
    """A short display name for a model file: its stem without split-file suffixes."""
    return model_stem(Path(path).name)


class EngineSession(QObject):
    """The loaded model and the engine's state, for the GUI.

    Signals (GUI thread): ``state_changed(str)`` idle/loading/generating;
    ``load_started(str path)``; ``load_progress(float)`` (0 to 1, as the weights are read);
    ``model_loaded(LoadedModel)``; ``load_failed(str path,
    EngineError)``; ``model_unloaded()``; ``rate_changed(float tok/s)`` while generating;
    ``engine_failed(EngineError)`` when the engine itself broke; ``remote_selected(str |
    None)`` when the chosen remote model changes (None: back to the local model).
    """

    state_changed = Signal(str)
    load_started = Signal(str)
    load_progress = Signal(float)
    model_loaded = Signal(object)
    load_failed = Signal(str, object)
    model_unloaded = Signal()
    rate_changed = Signal(float)
    engine_failed = Signal(object)
    remote_selected = Signal(object)

    def __init__(
        self,
        settings: Settings,
        worker: EngineWorker | None = None,
        parent: QObject | None = None,
        *,
        router: RemoteRouter | None = None,
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self._owns_worker = worker is None
        self.worker = worker or EngineWorker()
        self.bridge = EngineBridge(self.worker, parent=self)
        self.loaded: LoadedModel | None = None
        self.loading_path: str | None = None
        self.load_fraction: float | None = None  # how far the load is, once llama.cpp says
        self._load_handle: JobHandle | None = None
        self._generations: set[JobHandle] = set()
        self._rate_tokens = 0
        self._rate_started: float | None = None
        self._state = IDLE
        self._closed = False
        self.router = router
        self.remote_catalog = RemoteCatalog(router, self) if router is not None else None
        self.remote_model: str | None = None
        described = self.worker.loaded_models()
        if described:
            self.loaded = described[-1]

    # -- state ----------------------------------------------------------------------------

    @property
    def state(self) -> str:
        return self._state

    def _update_state(self) -> None:
        state = LOADING if self.loading_path else GENERATING if self._generations else IDLE
        if state != self._state:
            self._state = state
            self.state_changed.emit(state)

    # -- models ---------------------------------------------------------------------------

    def load(self, path: str, params: LoadParams | None = None) -> JobHandle:
        """Load a model (replacing the loaded one). The GUI hears back via signals."""
        if self.loaded is not None and self.loaded.path != path:
            # One model at a time in the app: free its memory before the next one loads.
            self.bridge.submit(UnloadRequest(None))
        self.loading_path = path
        self.load_started.emit(path)
        self._update_state()
        request = LoadRequest(path, params or load_params(self.settings), api_model_id(path))
        self.load_fraction = None
        handle = self.bridge.submit(request)
        self._load_handle = handle
        handle.progress.connect(self._on_load_progress)
        handle.finished.connect(self._on_load_finished)
        handle.failed.connect(self._on_load_failed)
        return handle

    def unload(self) -> None:
        for handle in list(self._generations):
            handle.cancel()
        self.bridge.submit(UnloadRequest(None))
        if self.loaded is not None:
            self.loaded = None
            self.model_unloaded.emit()

    @Slot(float)
    def _on_load_progress(self, fraction: float) -> None:
        if self.loading_path is not None and self.sender() is self._load_handle:
            self.load_fraction = fraction
            self.load_progress.emit(fraction)

    @Slot(object)
    def _on_load_finished(self, event: Finished) -> None:
        path = self.loading_path
        self.loading_path = None
        result = event.result
        if isinstance(result, LoadedModel):
            self.loaded = result
            self.settings.set("ui.last_model", result.path)
            self.model_loaded.emit(result)
        elif event.reason == "cancelled":
            self.load_failed.emit(path or "", EngineError("Loading was cancelled."))
        self._update_state()

    @Slot(object)
    def _on_load_failed(self, event: Failed) -> None:
        path = self.loading_path or ""
        self.loading_path = None
        self._update_state()
        # A failed load leaves no model loaded (the previous one was unloaded first).
        if self.loaded is not None and not self.worker.loaded_models():
            self.loaded = None
            self.model_unloaded.emit()
        self.load_failed.emit(path, event.error)
        if isinstance(event.error, EngineCrashedError):
            self.engine_failed.emit(event.error)

    # -- generation -----------------------------------------------------------------------

    def select_remote(self, model_id: str | None) -> None:
        """Chat with a remote model (``provider::model``), or None for the local one again."""
        if model_id is not None and not is_remote_id(model_id):
            raise ValueError(f"{model_id!r} is not a remote model id (provider::model).")
        if model_id != self.remote_model:
            self.remote_model = model_id
            self.remote_selected.emit(model_id)

    def chat(self, request: ChatRequest) -> JobHandle:
        """A chat job on the loaded model, or on a remote one when ``request.model`` is a
        remote id."""
        remote = is_remote_id(request.model)
        handle = self.bridge.submit(request, self._submit_remote if remote else None)
        self._generations.add(handle)
        handle.started.connect(self._on_generation_started)
        handle.delta.connect(self._on_generation_delta)
        handle.done.connect(self._on_generation_done)
        self._update_state()
        return handle

    def _submit_remote(self, request: Request, sink: Sink) -> Job:  # a bridge thread
        if self.router is None:
            raise EngineError("Remote models are not available here.")
        return self.router.submit(request, sink)

    @Slot()
    def _on_generation_started(self) -> None:
        self._rate_tokens = 0
        self._rate_started = None

    @Slot(str, int)
    def _on_generation_delta(self, _text: str, tokens: int) -> None:
        now = time.perf_counter()
        if self._rate_started is None:
            self._rate_started = now
            self._rate_tokens = 0
            return
        self._rate_tokens += tokens
        elapsed = now - self._rate_started
        if elapsed > 0.2:
            self.rate_changed.emit(self._rate_tokens / elapsed)

    @Slot(object)
    def _on_generation_done(self, event: Finished | Failed) -> None:
        handle = self.sender()
        if isinstance(handle, JobHandle):
            self._generations.discard(handle)
        self._update_state()
        if isinstance(event, Failed) and isinstance(event.error, EngineCrashedError):
            self.engine_failed.emit(event.error)

    # -- lifecycle ------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Cancel jobs and stop the worker (if this session created it). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.bridge.cancel_all()
        if self._owns_worker:
            self.worker.shutdown()

    def sync_with_worker(self) -> None:
        """Catch up with loads and unloads made outside this session (the API server loads
        models just in time): re-read the worker's models, emit ``model_loaded`` /
        ``model_unloaded`` if the most recent one changed. GUI thread; cheap."""
        if self._closed or self.loading_path is not None:
            return
        models = self.worker.loaded_models()
        latest: LoadedModel | None = models[-1] if models else None
        if latest is None:
            if self.loaded is not None:
                self.loaded = None
                self.model_unloaded.emit()
        elif self.loaded is None or (latest.model_id, latest.path) != (
            self.loaded.model_id,
            self.loaded.path,
        ):
            self.loaded = latest
            self.model_loaded.emit(latest)
