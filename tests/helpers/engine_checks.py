"""What the engine's tests do on the real model: ask a chat and wait for its answer, and check
after a run that the context's sequences hold exactly what the prefix cache says they keep."""

from __future__ import annotations

from app.engine.llamacpp import LlamaCppModel
from app.engine.types import ChatRequest, Finished, SamplingParams
from app.engine.worker import EngineWorker

# Gemma's <eos> and <end_of_turn> banned: an answer writes text up to its max_tokens
NO_END = {1: -100.0, 106: -100.0}
# greedy and never ending: an answer that runs until it is cancelled (or its test is done)
ENDLESS = SamplingParams(temperature=0.0, max_tokens=100_000, logit_bias=NO_END)

# a JSON object the model is asked to copy, constrained to this schema (speculation's tests)
NAME_COUNT = '{"name": "apples", "count": 12}'
NAME_COUNT_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["name", "count"],
}


def chat(worker: EngineWorker, text: str, sampling: SamplingParams, **kw: object) -> Finished:
    """One user message's answer, which must finish."""
    request = ChatRequest([{"role": "user", "content": text}], sampling, **kw)  # type: ignore[arg-type]
    final = worker.submit(request).wait(900)
    assert isinstance(final, Finished), final
    return final


def model_of(worker: EngineWorker) -> LlamaCppModel:
    (model,) = worker._state.models.values()
    assert isinstance(model, LlamaCppModel)
    return model


def assert_no_leak(worker: EngineWorker, sliding_window: bool = True) -> None:
    """Every sequence of the context holds exactly what the prefix cache says it keeps (and,
    with ``sliding_window``, nothing before the model's sliding window that it may reuse)."""
    model = model_of(worker)
    scheduler = worker._state.schedulers[model.model_id]
    assert not scheduler.slots
    for entry in scheduler.cache.entries:
        assert not entry.busy
        assert model.seq_pos_max(entry.seq) == len(entry.tokens) - 1, entry
        if (
            sliding_window and entry.tokens
        ):  # llama.cpp may have reused cells outside every sliding window
            assert 0 <= model.seq_pos_min(entry.seq) <= max(0, len(entry.tokens) - model.n_swa)
