"""Speculative decoding on the real Gemma 3 270M model: the same requests with and without
drafts (prompt lookup, a prediction), greedy, sampled and grammar-constrained, every
sequence's KV exactly what the prefix cache records afterwards.

A token decoded in a batch of several tokens of its sequence gets logits that differ from the
same token decoded alone (up to about 1.0 on this CPU build: llama.cpp's matrix kernels for
several rows accumulate in another order), just as a prompt read in one batch differs from the
same tokens decoded one by one. So, as in test_batching.py, a greedy answer may take the other
branch at a near-tie: every answer starts as it does without drafts, and most are identical.
That the verification itself is exact (the same tokens, the same sampler calls, greedy or
seeded) is proven with the scripted model's exact arithmetic in test_speculation.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.types import LoadParams, SamplingParams
from app.engine.worker import EngineWorker
from tests.helpers.engine_checks import NAME_COUNT, NAME_COUNT_SCHEMA, assert_no_leak, chat

CODE = "\n".join(f"def area_{i}(w, h):\n    return w * h + {i}\n" for i in range(8))
PROMPTS = [
    "Repeat this code exactly, with no comment:\n" + CODE,
    "Copy this list exactly:\n" + "\n".join(f"- item {i}: {i * 7} apples" for i in range(12)),
    "Count from 1 to 25, one number per line.",
    "Tell me about the moon.",
    "Write a short poem about rain.",
    "What is the capital of France? Answer in one sentence.",
    "Rewrite in upper case: the quick brown fox jumps over the lazy dog. "
    "the quick brown fox jumps over the lazy dog.",
    "List the days of the week, then list them again in reverse order.",
]


@pytest.fixture(scope="module")
def workers(gemma_path: Path) -> Iterator[tuple[EngineWorker, EngineWorker]]:
    plain, drafting = EngineWorker(), EngineWorker()
    try:
        for worker, draft_max in ((plain, 0), (drafting, 16)):
            params = LoadParams(n_ctx=4096, flash_attn=False, draft_max=draft_max)
            worker.load(str(gemma_path), params).result(120)
        yield plain, drafting
    finally:
        plain.shutdown()
        drafting.shutdown()


def test_greedy_answers_with_drafts_equal_those_without(
    workers: tuple[EngineWorker, EngineWorker],
) -> None:
    plain, drafting = workers
    greedy = SamplingParams(temperature=0.0, max_tokens=48)
    pairs = [(chat(plain, p, greedy), chat(drafting, p, greedy)) for p in PROMPTS]
    for without, with_drafts in pairs:
        assert with_drafts.result[:8] == without.result[:8]
        assert without.usage.drafted_tokens == 0
    assert sum(a.result == b.result for a, b in pairs) >= len(PROMPTS) // 2
    # the copying prompts draft, and a good share of their drafts is taken
    copying = [b.usage for _, b in pairs[:2]]
    assert all(u.accepted_tokens * 3 >= u.drafted_tokens > 0 for u in copying), copying
    assert_no_leak(drafting)


def test_a_prediction_drafts_the_answer_and_counts_what_it_took(
    workers: tuple[EngineWorker, EngineWorker],
) -> None:
    plain, drafting = workers
    greedy = SamplingParams(temperature=0.0, max_tokens=64)
    text = "Repeat this code exactly, with no comment:\n" + CODE
    expected = chat(plain, text, greedy).result
    predicted = chat(drafting, text, greedy, prediction=expected)
    assert predicted.result[:8] == expected[:8]
    usage = predicted.usage
    assert usage.predicted and 0 < usage.accepted_tokens <= usage.drafted_tokens
    assert usage.accepted_tokens >= usage.completion_tokens // 2  # most of it came from drafts
    wrong = chat(drafting, text, greedy, prediction="Something else entirely. " * 8)
    assert wrong.usage.predicted and wrong.usage.accepted_tokens < usage.accepted_tokens
    assert_no_leak(drafting)


def test_sampled_and_constrained_answers_speculate_and_stay_valid(
    workers: tuple[EngineWorker, EngineWorker],
) -> None:
    _plain, drafting = workers
    expected = NAME_COUNT
    constrained = SamplingParams(temperature=0.0, max_tokens=40, json_schema=NAME_COUNT_SCHEMA)
    text = f"Answer with this JSON exactly: {expected}"
    answer = chat(drafting, text, constrained, prediction=expected)
    assert set(json.loads(answer.result)) == {"name", "count"}
    assert answer.usage.drafted_tokens > 0
    sampled = SamplingParams(temperature=0.8, seed=7, max_tokens=40)
    first = chat(drafting, "Repeat exactly: " + CODE, sampled, prediction=CODE)
    assert first.result.strip() and first.usage.accepted_tokens > 0
    assert_no_leak(drafting)
