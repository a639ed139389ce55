"""Speculative decoding: the drafts (app/engine/speculation.py) and their verification inside
the batching scheduler, with the scripted model (which checks every batch as llama.cpp would,
and whose "KV cache" must hold exactly what the prefix cache records). The same on the real
model: test_speculation_real.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from app.engine.speculation import MAX_BACKOFF, Drafter
from app.engine.types import CompletionRequest, Finished, LoadParams, SamplingParams
from tests.helpers.scripted_model import ScriptedModel, assert_cache_consistent, worker_with

PIECES = tuple("abcdefghij")


def test_prompt_lookup_drafts_what_followed_the_last_three_tokens_before() -> None:
    tokens = [1, 2, 3, 4, 5, 6, 9, 9, 2, 3]  # prompt; the next token to decode is 4
    drafter = Drafter(tokens, len(tokens), draft_max=8)
    assert drafter.draft(4, room=8)[:3] == [5, 6, 9]
    assert len(drafter.draft(4, room=8)) <= drafter.k
    assert drafter.draft(7, room=8) == []  # (2, 3, 7) never occurred
    assert drafter.draft(4, room=0) == []


def test_in_repetitive_text_the_occurrence_preceded_alike_is_drafted() -> None:
    # two blocks end alike (7, 8, 9) but go on differently; the answer is writing the first
    tokens = [1, 2, 7, 8, 9, 10, 11, 3, 4, 7, 8, 9, 20, 21, 1, 2, 7, 8]
    drafter = Drafter(tokens, len(tokens), draft_max=8)
    assert drafter.draft(9, room=2) == [10, 11]  # not [20, 21], the most recent


def test_a_prediction_is_followed_and_found_again_after_a_difference() -> None:
    prompt = [100, 101, 102]
    prediction = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    tokens = list(prompt)
    drafter = Drafter(tokens, len(prompt), draft_max=4, prediction=prediction)
    assert drafter.draft(1, room=16) == [2, 3, 4, 5]  # the answer starts as predicted
    tokens += [1, 2, 3]
    assert drafter.draft(4, room=16) == [5, 6, 7, 8]
    tokens += [4, 5]
    assert drafter.draft(50, room=16) == []  # an edit: the answer leaves the prediction
    tokens += [50, 51]
    tokens += [5, 6]
    assert drafter.draft(7, room=16) == [8, 9, 10]  # back on it: (5, 6, 7) found again


def test_drafts_rejected_outright_pause_drafting_for_longer_each_time() -> None:
    tokens = [1, 2, 3, 4] * 4
    drafter = Drafter(tokens, len(tokens), draft_max=16)
    paused = []
    for _ in range(8):
        assert drafter.draft(1, room=16)  # (3, 4, 1) occurred: a draft
        drafter.adapt(drafter.k, 0)
        skipped = 0
        while not drafter.draft(1, room=16):
            skipped += 1
        paused.append(skipped)
    assert paused == [1, 2, 4, 8, 16, 32, MAX_BACKOFF, MAX_BACKOFF]
    assert drafter.k == 1
    drafter.adapt(1, 1)  # accepted: drafts grow again, up to draft_max
    for _ in range(6):
        drafter.adapt(drafter.k, drafter.k)
    assert drafter.k == 16


def run(
    draft_max: int, script: Callable[[int], int], requests: list[CompletionRequest]
) -> tuple[list[Finished], ScriptedModel]:
    worker, model = worker_with(
        params=LoadParams(n_ctx=4096, n_parallel=4, n_batch=64, draft_max=draft_max),
        pieces=PIECES,
        script=script,
    )
    try:
        jobs = [worker.submit(r) for r in requests]
        finals = [j.wait(30) for j in jobs]
        assert all(isinstance(f, Finished) for f in finals)
        assert_cache_consistent(worker, model)
        return finals, model  # type: ignore[return-value]
    finally:
        worker.shutdown()


@pytest.mark.parametrize(
    "script",
    [
        lambda n: n % 5 + 1,  # repeats: drafts are accepted whole
        lambda n: n % 5 + 1 if n % 17 else 9,  # repeats with a surprise now and then
        lambda n: (n * n) % 7 + 1,  # repeats in a longer period
    ],
    ids=["periodic", "perturbed", "squares"],
)
@pytest.mark.parametrize("eog_after", [None, 37])
def test_drafted_answers_equal_undrafted_ones_and_the_cache_holds_exactly_them(
    script: Callable[[int], int], eog_after: int | None
) -> None:
    requests = [
        CompletionRequest(f"prompt {i} " * 3, SamplingParams(max_tokens=40 + 7 * i))
        for i in range(4)
    ]
    plain, plain_model = run(0, script, requests)
    drafted, drafting_model = run(16, script, requests)
    assert [f.result for f in drafted] == [f.result for f in plain]
    assert [f.reason for f in drafted] == [f.reason for f in plain]
    assert [f.usage.completion_tokens for f in drafted] == [
        f.usage.completion_tokens for f in plain
    ]
    assert all(f.usage.drafted_tokens == 0 for f in plain)
    assert all(0 < f.usage.accepted_tokens <= f.usage.drafted_tokens for f in drafted)
    assert drafting_model.decodes < plain_model.decodes
    assert drafting_model.most_at_once > 4  # several answers' drafts verified in one decode


def test_drafts_that_always_fail_stop_being_made() -> None:
    # (1, 2, 3) recurs, but what follows it never does: each draft is rejected outright
    def script(n: int) -> int:
        return n % 4 if n % 4 else 100 + n

    requests = [CompletionRequest("prompt", SamplingParams(max_tokens=400))]
    (final,), _ = run(16, script, requests)
    assert final.usage.completion_tokens == 400
    assert final.usage.accepted_tokens == 0
    assert 0 < final.usage.drafted_tokens <= 16  # not one every four tokens
