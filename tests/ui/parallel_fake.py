"""An engine worker whose chat answers stream at the same time, as Engine v2's batched
scheduler writes them: each chat job runs on a thread of its own with the fake model
(fake_model.py); loads, unloads and tokenizing stay on the worker's one thread. For GUI unit
tests of several chats answering at once, and for bench/gui_stream.py."""

from __future__ import annotations

import threading

from app.engine.types import (
    ChatRequest,
    EngineCrashedError,
    EngineError,
    Failed,
    LoadRequest,
    Request,
    Started,
)
from app.engine.worker import EngineWorker, Job, Sink
from tests.ui.fake_model import FakeModel


class ParallelFakeWorker(EngineWorker):
    """``tokens_per_second``: each answer's pace (None: as fast as possible).
    ``failing``: paths whose load fails with that error, as a broken file's would."""

    def __init__(
        self,
        tokens_per_second: float | None = None,
        failing: dict[str, EngineError] | None = None,
    ) -> None:
        self.tokens_per_second = tokens_per_second
        self.failing = dict(failing or {})
        self.most_at_once = 0  # the most answers that were generating together
        self._answers: set[Job] = set()
        self._answers_lock = threading.Lock()
        self._closing = False
        super().__init__(model_factory=self._make_model)

    @property
    def generating(self) -> int:
        with self._answers_lock:
            return len(self._answers)

    def _make_model(self, request: LoadRequest, progress: object) -> FakeModel:
        error = self.failing.get(request.path)
        if error is not None:
            raise error
        return FakeModel(request, self.tokens_per_second)

    def submit(self, request: Request, sink: Sink | None = None) -> Job:
        if not isinstance(request, ChatRequest):
            return super().submit(request, sink)
        job = Job(request, sink)
        with self._answers_lock:
            if self._closing:
                raise EngineCrashedError("The engine is shutting down.")
            self._answers.add(job)
            self.most_at_once = max(self.most_at_once, len(self._answers))
        threading.Thread(target=self._answer, args=(job,), name="fake-answer", daemon=True).start()
        return job

    def _answer(self, job: Job) -> None:
        request = job.request
        assert isinstance(request, ChatRequest)
        job.emit(Started(job.id))
        try:
            final = self._do_chat(job, self._require_model(request.model), request)
        except EngineError as error:
            final = Failed(job.id, error)
        finally:
            with self._answers_lock:
                self._answers.discard(job)
        job.finish(final)

    def shutdown(self, timeout: float = 10.0) -> None:
        with self._answers_lock:
            self._closing = True
            answers = list(self._answers)
        for job in answers:
            job.cancel()
        super().shutdown(timeout)
