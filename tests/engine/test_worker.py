"""The engine worker on the real Gemma 3 270M model: streaming, final events, cancel, KV reuse."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from app.engine.types import (
    BadRequestError,
    ChatRequest,
    CompletionRequest,
    ContextOverflowError,
    Delta,
    EmbeddingRequest,
    Event,
    Failed,
    Finished,
    LoadedModel,
    LoadParams,
    ModelNotLoadedError,
    RenderPromptRequest,
    SamplingParams,
    Started,
    TokenizeRequest,
    UnloadRequest,
)
from app.engine.worker import EngineWorker, Job

GREEDY = SamplingParams(temperature=0.0, max_tokens=12)


def collect(worker: EngineWorker, request: object, timeout: float = 120) -> list[Event]:
    return list(worker.submit(request).events(timeout=timeout))  # type: ignore[arg-type]


def test_load_reports_context_threads_and_template(loaded: LoadedModel) -> None:
    assert loaded.n_ctx == 4096
    assert loaded.n_ctx_train == 32768
    assert loaded.n_threads >= 1
    assert loaded.chat_template is None  # Gemma 3 270M base ships without one
    assert loaded.has_fim is False


def test_automatic_context_and_threads(gemma_path: Path) -> None:
    import psutil

    w = EngineWorker()
    try:
        info: LoadedModel = w.load(str(gemma_path)).result(120)
    finally:
        w.shutdown()
    assert info.n_ctx == 8192  # the default, below the trained 32768, memory permitting
    assert info.n_threads == (psutil.cpu_count(logical=False) or 1)


def test_completion_streams_deltas_then_one_final_event(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    events = collect(worker, CompletionRequest("The capital of France is", GREEDY))
    assert isinstance(events[0], Started)
    deltas = [e for e in events if isinstance(e, Delta)]
    finals = [e for e in events if isinstance(e, Finished | Failed)]
    assert len(finals) == 1 and events[-1] is finals[0]
    final = finals[0]
    assert isinstance(final, Finished)
    assert final.reason == "length"
    assert final.usage.completion_tokens == 12 == sum(d.token_count for d in deltas)
    assert final.usage.prompt_tokens == 6
    assert final.result == "".join(d.text for d in deltas)
    assert "France" in final.result or "Paris" in final.result or final.result.strip()
    t = final.timings
    assert t.time_to_first_token > 0  # measured; how fast is bench/'s business
    assert t.prompt_tokens_per_second > 0 and t.generation_tokens_per_second > 0


def test_greedy_is_deterministic_and_seed_reproduces(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    # Each run starts from the same KV-cache state: llama.cpp's numerics depend on how the
    # prompt is split into batches, so a near-tie can flip between a cold and a warm cache.
    def from_same_state(prompt: str, sampling: SamplingParams) -> str:
        worker.run(CompletionRequest("Unrelated warm-up text", GREEDY))
        return str(worker.run(CompletionRequest(prompt, sampling)))

    assert from_same_state("Once upon a time", GREEDY) == from_same_state(
        "Once upon a time", GREEDY
    )
    seeded = SamplingParams(temperature=1.0, seed=1234, max_tokens=12)
    c = from_same_state("My favourite food is", seeded)
    assert c == from_same_state("My favourite food is", seeded)
    other = [
        from_same_state(
            "My favourite food is", SamplingParams(temperature=1.0, seed=s, max_tokens=12)
        )
        for s in (1, 2, 3)
    ]
    assert len({c, *other}) > 1  # the seed matters


def test_stop_string_ends_with_stop_and_is_not_in_output(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    worker.run(CompletionRequest("Unrelated warm-up text", GREEDY))
    free = worker.run(CompletionRequest("The capital of France is", GREEDY))
    word = free.split()[2]
    worker.run(
        CompletionRequest("Unrelated warm-up text", GREEDY)
    )  # a word the model is sure to write
    job = worker.submit(
        CompletionRequest(
            "The capital of France is", SamplingParams(temperature=0.0, max_tokens=12, stop=(word,))
        )
    )
    final = job.wait(60)
    assert isinstance(final, Finished) and final.reason == "stop"
    assert final.stop_sequence == word  # which stop string ended it (Anthropic reports it)
    assert word not in final.result
    assert free.startswith(final.result)


def test_chat_uses_fallback_template_and_its_stop(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    chat = ChatRequest(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}],
        SamplingParams(temperature=0.0, max_tokens=40),
    )
    prompt = worker.run(RenderPromptRequest(chat))
    assert prompt == "Be brief.\n\nUser: Hi there\nAssistant:"
    final = worker.submit(chat).wait(60)
    assert isinstance(final, Finished)
    assert "\nUser:" not in final.result
    # Left alone, this base model answers by writing "\nAssistant: <the question>" turn after
    # turn until max_tokens; the fallback stops it at the first role marker.
    looping = ChatRequest(
        [{"role": "user", "content": "Write a Python function that checks for palindromes."}],
        SamplingParams(temperature=0.0, max_tokens=120),
    )
    final = worker.submit(looping).wait(60)
    assert isinstance(final, Finished) and final.reason == "stop", final
    assert "Assistant:" not in final.result


def test_cancel_between_tokens(worker: EngineWorker, loaded: LoadedModel) -> None:
    job = worker.submit(
        CompletionRequest("Count: 1, 2, 3,", SamplingParams(temperature=0.0, max_tokens=2000))
    )
    seen = 0
    for event in job.events(timeout=60):
        if isinstance(event, Delta):
            seen += 1
            if seen == 5:
                job.cancel()
    final = job.wait()
    assert isinstance(final, Finished) and final.reason == "cancelled"
    assert 5 <= final.usage.completion_tokens < 20


def test_cancel_during_prompt_processing_stops_reading_the_prompt(
    worker: EngineWorker, loaded: LoadedModel, caplog: pytest.LogCaptureFixture
) -> None:
    long_prompt = "The quick brown fox jumps over the lazy dog. " * 300  # ~3,000 tokens
    n = len(worker.run(TokenizeRequest(long_prompt)))
    assert 2500 <= n <= 4000
    events: list[Event] = []
    scheduler = worker._state.schedulers[loaded.model_id]
    read: list[int] = []

    job = worker.submit(CompletionRequest(long_prompt, SamplingParams(max_tokens=5)), events.append)
    # wait until the engine has read a first chunk of the prompt (a failsafe, not a ceiling)
    deadline = time.monotonic() + 120
    while not read and time.monotonic() < deadline:
        read = [len(s.tokens) for s in list(scheduler.slots) if s.job is job and s.tokens]
        time.sleep(0.01)
    assert read and read[0] < n
    with caplog.at_level(logging.DEBUG, logger="llama.cpp"):
        job.cancel()  # as a rule during a chunk's decode: llama.cpp's decode stops, aborted
        final = job.wait(60)
    assert isinstance(final, Finished) and final.reason == "cancelled"
    # an abort is a cancel, not a fault: llama.cpp's "failed to decode, ret = 2" and the like
    # are debug lines, not warnings printed to an `ember serve` terminal
    native = [r for r in caplog.records if r.name == "llama.cpp"]
    assert not [r.getMessage() for r in native if r.levelno >= logging.WARNING]
    assert final.usage.completion_tokens == 0
    assert not any(isinstance(e, Delta) for e in events)
    # it stopped before the end of the prompt: the cached sequence holds only what was read
    tokens = worker.run(TokenizeRequest(long_prompt))
    kept = [e for e in scheduler.cache.entries if e.tokens[: read[0]] == tokens[: read[0]]]
    assert kept and all(read[0] <= len(e.tokens) < n for e in kept)
    # the worker serves the next job normally, with the same answer as ever
    again = worker.submit(CompletionRequest("The capital of France is", GREEDY)).wait(60)
    assert isinstance(again, Finished) and again.reason == "length"
    assert again.usage.completion_tokens == 12 and again.result.strip()


def test_cancel_while_queued(worker: EngineWorker, loaded: LoadedModel) -> None:
    first = worker.submit(
        CompletionRequest("Hello", SamplingParams(temperature=0.0, max_tokens=30))
    )
    queued = worker.submit(CompletionRequest("Hello", GREEDY))
    queued.cancel()
    final = queued.wait(5)
    assert isinstance(final, Finished) and final.reason == "cancelled"
    assert isinstance(first.wait(60), Finished)


def test_follow_up_turn_reuses_kv_cache(worker: EngineWorker, loaded: LoadedModel) -> None:
    sampling = SamplingParams(temperature=0.0, max_tokens=16)
    history = [{"role": "user", "content": "Tell me about the sea. " * 20}]
    first = worker.submit(ChatRequest(list(history), sampling)).wait(60)  # type: ignore[arg-type]
    assert isinstance(first, Finished)
    history += [
        {"role": "assistant", "content": first.result},
        {"role": "user", "content": "And the sky?"},
    ]
    second = worker.submit(ChatRequest(list(history), sampling)).wait(60)  # type: ignore[arg-type]
    assert isinstance(second, Finished)
    u1, u2 = first.usage, second.usage
    assert u2.prompt_tokens > u1.prompt_tokens + u1.completion_tokens - 2
    # everything up to the first turn's prompt was reused; only the tail was evaluated
    assert u2.cached_tokens >= u1.prompt_tokens
    assert u2.evaluated_prompt_tokens <= u2.prompt_tokens - u1.prompt_tokens
    assert u2.evaluated_prompt_tokens < 40


def test_gbnf_grammar_constrains_output(worker: EngineWorker, loaded: LoadedModel) -> None:
    grammar = 'root ::= ("yes" | "no") "."'
    out = worker.run(
        CompletionRequest(
            "Is the sky blue? Answer:", SamplingParams(grammar=grammar, max_tokens=10)
        )
    )
    assert out in ("yes.", "no.")


def test_json_schema_output_parses(worker: EngineWorker, loaded: LoadedModel) -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 16},
            "population": {"type": "integer", "minimum": 0, "maximum": 99999999},
        },
        "required": ["city", "population"],
        "additionalProperties": False,
    }
    out = worker.run(
        CompletionRequest(
            "A JSON record about Paris:", SamplingParams(json_schema=schema, max_tokens=80, seed=7)
        )
    )
    data = json.loads(out)
    assert set(data) == {"city", "population"}
    assert isinstance(data["city"], str) and isinstance(data["population"], int)


def test_logit_bias_forces_a_token(worker: EngineWorker, loaded: LoadedModel) -> None:
    token = worker.run(TokenizeRequest(" banana", add_special=False))
    assert len(token) == 1
    out = worker.run(
        CompletionRequest(
            "I like", SamplingParams(max_tokens=3, logit_bias={token[0]: 100.0}, seed=1)
        )
    )
    assert out == " banana" * 3


def test_tokenize_and_embeddings(worker: EngineWorker, loaded: LoadedModel) -> None:
    tokens = worker.run(TokenizeRequest("Hello world"))
    assert tokens[0] == 2  # BOS
    final = worker.submit(EmbeddingRequest(["Hello world", "Goodbye"])).wait(60)
    assert isinstance(final, Finished)
    vectors = final.result
    assert len(vectors) == 2 and len(vectors[0]) == 640
    assert abs(sum(x * x for x in vectors[0]) - 1.0) < 1e-3
    assert vectors[0] != vectors[1]
    assert final.usage.prompt_tokens >= 4


def test_embeddings_tokenize_each_input_once_and_refuse_too_long_ones(
    worker: EngineWorker, loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker.run(EmbeddingRequest(["warm-up"]))  # opens the embedding context
    model = worker._state.models[loaded.model_id]
    calls: list[object] = []
    original = model.tokenize

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(model, "tokenize", counting)
    final = worker.submit(EmbeddingRequest(["Hello world", "Goodbye", "Once more"])).wait(60)
    assert isinstance(final, Finished) and len(final.result) == 3
    assert len(calls) == 3, calls  # once per input, not once more to check its length
    too_long = worker.submit(EmbeddingRequest(["short", "word " * 9000])).wait(60)
    assert isinstance(too_long, Failed) and isinstance(too_long.error, ContextOverflowError)
    assert "an embedding covers at most 8,192" in str(too_long.error)
    # never cut silently, and the embedding context works as before afterwards
    again = worker.run(EmbeddingRequest(["Hello world"]))
    assert again[0] == pytest.approx(final.result[0], abs=1e-5)


def test_failed_event_when_no_model_is_loaded() -> None:
    w = EngineWorker()
    try:
        final = w.submit(CompletionRequest("hi")).wait(10)
        assert isinstance(final, Failed) and final.reason == "error"
        assert isinstance(final.error, ModelNotLoadedError)
        assert "Load a model first" in str(final.error)
        with pytest.raises(ModelNotLoadedError):
            w.run(TokenizeRequest("x"))
    finally:
        w.shutdown()


def test_prompt_longer_than_context_fails_cleanly(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    final = worker.submit(CompletionRequest("word " * 5000, GREEDY)).wait(60)
    assert isinstance(final, Failed)
    assert "context of 4096" in str(final.error)
    assert isinstance(worker.submit(CompletionRequest("Hi", GREEDY)).wait(60), Finished)


def test_logit_bias_out_of_range_is_a_clear_error(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    final = worker.submit(CompletionRequest("x", SamplingParams(logit_bias={10**9: 1.0}))).wait(30)
    assert isinstance(final, Failed) and "outside" in str(final.error)


def test_mirostat_and_typical_sampling_run(worker: EngineWorker, loaded: LoadedModel) -> None:
    for sampling in (
        SamplingParams(mirostat_mode=2, mirostat_tau=4.0, max_tokens=6, seed=3),
        SamplingParams(mirostat_mode=1, max_tokens=6, seed=3),
        SamplingParams(typical_p=0.5, presence_penalty=0.5, frequency_penalty=0.5, max_tokens=6),
    ):
        final = worker.submit(CompletionRequest("Hello", sampling)).wait(60)
        assert isinstance(final, Finished) and final.usage.completion_tokens == 6


def test_load_params_reach_llama_cpp(gemma_path: Path) -> None:
    """A quantized KV cache with flash attention and two threads loads and generates."""
    from app.engine.types import LoadParams

    w = EngineWorker()
    try:
        params = LoadParams(
            n_ctx=2048, n_threads=1, n_batch=256, flash_attn=True,
            cache_type_k="q8_0", cache_type_v="q8_0", use_mmap=False,
        )  # fmt: skip
        info: LoadedModel = w.load(str(gemma_path), params).result(120)
        assert (info.n_ctx, info.n_threads, info.params) == (2048, 1, params)
        final = w.submit(CompletionRequest("Hello", GREEDY)).wait(60)
        assert isinstance(final, Finished) and final.usage.completion_tokens == 12
        # unload frees the model: the next job has nothing to run on
        w.run(UnloadRequest())
        assert w.loaded_models() == []
    finally:
        w.shutdown()


@pytest.mark.parametrize("grammar", ["None", "root ::= (", 'start ::= "a"'])
def test_a_grammar_that_does_not_parse_is_a_clear_error(
    worker: EngineWorker, loaded: LoadedModel, grammar: str
) -> None:
    # llama.cpp would hand back a NULL sampler and the process would segfault; the grammar is
    # checked when the job is submitted, before it takes the engine
    with pytest.raises(BadRequestError, match="grammar does not parse"):
        worker.submit(CompletionRequest("x", SamplingParams(grammar=grammar)))
    assert isinstance(worker.submit(CompletionRequest("Hi", GREEDY)).wait(60), Finished)


def test_loading_reports_progress_and_can_be_cancelled(gemma_path: Path) -> None:
    """A load tells how far it is (llama.cpp's own count, in rising steps up to 1.0), and a
    cancelled load stops reading the file: the job ends cancelled and the worker goes on."""
    from app.engine.types import LoadParams, LoadProgress, LoadRequest

    w = EngineWorker()
    try:
        params = LoadParams(n_ctx=512, use_mmap=False)  # read, not mapped: many steps
        events = collect(w, LoadRequest(str(gemma_path), params))
        fractions = [e.fraction for e in events if isinstance(e, LoadProgress)]
        assert len(fractions) >= 3 and fractions == sorted(fractions)
        assert fractions[-1] == 1.0
        assert isinstance(events[-1], Finished) and events[-1].reason == "stop"
        w.run(UnloadRequest())

        stopped: list[Event] = []
        done = threading.Event()
        submitted = threading.Event()
        jobs: list[Job] = []

        def on_event(event: Event) -> None:  # the worker thread
            stopped.append(event)
            if isinstance(event, LoadProgress) and submitted.wait(5):
                jobs[0].cancel()  # the user pressed Stop while the model loads
            if isinstance(event, Finished | Failed):
                done.set()

        jobs.append(w.submit(LoadRequest(str(gemma_path), params), on_event))
        submitted.set()
        assert done.wait(120)
        final = stopped[-1]
        assert isinstance(final, Finished) and final.reason == "cancelled"
        assert w.loaded_models() == []
        assert 1.0 not in [e.fraction for e in stopped if isinstance(e, LoadProgress)]
        # the worker serves the next job normally
        info: LoadedModel = w.load(str(gemma_path), params).result(120)
        assert info.n_ctx == 512
    finally:
        w.shutdown()


def test_describing_loaded_models_never_calls_into_llama_cpp(
    worker: EngineWorker, loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API and the GUI ask for the loaded models from their own threads; a model being
    unloaded meanwhile must not be touched, so the description is fixed at load."""
    import llama_cpp

    def native(*_args: object) -> int:
        raise AssertionError("called llama.cpp from outside the worker")

    monkeypatch.setattr(llama_cpp, "llama_vocab_fim_pre", native)
    assert [m.model_id for m in worker.loaded_models()] == [loaded.model_id]
    assert worker.loaded_models()[0].has_fim == loaded.has_fim


def test_a_model_loaded_again_by_another_name_of_its_file_replaces_itself(
    gemma_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine keys a model by its resolved path when no id is given: loading the same file
    through a link (or a relative path) reloads it, and the first copy is closed, not leaked."""
    from app.engine.llamacpp import LlamaCppModel

    closed: list[str] = []
    close = LlamaCppModel.close

    def counting_close(self: LlamaCppModel) -> None:
        closed.append(self.model_id)
        close(self)

    monkeypatch.setattr(LlamaCppModel, "close", counting_close)
    link = tmp_path / "same.gguf"
    link.symlink_to(gemma_path)
    w = EngineWorker()
    try:
        params = LoadParams(n_ctx=512, n_parallel=1)
        first = w.load(str(gemma_path), params).result(120)
        second = w.load(str(link), params).result(120)
        assert first.model_id == second.model_id == str(gemma_path.resolve())
        assert [m.model_id for m in w.loaded_models()] == [first.model_id]
        assert closed == [first.model_id]  # the first copy, closed before the second loaded
    finally:
        w.shutdown()
