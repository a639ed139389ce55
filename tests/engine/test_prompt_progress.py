"""A long prompt says how far it has been read (PromptProgress after each chunk but the last)
when its request asks (the app's chats), so the app can show "Reading the prompt… 40%"
instead of a silent wait; an API request (which does not ask) gets none, and its stream's
keep-alives are not held back. The scripted model checks every batch as llama.cpp would."""

from __future__ import annotations

from app.engine.types import (
    ChatMessage,
    ChatRequest,
    CompletionRequest,
    Delta,
    Event,
    Finished,
    LoadParams,
    PromptProgress,
    SamplingParams,
)
from tests.helpers.scripted_model import worker_with


def test_a_long_prompt_reports_its_chunks_and_a_short_one_nothing() -> None:
    worker, _model = worker_with(params=LoadParams(n_ctx=4096, n_parallel=2, n_batch=64))
    try:
        events: list[Event] = []
        long: list[ChatMessage] = [{"role": "user", "content": "x" * 4 * 300}]
        request = ChatRequest(long, SamplingParams(max_tokens=3), prompt_progress=True)
        events = list(worker.submit(request).events())
        progress = [e for e in events if isinstance(e, PromptProgress)]
        assert len(progress) >= 3
        assert [p.done for p in progress] == sorted(p.done for p in progress)
        assert all(p.done < p.total and p.total == progress[0].total for p in progress)
        assert progress[0].done <= 64  # one chunk of n_batch tokens
        first_token = next(i for i, e in enumerate(events) if isinstance(e, Delta))
        assert events.index(progress[-1]) < first_token  # all of it before the answer
        assert isinstance(events[-1], Finished)
        short = worker.submit(
            ChatRequest([{"role": "user", "content": "short"}], prompt_progress=True)
        )
        assert not [e for e in short.events() if isinstance(e, PromptProgress)]
        # not asked for (an API request): none, however long the prompt
        quiet = worker.submit(CompletionRequest("y" * 4 * 300, SamplingParams(max_tokens=3)))
        assert not [e for e in quiet.events() if isinstance(e, PromptProgress)]
    finally:
        worker.shutdown()
