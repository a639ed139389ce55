"""The app's chat first, on the real Gemma 3 270M model: with every slot busy with API streams
and more API requests waiting, the app's path (the token counter's TokenizeRequest, then its
ChatRequest with priority 1) is not queued behind them: the count comes back while the API
streams run, and the chat takes the next slot that frees. Order of events, never time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from app.engine.types import (
    ChatRequest,
    CompletionRequest,
    EmbeddingRequest,
    Event,
    Finished,
    LoadedModel,
    LoadParams,
    SamplingParams,
    Started,
    TokenizeRequest,
)
from app.engine.worker import EngineWorker, Job
from tests.helpers.engine_checks import ENDLESS


def test_the_apps_token_count_and_chat_go_ahead_of_api_streams_waiting_for_a_slot(
    gemma_path: Path,
) -> None:
    worker = EngineWorker()
    order: list[str] = []
    lock = threading.Lock()

    def sink_for(name: str, streaming: threading.Event | None = None) -> Callable[[Event], None]:
        def sink(e: Event) -> None:
            if isinstance(e, Started | Finished):
                with lock:
                    order.append(f"{name}:{type(e).__name__}")
            elif streaming is not None:
                streaming.set()  # a Delta: this stream holds its slot and writes

        return sink

    try:
        params = LoadParams(n_ctx=4096, n_parallel=2, flash_attn=False)
        loaded: LoadedModel = worker.load(str(gemma_path), params).result(120)
        running: list[Job] = []
        for i in range(2):  # every slot: API streams that never end by themselves
            streaming = threading.Event()
            request = CompletionRequest(f"API stream {i}: a long story", ENDLESS)
            running.append(worker.submit(request, sink_for(f"running-{i}", streaming)))
            assert streaming.wait(120)
        waiting = [
            worker.submit(
                CompletionRequest(f"API request {i}", SamplingParams(max_tokens=2)),
                sink_for(f"api-{i}"),
            )
            for i in range(3)
        ]
        # the app's token counter (app/ui/chat/context.py) asks for counts first ...
        count = worker.submit(
            TokenizeRequest("How far is the moon?", model=loaded.model_id, add_special=False),
            sink_for("count"),
        )
        final = count.wait(120)  # would wait for the API streams to end before this change
        assert isinstance(final, Finished) and final.result
        embedding = worker.submit(EmbeddingRequest(["the moon"]), sink_for("embed"))
        assert isinstance(embedding.wait(120), Finished)
        with lock:
            assert not any(name.startswith("api-") for name in order), order
        # ... then submits its chat (app/ui/chat/answers.py) with priority 1
        chat = ChatRequest(
            [{"role": "user", "content": "How far is the moon?"}],
            SamplingParams(temperature=0.0, max_tokens=4),
            model=loaded.model_id,
            priority=1,
        )
        app_chat = worker.submit(chat, sink_for("app"))
        running[0].cancel()  # a slot frees
        assert isinstance(app_chat.wait(120), Finished)
        running[1].cancel()
        for job in waiting:
            assert isinstance(job.wait(120), Finished)
        with lock:
            started = [name for name in order if name.endswith(":Started")]
        assert started == [
            "running-0:Started",
            "running-1:Started",
            "count:Started",
            "embed:Started",
            "app:Started",
            "api-0:Started",
            "api-1:Started",
            "api-2:Started",
        ]
    finally:
        worker.shutdown()
