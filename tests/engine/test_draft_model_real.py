"""A draft model on the real Gemma 3 270M model: the test model drafting for itself (the same
vocabulary, so a valid draft; degenerate, but it exercises every part: the draft's own context
and sequences, batched drafting for several answers, trimming after rejections), and an
incompatible vocabulary refused at load. Exactness itself is proven on the scripted model
(test_draft_model.py); here the answers must match plain decoding as test_speculation_real.py
explains (a multi-token batch may round differently at a near-tie)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.draft_model import DraftModel
from app.engine.draft_vocab import DraftModelError
from app.engine.gguf import read_gguf
from app.engine.types import ChatRequest, Failed, Finished, LoadParams, SamplingParams
from app.engine.worker import EngineWorker
from tests.helpers.engine_checks import NAME_COUNT, NAME_COUNT_SCHEMA, chat
from tests.helpers.gguf_writer import write_gguf

PROMPTS = [
    "Count from 1 to 12, one number per line.",
    "Copy this list exactly:\n" + "\n".join(f"- item {i}: {i * 7} apples" for i in range(6)),
]


@pytest.fixture(scope="module")
def workers(gemma_path: Path) -> Iterator[tuple[EngineWorker, EngineWorker]]:
    plain, drafting = EngineWorker(), EngineWorker()
    try:
        params = LoadParams(n_ctx=2048, n_parallel=2, flash_attn=False, draft_max=0)
        plain.load(str(gemma_path), params).result(300)
        drafting_params = replace(params, draft_max=16, draft_model=str(gemma_path))
        drafting.load(str(gemma_path), drafting_params).result(300)
        yield plain, drafting
    finally:
        plain.shutdown()
        drafting.shutdown()


def draft_model_of(worker: EngineWorker) -> DraftModel:
    (scheduler,) = worker._state.schedulers.values()
    assert isinstance(scheduler.drafts, DraftModel)
    return scheduler.drafts


def test_the_model_drafting_for_itself_answers_as_without_drafts(
    workers: tuple[EngineWorker, EngineWorker],
) -> None:
    plain, drafting = workers
    greedy = SamplingParams(temperature=0.0, max_tokens=32)
    expected = [chat(plain, p, greedy) for p in PROMPTS]
    jobs = [  # both at once: one draft decode serves both answers
        drafting.submit(ChatRequest([{"role": "user", "content": p}], greedy)) for p in PROMPTS
    ]
    waited = [job.wait(900) for job in jobs]
    finals = [f for f in waited if isinstance(f, Finished)]
    assert len(finals) == len(jobs), waited
    for want, got in zip(expected, finals, strict=True):
        assert got.result[:8] == want.result[:8]
        assert got.usage.drafted_tokens > 0 and got.usage.accepted_tokens > 0
    assert sum(a.result == b.result for a, b in zip(expected, finals, strict=True)) >= 1
    drafts = draft_model_of(drafting)
    assert drafts.most_at_once == 2  # one draft decode guessed for both answers
    assert not drafts._sequences  # every answer's draft sequence was freed


def test_a_constrained_answer_speculates_with_the_draft_model(
    workers: tuple[EngineWorker, EngineWorker],
) -> None:
    _plain, drafting = workers
    sampling = SamplingParams(temperature=0.0, max_tokens=40, json_schema=NAME_COUNT_SCHEMA)
    answer = chat(drafting, f"Answer with this JSON exactly: {NAME_COUNT}", sampling)
    assert set(json.loads(answer.result)) == {"name", "count"}


def test_a_draft_with_another_vocabulary_is_refused_and_nothing_stays_loaded(
    gemma_path: Path, tmp_path: Path
) -> None:
    real = read_gguf(gemma_path, tokens=True).metadata["tokenizer.ggml.tokens"]
    tokens = [*real[:1000], "something else", *real[1001:]]
    other = write_gguf(
        tmp_path / "other-vocab.gguf",
        vocab_size=1,
        extra_kv={
            "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.bos_token_id": 2,
            "tokenizer.ggml.eos_token_id": 1,
            "tokenizer.ggml.add_bos_token": True,
            "tokenizer.ggml.add_eos_token": False,
        },
    )
    worker = EngineWorker()
    try:
        final = worker.load(str(gemma_path), LoadParams(n_ctx=512, draft_model=str(other))).wait(
            300
        )
        assert isinstance(final, Failed)
        assert isinstance(final.error, DraftModelError)
        assert "token 1000 is 'something else'" in str(final.error)
        assert not worker.loaded_models()  # the model loaded for it was closed again
    finally:
        worker.shutdown()
