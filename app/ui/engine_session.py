"""The GUI's view of the engine: which model is loaded, what the engine is doing, how fast.

``EngineSession`` wraps the engine worker and the bridge. Everything here runs on the GUI
thread and never waits: loading, unloading, chatting and tokenizing are jobs whose results come
back as signals.

Several answers may run at once (each chat has its own; the engine decides how many generate
together, "Parallel answers" in Settings). ``running_answers`` counts them and
``answers_changed`` says when the count changes; ``rate_changed`` is their combined tok/s.

Switching models keeps the working one until the new one has loaded: model B loads beside A
under its own id, and only B's success retires A (unloaded once the answers still being
written with it are done). A load that fails leaves A loaded and says why.

Remote models: a chat request whose model is a remote id (``provider::model``) goes to the
``RemoteRouter`` instead of the worker, through the same ``JobHandle`` signals. Selecting a
remote model (``select_remote``) leaves the local model loaded: switching back costs nothing.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.config import Settings, paths
from app.engine.load_settings import load_params
from app.engine.provider_ids import is_remote_id
from app.engine.providers import RemoteRouter
from app.engine.types import (
    ChatRequest,
    EngineCrashedError,
    EngineError,
    Failed,
    Finished,
    LoadedModel,
    LoadParams,
    LoadRequest,
    ModelTooLargeError,
    OutOfMemoryError,
    Request,
    UnloadRequest,
)
from app.engine.worker import EngineWorker, Job, Sink
from app.library.projectors import projector_beside
from app.library.quant import file_model_id, model_stem
from app.ui.bridge import EngineBridge, JobHandle
from app.ui.header.remote_models import RemoteCatalog

log = logging.getLogger(__name__)

IDLE = "idle"
LOADING = "loading"
GENERATING = "generating"
RATE_WINDOW = 2.0  # seconds of deltas the combined tok/s is measured over
RATE_INTERVAL_MS = 500  # how often rate_changed says it while generating


def api_model_id(path: str) -> str:
    """The id API clients see in /v1/models and send back for a model the app loads: a model
    Ember downloaded or imported keeps its library id (``owner/repo/file.gguf``, as ``ember
    ls`` shows it), so the id does not depend on who loaded it; any other file goes by its
    name, never its full path."""
    return file_model_id(path, paths().models_dir)


def model_name(path: str) -> str:
    """A short display name for a model file: its stem without split-file suffixes."""
    return model_stem(Path(path).name)


class EngineSession(QObject):
    """The loaded model and the engine's state, for the GUI.

    Signals (GUI thread): ``state_changed(str)`` idle/loading/generating;
    ``load_started(str path)``; ``load_progress(float)`` (0 to 1, as the weights are read);
    ``model_loaded(LoadedModel)``; ``load_failed(str path, EngineError)`` (the model loaded
    before, if any, is still loaded); ``model_unloaded()``; ``answers_changed(int)`` how many
    answers are being written; ``rate_changed(float tok/s)`` all of them together, while
    generating; ``engine_failed(EngineError)`` when the engine itself broke;
    ``remote_selected(str | None)`` when the chosen remote model changes (None: back to the
    local model).
    """

    state_changed = Signal(str)
    load_started = Signal(str)
    load_progress = Signal(float)
    model_loaded = Signal(object)
    load_failed = Signal(str, object)
    model_unloaded = Signal()
    answers_changed = Signal(int)
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
        # the draft model to load with a model's path, as Settings chose (ModelChoices.draft_for)
        self.draft_for: Callable[[str], str | None] | None = None
        self._answer_models: dict[JobHandle, str | None] = {}  # handle -> its model id
        self._retiring: set[str] = set()  # model ids to unload once their answers are done
        self._deltas: deque[tuple[float, int]] = deque()  # (time, tokens) within RATE_WINDOW
        self._rate_timer = QTimer(self)
        self._rate_timer.setInterval(RATE_INTERVAL_MS)
        self._rate_timer.timeout.connect(self._on_rate_timer)
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

    @property
    def takes_images(self) -> bool:
        """Whether the model chats go to now takes images: the local model, loaded with a
        vision projector, and no remote model chosen. Re-read on ``model_loaded``,
        ``model_unloaded`` and ``remote_selected``."""
        return self.remote_model is None and self.loaded is not None and self.loaded.vision

    @property
    def running_answers(self) -> int:
        """Answers (chat jobs) submitted from the app and not finished yet."""
        return len(self._answer_models)

    def _update_state(self) -> None:
        state = LOADING if self.loading_path else GENERATING if self._answer_models else IDLE
        if state != self._state:
            self._state = state
            self.state_changed.emit(state)

    # -- models ---------------------------------------------------------------------------

    def load(self, path: str, params: LoadParams | None = None) -> JobHandle:
        """Load a model to chat with. The one loaded now stays until this one has loaded
        (a reload of the same file replaces it). The GUI hears back via signals. A projector
        the library keeps beside the model is loaded with it unless ``params`` names one."""
        previous = self._load_handle
        self.loading_path = path
        self.load_fraction = None
        self.load_started.emit(path)
        self._update_state()
        params = params or load_params(self.settings)
        draft = self.draft_for(path) if self.draft_for and params.draft_model is None else None
        if draft is not None:  # speculative decoding with a draft model (Settings)
            params = replace(params, draft_model=draft)
        if params.mmproj is None:  # a vision model in the library loads as one, no step needed
            projector = projector_beside(path)
            if projector is not None:
                params = replace(params, mmproj=str(projector))
        request = LoadRequest(path, params, api_model_id(path))
        handle = self.bridge.submit(request)
        self._load_handle = handle
        handle.progress.connect(self._on_load_progress)
        handle.finished.connect(self._on_load_finished)
        handle.failed.connect(self._on_load_failed)
        if previous is not None and previous.final is None:
            previous.cancel()  # the newer choice wins; what it loads anyway is unloaded
        return handle

    def unload(self) -> None:
        for handle in list(self._answer_models):
            handle.cancel()
        self.bridge.submit(UnloadRequest(None))
        self._retiring.clear()
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
        result = event.result
        if self.sender() is not self._load_handle:  # superseded by a newer load
            if isinstance(result, LoadedModel) and not self._in_use(result.model_id):
                self._retire(result.model_id)
            return
        path = self.loading_path
        self.loading_path = None
        self._load_handle = None
        if isinstance(result, LoadedModel):
            self.loaded = result
            self._retiring.discard(result.model_id)
            self.settings.set("ui.last_model", result.path)
            self.model_loaded.emit(result)
            # One model at a time in the app: the others go (the API may have loaded some).
            for model in self.worker.loaded_models():
                if model.model_id != result.model_id:
                    self._retire(model.model_id)
        elif event.reason == "cancelled":
            self.load_failed.emit(path or "", EngineError("Loading was cancelled."))
        self._update_state()

    @Slot(object)
    def _on_load_failed(self, event: Failed) -> None:
        if self.sender() is not self._load_handle:
            return
        path = self.loading_path or ""
        self.loading_path = None
        self._load_handle = None
        self._update_state()
        loaded_ids = {m.model_id for m in self.worker.loaded_models()}
        if self.loaded is not None and self.loaded.model_id not in loaded_ids:
            # Only a reload of the same model replaces it before the new one is in.
            self.loaded = None
            self.model_unloaded.emit()
        error = event.error
        if isinstance(error, OutOfMemoryError) and self.loaded is not None:
            still = (
                f"{model_name(self.loaded.path)} is still loaded and uses memory too: unload "
                "it (model menu → Unload model) and try again."
            )
            if isinstance(error, ModelTooLargeError):
                error = ModelTooLargeError(
                    f"{error} {still}",
                    error.fits_n_ctx,
                    error.needed_bytes,
                    error.available_bytes,
                )
            else:
                error = OutOfMemoryError(f"{error} {still}", error.fits_n_ctx)
        self.load_failed.emit(path, error)
        if isinstance(error, EngineCrashedError):
            self.engine_failed.emit(error)

    def _in_use(self, model_id: str) -> bool:
        """Whether the app chats with this model id, or is loading it again."""
        loading = api_model_id(self.loading_path) if self.loading_path else None
        current = self.loaded.model_id if self.loaded is not None else None
        return model_id in (loading, current)

    def _retire(self, model_id: str) -> None:
        """Unload a model the app no longer chats with, once its answers are written."""
        if any(mid == model_id for mid in self._answer_models.values()):
            self._retiring.add(model_id)
        else:
            self._retiring.discard(model_id)
            self.bridge.submit(UnloadRequest(model_id))

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
        remote id. Any number may run at once; each has its own handle to stop it."""
        remote = is_remote_id(request.model)
        handle = self.bridge.submit(request, self._submit_remote if remote else None)
        model_id = request.model or (self.loaded.model_id if self.loaded else None)
        self._answer_models[handle] = None if remote else model_id
        handle.delta.connect(self._on_answer_delta)
        handle.done.connect(self._on_answer_done)
        self._update_state()
        self.answers_changed.emit(len(self._answer_models))
        return handle

    def _submit_remote(self, request: Request, sink: Sink) -> Job:  # a bridge thread
        if self.router is None:
            raise EngineError("Remote models are not available here.")
        return self.router.submit(request, sink)

    @Slot(str, int)
    def _on_answer_delta(self, _text: str, tokens: int) -> None:
        # Every answer's deltas, all of them a few times a second: a status line need not
        # change with each one (each change lays the window's status bar out again).
        self._deltas.append((time.perf_counter(), tokens))
        if not self._rate_timer.isActive():
            self._rate_timer.start()

    @Slot()
    def _on_rate_timer(self) -> None:
        now = time.perf_counter()
        deltas = self._deltas
        while deltas and now - deltas[0][0] > RATE_WINDOW:
            deltas.popleft()
        if not deltas:
            self._rate_timer.stop()
            return
        span = now - deltas[0][0]
        if span > 0.2:
            # The first delta's tokens were made before the window began.
            self.rate_changed.emit((sum(n for _, n in deltas) - deltas[0][1]) / span)

    @Slot(object)
    def _on_answer_done(self, event: Finished | Failed) -> None:
        handle = self.sender()
        if isinstance(handle, JobHandle) and handle in self._answer_models:
            model_id = self._answer_models.pop(handle)
            if model_id in self._retiring and model_id not in self._answer_models.values():
                self._retire(model_id)
            self.answers_changed.emit(len(self._answer_models))
        if not self._answer_models:
            self._deltas.clear()
            self._rate_timer.stop()
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
