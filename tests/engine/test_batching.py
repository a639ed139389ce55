"""Engine v2 on the real Gemma 3 270M model: answers decoded together equal the same requests
run alone, the prefix cache serves any earlier conversation, cancels never disturb other
answers, a cancel during admission is not lost, nothing leaks from the KV cache, and embeddings
are chunked and cancellable."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from app.engine.callbacks import StopAtHiddenStates
from app.engine.llamacpp import EMBED_CHUNK
from app.engine.types import (
    ChatRequest,
    CompletionRequest,
    Delta,
    EmbeddingRequest,
    Event,
    Failed,
    Finished,
    LoadedModel,
    LoadParams,
    SamplingParams,
    Started,
    TokenizeRequest,
)
from app.engine.worker import EngineWorker, Job
from tests.helpers.engine_checks import NO_END, assert_no_leak, model_of

GREEDY = SamplingParams(temperature=0.0, max_tokens=24, logit_bias=NO_END)
PROMPTS = [
    "The history of the lighthouse begins",
    "A recipe for bread: first",
    "def fibonacci(n):",
    "The three primary colours are",
]


def test_batched_greedy_answers_equal_the_same_requests_run_alone(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    alone = [worker.run(CompletionRequest(p, GREEDY), 300) for p in PROMPTS]
    # evict what the cache holds so the batched run reads every prompt afresh, all together
    for entry in worker._state.schedulers[loaded.model_id].cache.entries:
        model_of(worker).seq_rm(entry.seq)
        entry.tokens = []
    jobs = [worker.submit(CompletionRequest(p, GREEDY)) for p in PROMPTS]
    together = [j.result(300) for j in jobs]
    # Not always the same tokens, for a numeric reason: with several sequences in one unified
    # KV cache, each attention row's softmax runs over more (masked, zero) cells, and ggml's
    # SIMD sums group the partial sums differently, so logits differ in their last bits; a
    # greedy answer can only turn at a near-tie, after which it is a different text. So: every
    # answer starts as it does alone, and most are identical.
    assert all(text.strip() for text in together)
    for mine, reference in zip(together, alone, strict=True):
        assert mine[:12] == reference[:12]
    assert sum(a == b for a, b in zip(together, alone, strict=True)) >= len(PROMPTS) // 2
    assert_no_leak(worker)


def test_a_follow_up_after_another_chat_reuses_the_first_chats_cache(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    history_a = "Notes about gardening. " * 60
    history_b = "Notes about sailing. " * 60
    first = worker.submit(CompletionRequest(history_a, GREEDY)).wait(300)
    assert isinstance(first, Finished)
    worker.submit(CompletionRequest(history_b, GREEDY)).wait(300)
    follow = worker.submit(CompletionRequest(history_a + first.result + " More:", GREEDY))
    final = follow.wait(300)
    assert isinstance(first, Finished) and isinstance(final, Finished)
    n_a = first.usage.prompt_tokens
    # the whole of chat A's prompt and the answer's decoded tokens came from the cache
    assert final.usage.cached_tokens >= n_a + GREEDY.max_tokens - 2  # type: ignore[operator]
    assert_no_leak(worker)


def test_regenerating_reuses_the_prompt_and_keeps_the_other_branch(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    prompt = "Write a haiku about autumn leaves. " * 20
    s = SamplingParams(temperature=1.0, seed=1, max_tokens=16, logit_bias=NO_END)
    first = worker.submit(CompletionRequest(prompt, s)).wait(300)
    assert isinstance(first, Finished)
    again = worker.submit(CompletionRequest(prompt, s)).wait(300)
    # all of the prompt but its last token, which is read again for its logits
    assert again.usage.cached_tokens == again.usage.prompt_tokens - 1
    # the first answer's branch is still cached: continuing it reads only the new words
    back = worker.submit(CompletionRequest(prompt + first.result + " Next:", s)).wait(300)
    assert back.usage.cached_tokens >= first.usage.prompt_tokens + 16 - 2
    assert_no_leak(worker)


def test_cancelling_one_stream_never_breaks_the_others(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    alone = worker.run(CompletionRequest(PROMPTS[0], GREEDY), 300)
    deltas = 0
    victims: list[Job] = []

    def cancel_at_third(e: Event) -> None:
        nonlocal deltas
        if isinstance(e, Delta):
            deltas += 1
            if deltas == 3:
                victims[0].cancel()

    victims.append(worker.submit(CompletionRequest(PROMPTS[1], GREEDY), cancel_at_third))
    kept = worker.submit(CompletionRequest(PROMPTS[0], GREEDY))
    assert victims[0].wait(300).reason == "cancelled"
    final = kept.wait(300)
    # whole: every token, and the same text as alone up to a numeric near-tie (see above)
    assert isinstance(final, Finished) and final.reason == "length"
    assert final.usage.completion_tokens == GREEDY.max_tokens
    assert final.result[:20] == alone[:20]
    assert_no_leak(worker)


def test_a_cancel_while_the_prompt_is_prepared_is_not_lost(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    jobs: list[Job] = []

    def cancel_on_start(e: Event) -> None:  # Started comes before the prompt is rendered
        if isinstance(e, Started):
            jobs[0].cancel()

    request = ChatRequest([{"role": "user", "content": "Tell me a long story."}], GREEDY)
    jobs.append(worker.submit(request, cancel_on_start))
    final = jobs[0].wait(300)
    assert isinstance(final, Finished) and final.reason == "cancelled"
    assert final.usage.completion_tokens == 0
    assert_no_leak(worker)


@pytest.mark.parametrize("seed", [7])
def test_many_mixed_jobs_leave_only_what_the_prefix_cache_keeps(
    worker: EngineWorker, loaded: LoadedModel, seed: int
) -> None:
    rng = random.Random(seed)
    jobs: list[tuple[Job, str]] = []
    for i in range(60):
        kind = rng.choice(["run", "run", "cancel", "error", "long"])
        prompt = rng.choice(PROMPTS) + f" (variant {rng.randint(0, 3)})"
        if kind == "long":
            prompt = prompt + " and so on" * 200
        s = SamplingParams(temperature=0.7, seed=i, max_tokens=rng.randint(1, 6))
        if kind == "error":  # a bad request fails inside the engine, after admission
            s = SamplingParams(max_tokens=3, logit_bias={10**7: 1.0})
        job = worker.submit(CompletionRequest(prompt, s))
        if kind == "cancel":
            threading.Timer(rng.random() * 0.2, job.cancel).start()
        jobs.append((job, kind))
    for job, kind in jobs:
        final = job.wait(600)
        if kind == "error":
            assert isinstance(final, Failed)
        elif kind != "cancel":
            assert isinstance(final, Finished) and final.reason in ("length", "stop")
    assert_no_leak(worker)


def test_a_conversation_restored_from_ram_answers_as_it_did(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    model = model_of(worker)
    cache = worker._state.schedulers[model.model_id].cache
    assert cache.ram is not None  # on by default
    log = "the lighthouse keeper wrote in his log every night, whatever the weather. "
    chats = [f"Chapter {i}. " + log * 6 for i in range(model.n_seq + 2)]
    sampling = SamplingParams(temperature=0.0, max_tokens=8, logit_bias=NO_END)

    def answer(prompt: str) -> Finished:
        final = worker.submit(CompletionRequest(prompt, sampling)).wait(300)
        assert isinstance(final, Finished), final
        return final

    first = answer(chats[0])
    for chat in chats[1:]:  # more conversations than the context has sequences
        answer(chat)
    restored = cache.restored
    again = answer(chats[0])
    assert cache.restored == restored + 1
    assert again.usage.cached_tokens == again.usage.prompt_tokens - 1
    assert again.result == first.result and first.result
    assert_no_leak(worker)


def test_embeddings_of_a_long_input_are_chunked_and_match_a_short_read(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    text = "Embeddings turn text into vectors. " * 250  # about 2,000 tokens
    vectors = worker.run(EmbeddingRequest([text, "short text"]), 600)
    assert len(vectors) == 2 and len(vectors[0]) == 640
    assert abs(sum(x * x for x in vectors[0]) - 1.0) < 1e-3
    again = worker.run(EmbeddingRequest(["short text"]), 60)
    assert again[0] == pytest.approx(vectors[1], abs=1e-5)  # chunks and inputs independent


def test_embeddings_skip_the_vocabulary_projection_and_equal_the_whole_graph(
    worker: EngineWorker, loaded: LoadedModel, gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "Hidden states, not logits, make an embedding. " * 30  # three chunks
    n_chunks = -(-len(worker.run(TokenizeRequest(text))) // EMBED_CHUNK)
    assert n_chunks >= 2
    model = model_of(worker)
    cut = worker.run(EmbeddingRequest([text]), 300)
    assert model.embed_stop is not None
    before = model.embed_stop.stops
    assert worker.run(EmbeddingRequest([text]), 300) == cut
    assert model.embed_stop.stops - before == n_chunks  # every graph stopped early
    # The same input through whole graphs (vocabulary projection computed): the same vector.
    monkeypatch.setattr(StopAtHiddenStates, "make", classmethod(lambda cls, native: None))
    whole_worker = EngineWorker()
    try:
        whole_worker.load(str(gemma_path), loaded.params).result(120)  # the same kernels
        whole = whole_worker.run(EmbeddingRequest([text]), 300)
        assert model_of(whole_worker).embed_stop is None
    finally:
        whole_worker.shutdown()
    assert whole[0] == pytest.approx(cut[0], abs=1e-5)


def test_an_embedding_can_be_cancelled(worker: EngineWorker, loaded: LoadedModel) -> None:
    jobs: list[Job] = []

    def cancel_on_start(e: Event) -> None:
        if isinstance(e, Started):
            jobs[0].cancel()

    jobs.append(worker.submit(EmbeddingRequest(["word " * 3000]), cancel_on_start))
    final = jobs[0].wait(300)
    assert isinstance(final, Finished) and final.reason == "cancelled"


def test_parallel_one_behaves_as_one_at_a_time(gemma_path: Path) -> None:

    w = EngineWorker()
    try:
        w.load(str(gemma_path), LoadParams(n_ctx=2048, n_parallel=1)).result(120)
        jobs = [w.submit(CompletionRequest(p, GREEDY)) for p in PROMPTS[:2]]
        finals = [j.wait(300) for j in jobs]
        assert all(isinstance(f, Finished) for f in finals)
        # the second waited for the first: it was queued while the first was answered
        assert finals[1].timings.queued_seconds >= finals[0].timings.generation_seconds
    finally:
        w.shutdown()
