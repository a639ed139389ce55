"""Sampled answers with drafts follow the model's own distribution: on the real Gemma 3 270M,
short sampled answers (temperature 1) to a prompt that drafts well, with prompt lookup and with
the model drafting for itself, against the same answers without drafts.

Each arm is :data:`N` answers with its own fixed seeds (disjoint sets, so the arms are
independent samples and the outcome never changes between runs of one build), compared by
Pearson's chi-square test of homogeneity over the answers' texts (rare ones pooled) at
significance :data:`ALPHA`. A verification that favoured drafts (accepting a drafted token more
often than the model would pick it) shifts the mass toward the repeated text, which the test
detects at this size (see the power check below)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.types import CompletionRequest, Finished, LoadParams, SamplingParams
from app.engine.worker import EngineWorker
from tests.helpers.stats import homogeneity

N = 200  # answers per arm
ALPHA = 0.001  # the test's significance level
TOKENS = 4
AT_ONCE = 32  # requests waiting at once (the worker's queue holds 64)
PROMPT = "One, two, three, four. One, two, three, four. One, two, three, four. One, two,"
SAMPLING = SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, max_tokens=TOKENS)


def sample(worker: EngineWorker, seeds: range) -> tuple[Counter[str], int, int]:
    """The answers' texts for ``seeds`` (submitted :data:`AT_ONCE` at a time: they run in
    parallel), and the drafted and accepted tokens over all of them."""
    done: list[Finished] = []
    for start in range(0, len(seeds), AT_ONCE):
        jobs = [
            worker.submit(CompletionRequest(PROMPT, replace(SAMPLING, seed=seed)))
            for seed in seeds[start : start + AT_ONCE]
        ]
        finals = [job.wait(600) for job in jobs]
        done += [f for f in finals if isinstance(f, Finished)]
        assert len(done) == start + len(jobs), finals
    texts = Counter(f.result for f in done)
    return (
        texts,
        sum(f.usage.drafted_tokens for f in done),
        sum(f.usage.accepted_tokens for f in done),
    )


@pytest.fixture(scope="module")
def arms(gemma_path: Path) -> Iterator[dict[str, EngineWorker]]:
    params = {
        "plain": LoadParams(n_ctx=1024, n_parallel=8, draft_max=0),
        "lookup": LoadParams(n_ctx=1024, n_parallel=8),
        "draft model": LoadParams(n_ctx=1024, n_parallel=8, draft_model=str(gemma_path)),
    }
    workers = {name: EngineWorker() for name in params}
    try:
        for name, p in params.items():
            workers[name].load(str(gemma_path), p).result(600)
        yield workers
    finally:
        for worker in workers.values():
            worker.shutdown()


@pytest.fixture(scope="module")
def plain(arms: dict[str, EngineWorker]) -> Counter[str]:
    texts, drafted, _ = sample(arms["plain"], range(0, N))
    assert drafted == 0 and len(texts) >= 3  # a distribution, not one answer
    return texts


@pytest.mark.parametrize(("arm", "first_seed"), [("lookup", N), ("draft model", 2 * N)])
def test_sampled_answers_with_drafts_follow_the_models_distribution(
    arms: dict[str, EngineWorker], plain: Counter[str], arm: str, first_seed: int
) -> None:
    texts, drafted, accepted = sample(arms[arm], range(first_seed, first_seed + N))
    assert drafted > 0 and accepted > 0  # the drafts were made and verified
    stat, dof, p = homogeneity(plain, texts)
    assert p > ALPHA, (stat, dof, p, plain.most_common(5), texts.most_common(5))


def test_the_chi_square_test_tells_a_shifted_distribution_at_this_size() -> None:
    """The power check: samples of N whose main answer has 60% of the mass versus 80% (what a
    verification biased toward drafts would do to the repeated text) are told apart."""
    fair = Counter({"three, four.": 120, "three": 40, "four": 40})
    biased = Counter({"three, four.": 160, "three": 20, "four": 20})
    assert sum(fair.values()) == sum(biased.values()) == N
    assert homogeneity(fair, biased)[2] < ALPHA
    assert homogeneity(fair, fair)[2] == pytest.approx(1.0)
