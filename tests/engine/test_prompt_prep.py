"""Prompts rendered and tokenized off the engine thread (app/engine/prompt_prep.py), on the real
Gemma 3 270M model: while a long prompt is being tokenized, a running answer keeps streaming;
a job cancelled while its prompt is tokenized ends at once; prompts are prepared highest
priority first, then in order. The tokenizer is held at a gate the test opens, so every check
is an order of events, never a time."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from app.engine import scheduler
from app.engine.llamacpp import LlamaCppModel
from app.engine.types import (
    ChatRequest,
    CompletionRequest,
    Delta,
    Event,
    Failed,
    Finished,
    LoadParams,
    LoadRequest,
    SamplingParams,
)
from app.engine.worker import EngineWorker, Job
from tests.helpers.engine_checks import ENDLESS

LONG = "The lighthouse keeper counted the waves. " * 2500  # 105,000 characters
WAIT = 300  # seconds: only a broken engine waits this long (the gate is opened by events)


@dataclass
class Gate:
    """Holds the tokenizing of a text containing ``marker`` until ``opened`` (or ``until``)."""

    marker: str = "\0never"
    until: Callable[[], bool] | None = None  # open once this is true (checked each 10 ms)
    opened: threading.Event = field(default_factory=threading.Event)
    tokenizing: threading.Event = field(default_factory=threading.Event)
    threads: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # every tokenized text, in order

    def wait(self, text: str) -> None:
        self.texts.append(text)
        if self.marker not in text:
            return
        self.threads.append(threading.current_thread().name)
        self.tokenizing.set()
        for _ in range(WAIT * 100):
            if self.opened.wait(0.01) or (self.until is not None and self.until()):
                return


class Deltas:
    """A sink counting a job's text deltas."""

    def __init__(self) -> None:
        self.count = 0
        self.first = threading.Event()
        self.final: Event | None = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, Delta) and event.text:
            self.count += 1
            self.first.set()
        elif isinstance(event, Finished | Failed):
            self.final = event


@pytest.fixture(scope="module")
def engine(gemma_path: Path) -> Iterator[tuple[EngineWorker, list[Gate]]]:
    gates = [Gate()]  # the test in progress replaces gates[0]

    def factory(request: LoadRequest, progress: Callable[[float], bool]) -> Any:
        model = LlamaCppModel(request.path, request.params, request.model_id, progress)
        tokenize = model.tokenize

        def gated(text: str, add_special: bool = True) -> list[int]:
            gates[0].wait(text)
            return tokenize(text, add_special)

        model.tokenize = gated  # type: ignore[method-assign]
        return model

    worker = EngineWorker(model_factory=factory)
    try:
        params = LoadParams(n_ctx=4096, n_parallel=4, flash_attn=False)
        worker.load(str(gemma_path), params).result(WAIT)
        yield worker, gates
    finally:
        worker.shutdown()


def stream(worker: EngineWorker) -> tuple[Job, Deltas]:
    deltas = Deltas()
    job = worker.submit(CompletionRequest("A long story about the sea:", ENDLESS), deltas)
    assert deltas.first.wait(WAIT)
    return job, deltas


def chat(text: str, **kwargs: Any) -> ChatRequest:
    sampling = SamplingParams(temperature=0.0, max_tokens=2)
    return ChatRequest([{"role": "user", "content": text}], sampling, **kwargs)


def test_an_answer_streams_while_a_long_prompt_is_tokenized(
    engine: tuple[EngineWorker, list[Gate]],
) -> None:
    worker, gates = engine
    running, deltas = stream(worker)
    seen: list[int] = []
    # The tokenizer holds the long prompt until the running answer wrote 5 more tokens:
    # on the engine thread that never happens (it is the thread that would write them).
    gate = gates[0] = Gate("lighthouse keeper", until=lambda: deltas.count >= seen[0] + 5)
    seen.append(deltas.count)
    long_job = worker.submit(chat(LONG))
    final = long_job.wait(WAIT)
    assert deltas.count >= seen[0] + 5, "the answer stopped while the prompt was tokenized"
    assert gate.threads and "ember-engine" not in gate.threads, gate.threads
    # 26k tokens do not fit the 4096 of context: found out after tokenizing, as before
    assert isinstance(final, Failed) and "context" in str(final.error)
    running.cancel()
    assert isinstance(running.wait(WAIT), Finished)


def test_a_job_cancelled_while_its_prompt_is_tokenized_ends_at_once(
    engine: tuple[EngineWorker, list[Gate]],
) -> None:
    worker, gates = engine
    running, deltas = stream(worker)
    gate = gates[0] = Gate("lighthouse keeper")
    long_job = worker.submit(chat(LONG))
    assert gate.tokenizing.wait(WAIT)
    long_job.cancel()
    final = long_job.wait(WAIT)
    assert not gate.opened.is_set()  # ended while the tokenizer still holds its prompt
    assert isinstance(final, Finished) and final.reason == "cancelled"
    gate.opened.set()  # its prompt is ready now: dropped, no slot opens for it
    after = deltas.count
    short = worker.submit(chat("Hi"))  # takes the slot the cancelled job held
    assert isinstance(short.wait(WAIT), Finished)
    assert deltas.count > after and running.final is None  # the answer went on throughout
    running.cancel()
    assert isinstance(running.wait(WAIT), Finished)
    assert worker.running == 0


def test_prompts_are_prepared_the_apps_first_then_in_order(
    engine: tuple[EngineWorker, list[Gate]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduler, "INLINE_CHARS", 0)  # every prompt: off the engine thread
    worker, gates = engine
    gate = gates[0] = Gate("first in line")
    first = worker.submit(chat("first in line"))
    assert gate.tokenizing.wait(WAIT)  # the preparing thread is busy with it
    api = [worker.submit(chat(f"API request {i}")) for i in range(2)]
    app = worker.submit(chat("the app's chat", priority=1))
    gate.opened.set()
    for job in [first, *api, app]:
        assert isinstance(job.wait(WAIT), Finished)
    order = [
        next(
            name
            for name in ("first in line", "the app", "API request 0", "API request 1")
            if name in text
        )
        for text in gate.texts
        if "first in line" in text or "the app" in text or "API request" in text
    ]
    assert order == ["first in line", "the app", "API request 0", "API request 1"]
