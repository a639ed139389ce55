"""A fake engine worker for GUI tests and bench/gui_stream.py: its chat answers stream at the
same time, as Engine v2's batched scheduler writes them. One decoding thread takes a step at a
time, and each step gives every running answer its next word of canned Markdown (prose, a list,
a code block, a table). Loads, unloads and tokenizing run in order on a thread of their own.

It keeps the job contract (``Job``: Started, Delta…, exactly one final event, cancel from any
thread) and ``EngineWorker``'s public methods, and nothing of its internals, so the GUI's tests
do not depend on how the real scheduler works inside."""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from app.engine.types import (
    ChatRequest,
    Delta,
    EngineCrashedError,
    EngineError,
    Failed,
    Finished,
    LoadedModel,
    LoadProgress,
    LoadRequest,
    ModelNotLoadedError,
    ModelTooLargeError,
    Request,
    Started,
    Timings,
    TokenizeRequest,
    UnloadRequest,
    Usage,
)
from app.engine.worker import EngineWorker, Job, Sink

DEFAULT_LIMIT = 1000  # pieces of an answer without max_tokens
ANSWER = (
    "Sure. Here is a **short** explanation, then an example you can run. The idea is to keep "
    "the loop simple and let the `handler` do the work, so each piece stays easy to test.\n\n"
    "1. Read the events from the queue.\n2. Skip the ones you have seen.\n"
    "3. Hand the rest to the handler.\n\n"
    "```python\nimport queue\n\n\ndef drain(events: queue.Queue, handler) -> int:\n"
    "    seen = set()\n    count = 0\n    while not events.empty():\n"
    "        event = events.get()\n        if event.id in seen:\n            continue\n"
    "        seen.add(event.id)\n        handler(event)\n        count += 1\n"
    "    return count\n```\n\n"
    "The function returns how many events it handled, which makes it easy to log. A table of "
    "the trade-offs:\n\n"
    "| Approach | Speed | Memory |\n|---|---|---|\n| set of ids | fast | grows |\n"
    "| bloom filter | fast | fixed |\n\n"
)
_WORDS = ANSWER.split(" ")
PIECES = (*(word + " " for word in _WORDS[:-1]), _WORDS[-1])  # word-sized, like tokens


def _describe(request: LoadRequest) -> LoadedModel:
    n_ctx = request.params.n_ctx or 8192
    model_id = request.model_id or request.path
    return LoadedModel(model_id, request.path, n_ctx, n_ctx, 1, request.params, None, False, 0.0)


@dataclass(slots=True)
class _Answer:
    job: Job
    limit: int = DEFAULT_LIMIT
    prompt_tokens: int = 0
    pieces: list[str] = field(default_factory=list)
    started_at: float = field(default_factory=time.perf_counter)
    first_at: float | None = None


class ParallelFakeWorker(EngineWorker):
    """``tokens_per_second``: each answer's pace, one word per answer per step (None: as fast
    as possible). ``failing``: paths whose load fails with that error, as a broken file's
    would. ``most_at_once``: the most answers that were generating together."""

    def __init__(
        self,
        tokens_per_second: float | None = None,
        failing: dict[str, EngineError] | None = None,
    ) -> None:
        super().__init__()  # its thread idles: every job is handled here
        self.tokens_per_second = tokens_per_second
        self.failing = dict(failing or {})
        self.most_at_once = 0
        self._models: dict[str, LoadedModel] = {}  # in load order
        self._answers: list[_Answer] = []
        self._steps = threading.Condition()
        self._closing = False
        self._control: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._decode, name="fake-decode", daemon=True),
            threading.Thread(target=self._run_control, name="fake-control", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    @property
    def running(self) -> int:
        with self._steps:
            return len(self._answers)

    def loaded_models(self) -> list[Any]:
        return list(self._models.values())

    def models_in_use(self, kinds: tuple[type, ...]) -> set[str]:
        with self._steps:
            named = [getattr(a.job.request, "model", None) for a in self._answers]
        latest = next(reversed(self._models), None)
        return {model_id for model_id in (m or latest for m in named) if model_id is not None}

    def submit(self, request: Request, sink: Sink | None = None) -> Job:
        job = Job(request, sink)
        with self._steps:
            if self._closing:
                raise EngineCrashedError("The engine is shutting down.")
            if isinstance(request, ChatRequest):
                self._answers.append(_Answer(job))
                self.most_at_once = max(self.most_at_once, len(self._answers))
                self._steps.notify()
                return job
        self._control.put(job)
        return job

    def shutdown(self, timeout: float = 10.0) -> None:
        with self._steps:
            self._closing = True
            self._steps.notify()
        self._control.put(None)
        for thread in self._threads:
            thread.join(timeout)
        super().shutdown(timeout)

    # -- loads, unloads, tokenizing -------------------------------------------------------

    def _run_control(self) -> None:
        while (job := self._control.get()) is not None:
            job.emit(Started(job.id))
            try:
                job.finish(self._control_job(job))
            except EngineError as error:
                job.finish(Failed(job.id, error))

    def _control_job(self, job: Job) -> Finished:
        request = job.request
        if isinstance(request, LoadRequest):
            error = self.failing.get(request.path)
            # a refusal for memory is what Load anyway (force) overrules, as the real loader
            if error is not None and not (
                isinstance(error, ModelTooLargeError) and request.params.force
            ):
                raise error
            job.emit(LoadProgress(job.id, 1.0))
            model = _describe(request)
            self._models.pop(model.model_id, None)
            self._models[model.model_id] = model
            return Finished(job.id, "stop", result=model)
        if isinstance(request, UnloadRequest):
            for model_id in [request.model] if request.model else list(self._models):
                self._models.pop(model_id, None)
            return Finished(job.id, "stop")
        if isinstance(request, TokenizeRequest):
            self._model(request.model)
            tokens = list(range(max(1, len(request.text) // 4)))
            return Finished(job.id, "stop", Usage(len(tokens)), result=tokens)
        raise EngineError(f"The fake engine does not do {type(request).__name__}")

    def _model(self, model_id: str | None) -> LoadedModel:
        models = self._models
        key = model_id or next(reversed(models), None)
        if key is None or key not in models:
            raise ModelNotLoadedError(f"Model {model_id!r} is not loaded.")
        return models[key]

    # -- answers: one decoding thread, one word per answer per step -----------------------

    def _decode(self) -> None:
        while True:
            with self._steps:
                while not self._answers and not self._closing:
                    self._steps.wait()
                if self._closing:
                    answers, self._answers = self._answers, []
                    for answer in answers:
                        answer.job.finish(Finished(answer.job.id, "cancelled"))
                    return
                answers = list(self._answers)
            for answer in answers:
                if not self._step(answer):
                    with self._steps:
                        self._answers.remove(answer)
            rate = self.tokens_per_second
            time.sleep(1.0 / rate if rate else 0)

    def _step(self, answer: _Answer) -> bool:
        """The next word of ``answer``; False once it has finished."""
        job = answer.job
        request = job.request
        assert isinstance(request, ChatRequest)
        if answer.first_at is None and not answer.pieces:
            job.emit(Started(job.id))
            try:
                self._model(request.model)
            except EngineError as error:
                job.finish(Failed(job.id, error))
                return False
            prompt = "\n".join(str(m.get("content") or "") for m in request.messages)
            answer.prompt_tokens = max(1, len(prompt) // 4)
            answer.limit = request.sampling.max_tokens or DEFAULT_LIMIT
        if job.cancelled.is_set():
            self._finish(answer, "cancelled")
            return False
        piece = PIECES[len(answer.pieces) % len(PIECES)]
        answer.pieces.append(piece)
        if answer.first_at is None:
            answer.first_at = time.perf_counter()
        job.emit(Delta(job.id, piece, 1))
        if len(answer.pieces) >= answer.limit:
            self._finish(answer, "length")
            return False
        return True

    def _finish(self, answer: _Answer, reason: str) -> None:
        now = time.perf_counter()
        count = len(answer.pieces)
        first = answer.first_at or now
        generating = now - first
        timings = Timings(
            time_to_first_token=first - answer.started_at,
            generation_seconds=generating,
            generation_tokens_per_second=count / generating if generating > 0 else 0.0,
        )
        job = answer.job
        usage = Usage(answer.prompt_tokens, count)
        job.finish(Finished(job.id, reason, usage, timings, "".join(answer.pieces)))  # type: ignore[arg-type]
