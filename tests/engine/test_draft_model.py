"""A draft model's side of speculative decoding (app/engine/draft_model.py, draft_vocab.py):
drafts offered to every generating slot and verified exactly, with the scripted model and a
scripted draft source; the vocabulary rule, from GGUF headers, and its clear refusals. The real
model drafting for itself: test_draft_model_real.py."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.engine import sizing
from app.engine import worker as worker_module
from app.engine.draft_model import DraftWant
from app.engine.draft_vocab import (
    MAX_SIZE_DIFFERENCE,
    DraftModelError,
    Vocabulary,
    check_draft,
    incompatibility,
    read_vocabulary,
    same_tokenizer,
)
from app.engine.fit import fit_check
from app.engine.gguf import read_gguf
from app.engine.types import CompletionRequest, Finished, LoadParams, SamplingParams
from tests.helpers.gguf_writer import write_gguf
from tests.helpers.scripted_model import assert_cache_consistent, worker_with

PIECES = tuple("abcdefghij")


def script(n: int) -> int:
    return n % 5 + 1


class ScriptedDrafts:
    """Drafts what the scripted sampler writes next, wrong at every ``wrong_every``-th guess:
    a draft model that is often, not always, right."""

    def __init__(self, wrong_every: int) -> None:
        self.wrong_every = wrong_every
        self.prompt: dict[str, int] = {}
        self.guesses = 0
        self.calls: list[int] = []  # how many slots each call drafted for
        self.forgotten: set[str] = set()
        self.closed = False

    def propose(self, wants: list[DraftWant]) -> dict[str, list[int]]:
        self.calls.append(len(wants))
        out = {}
        for want in wants:
            start = self.prompt.setdefault(want.key, len(want.tokens))
            n = len(want.tokens) - start + 1  # answer tokens so far, ``last`` included
            draft = []
            for i in range(want.k):
                self.guesses += 1
                wrong = self.guesses % self.wrong_every == 0
                draft.append(99 if wrong else script(n + 1 + i))
            out[want.key] = draft
        return out

    def forget(self, key: str) -> None:
        self.forgotten.add(key)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def drafts(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], ScriptedDrafts]:
    def make(wrong_every: int) -> ScriptedDrafts:
        source = ScriptedDrafts(wrong_every)
        monkeypatch.setattr(worker_module, "open_draft", lambda model, params: source)
        return source

    return make


def run(draft_max: int) -> list[Finished]:
    params = LoadParams(n_ctx=4096, n_parallel=4, n_batch=64, draft_max=draft_max)
    # a decode takes a moment, so the four answers run together
    worker, model = worker_with(params=params, pieces=PIECES, script=script, tokens_per_second=500)
    try:
        requests = [
            CompletionRequest(f"prompt {i} " * 3, SamplingParams(max_tokens=40 + 7 * i))
            for i in range(4)
        ]
        jobs = [worker.submit(r) for r in requests]
        finals = [job.wait(30) for job in jobs]
        assert all(isinstance(f, Finished) for f in finals)
        assert_cache_consistent(worker, model)
        return finals  # type: ignore[return-value]
    finally:
        worker.shutdown()


@pytest.mark.parametrize("wrong_every", [3, 7, 1000])
def test_draft_model_answers_equal_undrafted_ones_and_every_draft_counts(
    drafts: Callable[[int], ScriptedDrafts], wrong_every: int
) -> None:
    plain = run(0)
    source = drafts(wrong_every)
    drafted = run(16)
    assert [f.result for f in drafted] == [f.result for f in plain]
    assert [f.usage.completion_tokens for f in drafted] == [
        f.usage.completion_tokens for f in plain
    ]
    assert all(0 < f.usage.accepted_tokens <= f.usage.drafted_tokens for f in drafted)
    assert sum(f.usage.drafted_tokens for f in drafted) <= source.guesses
    assert max(source.calls) > 1  # several slots drafted for in one call
    assert source.forgotten == set(source.prompt)  # every slot's draft sequence freed
    assert source.closed  # the worker's shutdown closed the draft model


def test_a_draft_model_that_is_always_wrong_stops_being_asked(
    drafts: Callable[[int], ScriptedDrafts],
) -> None:
    source = drafts(1)
    finals = run(16)
    assert all(f.usage.accepted_tokens == 0 for f in finals)
    answered = sum(f.usage.completion_tokens for f in finals)
    assert sum(source.calls) < answered // 4  # paused for longer and longer


# -- the vocabulary rule (llama.cpp's common_speculative_are_compatible) -------------------


def vocab(tokens: list[str], **kw: object) -> Vocabulary:
    base: dict[str, object] = {
        "model": "llama",
        "bos": 2,
        "eos": 1,
        "add_bos": True,
        "add_eos": False,
        "tokens": tuple(tokens),
    }
    return Vocabulary(**{**base, **kw})  # type: ignore[arg-type]


def test_the_vocabulary_rule_says_why_a_draft_cannot_draft() -> None:
    tokens = [f"t{i}" for i in range(1000)]
    target = vocab(tokens)
    assert incompatibility(target, vocab(tokens)) is None
    # the first tokens (special ones) may differ, and sizes a little
    assert incompatibility(target, vocab(["x"] * 5 + tokens[5:])) is None
    assert incompatibility(target, vocab(tokens[: 1000 - MAX_SIZE_DIFFERENCE])) is None
    too_small = tokens[: 1000 - MAX_SIZE_DIFFERENCE - 1]
    assert "tokens" in (incompatibility(target, vocab(too_small)) or "")
    changed = [*tokens[:500], "other", *tokens[501:]]
    assert "token 500 is 'other'" in (incompatibility(target, vocab(changed)) or "")
    assert "tokenizer is 'gpt2'" in (incompatibility(target, vocab(tokens, model="gpt2")) or "")
    assert "BOS/EOS tokens" in (incompatibility(target, vocab(tokens, eos=3)) or "")
    assert "adds BOS/EOS" in (incompatibility(target, vocab(tokens, add_bos=False)) or "")


def test_a_draft_file_is_read_from_its_header_and_refused_with_the_reason(
    tmp_path: Path,
) -> None:
    target = write_gguf(tmp_path / "big.gguf", vocab_size=300)
    sibling = write_gguf(tmp_path / "small.gguf", vocab_size=300, name="Small")
    other = write_gguf(
        tmp_path / "other.gguf",
        vocab_size=300,
        extra_kv={"tokenizer.ggml.tokens": [f"w{i}" for i in range(300)]},
    )
    check_draft(str(target), str(sibling))
    assert same_tokenizer(target, sibling)
    assert not same_tokenizer(target, other)
    with pytest.raises(DraftModelError, match=r"other\.gguf cannot be the draft model.*token 5"):
        check_draft(str(target), str(other))
    assert len(read_vocabulary(target).tokens) == 300


@pytest.fixture
def bad_files(tmp_path: Path) -> Iterator[dict[str, Path]]:
    text = tmp_path / "notes.gguf"
    text.write_text("just some text, not a model")
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(write_gguf(tmp_path / "whole.gguf", vocab_size=4000).read_bytes()[:5000])
    huge = tmp_path / "huge.gguf"  # a header claiming a 2**40-byte token
    key = b"tokenizer.ggml.tokens"
    # version 3, no tensors, one key: an array of 1 string that claims 2**40 bytes
    header = struct.pack("<4sIQQQ", b"GGUF", 3, 0, 1, len(key)) + key
    huge.write_bytes(header + struct.pack("<IIQQ", 9, 8, 1, 1 << 40))
    yield {
        "folder": tmp_path,
        "missing": tmp_path / "nothing.gguf",
        "text": text,
        "truncated": truncated,
        "huge": huge,
    }


@pytest.mark.parametrize(
    ("which", "words"),
    [
        ("folder", "is a folder"),
        ("missing", "No model file"),
        ("text", "not a GGUF model file"),
        ("truncated", "is incomplete"),
        ("huge", "damaged"),
    ],
)
def test_a_draft_that_is_not_a_readable_model_is_refused_clearly(
    bad_files: dict[str, Path], tmp_path: Path, which: str, words: str
) -> None:
    target = write_gguf(tmp_path / "target.gguf", vocab_size=64)
    with pytest.raises(DraftModelError, match=words):
        check_draft(str(target), str(bad_files[which]))


def test_the_draft_models_memory_counts_in_the_fit_estimate(tmp_path: Path) -> None:
    target = read_gguf(write_gguf(tmp_path / "t.gguf", vocab_size=64, payload=1 << 20))
    draft = write_gguf(tmp_path / "d.gguf", vocab_size=64, payload=1 << 18)
    plain, drafting = LoadParams(), LoadParams(draft_model=str(draft))
    alone, both = sizing.estimate(target, 2048, plain), sizing.estimate(target, 2048, drafting)
    extra = sizing.draft_estimate(drafting, 2048)
    assert extra is not None and extra.weights_bytes >= 1 << 18
    assert extra.n_ctx == sizing.draft_context(2048, drafting)  # room for the drafts too
    assert both.total_bytes == alone.total_bytes + extra.total_bytes
    verdict = fit_check(target, 2048, 1 << 40, params=drafting)
    assert verdict.needed_bytes == both.total_bytes
    roomy = sizing.max_context(target, plain, alone.total_bytes + extra.total_bytes // 2)
    assert sizing.max_context(target, drafting, alone.total_bytes + extra.total_bytes // 2) < roomy
    # no draft model, or drafting off: nothing added
    assert sizing.draft_estimate(LoadParams(draft_model=str(draft), draft_max=0), 2048) is None
