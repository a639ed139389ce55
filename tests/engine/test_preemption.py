"""Preemption on the real Gemma 3 270M model: when two answers together outgrow the context,
the newest pauses (its KV given up) and resumes once the other has finished, reading what it
held again; both write every token asked for, and neither ends as "length" for sharing the
context. The scripted-model version (exact texts, the cache's cells) is in test_scheduler.py."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from app.engine.types import (
    CompletionRequest,
    Event,
    Failed,
    Finished,
    LoadParams,
    SamplingParams,
)
from app.engine.worker import EngineWorker
from tests.helpers.engine_checks import NO_END, assert_no_leak


def test_answers_that_outgrow_the_context_together_pause_and_resume(gemma_path: Path) -> None:
    worker = EngineWorker()
    order: list[str] = []
    lock = threading.Lock()

    def sink_for(name: str) -> Callable[[Event], None]:
        def sink(e: Event) -> None:
            if isinstance(e, Finished | Failed):
                with lock:
                    order.append(name)

        return sink

    try:
        # the smallest context; one thread (two spin-wait each other out on a busy machine)
        params = LoadParams(n_ctx=512, n_parallel=2, flash_attn=False, draft_max=0, n_threads=1)
        worker.load(str(gemma_path), params).result(120)
        sampling = SamplingParams(temperature=0.0, max_tokens=280, logit_bias=NO_END)
        jobs = [
            worker.submit(CompletionRequest(f"Story {name}: once upon a time", sampling),
                          sink_for(name))
            for name in ("first", "second")
        ]  # fmt: skip
        finals = [job.wait(900) for job in jobs]
        assert all(isinstance(f, Finished) for f in finals), finals
        assert [f.reason for f in finals] == ["length", "length"]
        assert [f.usage.completion_tokens for f in finals] == [280, 280]
        assert order == ["first", "second"]  # the newest waited for the first to finish
        assert all(isinstance(f, Finished) and f.result.strip() for f in finals)
        assert_no_leak(worker)
    finally:
        worker.shutdown()
