"""Sampling on the real Gemma 3 270M model: Ember's sampler chain (with its grammar applied
lazily, to the sampled token first) against llama-cpp-python's own, which filters every
candidate through the grammar."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.engine.llamacpp import LlamaCppModel
from app.engine.sampling import Sampler, VocabIndex, grammar_allows, grammar_for
from app.engine.types import LoadParams, SamplingParams
from tests.helpers.engine_checks import NO_END

YES_NO = 'root ::= ("yes" | "no") ", because " [a-z ]{1,30} "."'
YES_NO_RE = re.compile(r"(yes|no), because [a-z ]{1,30}\.")
NUMBERS = 'root ::= "[" num ("," " "? num)* "]"\nnum ::= "-"? [0-9]{1,4}'
NUMBERS_RE = re.compile(r"\[-?[0-9]{1,4}(, ?-?[0-9]{1,4})*\]")
NUMBERS_BEGUN_RE = re.compile(r"\[(-?[0-9]{1,4}, ?)*-?[0-9]{0,4}")  # cut short by max_tokens
RECORD = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 16},
        "population": {"type": "integer", "minimum": 0, "maximum": 99999999},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
    },
    "required": ["city", "population", "tags"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def model(gemma_path: Path) -> Iterator[LlamaCppModel]:
    m = LlamaCppModel(str(gemma_path), LoadParams(n_ctx=2048, n_parallel=1))
    yield m
    m.close()


@pytest.fixture(scope="module")
def llm(gemma_path: Path) -> Iterator[Any]:
    """llama-cpp-python's own Llama on the same file: the reference sampler chain."""
    from llama_cpp import Llama

    m = Llama(
        str(gemma_path),
        n_ctx=2048,
        n_threads=model_threads(),
        flash_attn=LoadParams().flash_attn,  # the same kernels as Ember's, so the same logits
        verbose=False,
    )
    yield m
    m.close()


def model_threads() -> int:
    from app.engine.llamacpp import default_threads

    return default_threads()


def sampled_tokens(model: LlamaCppModel, prompt: str, s: SamplingParams) -> list[int]:
    """The tokens Ember's sampler picks, decoding one sequence by hand (no KV cache reuse,
    so the prompt's logits are the same as the reference's), up to and with the end of
    generation."""
    model.seq_rm(0)
    tokens = model.tokenize(prompt)
    sampler = Sampler(model, s, s.seed if s.seed is not None else 0, grammar_for(s))
    out: list[int] = []
    try:
        pos, feed = 0, tokens
        while True:
            model.batch.clear()
            idx = model.batch.add(0, feed, pos, True)
            assert model.decode() == 0
            pos += len(feed)
            token = sampler.sample(model.ctx, idx)
            out.append(token)
            if model.is_eog(token) or len(out) == s.max_tokens:
                return out
            feed = [token]
    finally:
        sampler.close()
        model.seq_rm(0)


def ours(model: LlamaCppModel, prompt: str, s: SamplingParams) -> str:
    tokens = [t for t in sampled_tokens(model, prompt, s) if not model.is_eog(t)]
    return b"".join(model.piece(t) for t in tokens).decode("utf-8", errors="replace")


def reference(model: LlamaCppModel, llm: Any, prompt: str, s: SamplingParams, seed: int = 0) -> str:
    """The same generation through llama-cpp-python's own sampler chain."""
    from llama_cpp import LlamaGrammar, LogitsProcessorList

    llm.reset()
    llm.set_seed(seed)
    llm.last_n_tokens_size = s.repeat_last_n
    grammar = None
    if s.json_schema is not None:
        grammar = LlamaGrammar.from_json_schema(json.dumps(s.json_schema), verbose=False)
    elif s.grammar:
        grammar = LlamaGrammar.from_string(s.grammar, verbose=False)
    processors = None
    if s.logit_bias:
        ids = np.fromiter(s.logit_bias.keys(), dtype=np.intc)
        values = np.fromiter(s.logit_bias.values(), dtype=np.single)

        def bias(_input_ids: object, scores: np.ndarray) -> np.ndarray:
            scores[ids] += values
            return scores

        processors = LogitsProcessorList([bias])
    tokens: list[int] = []
    gen = llm.generate(
        model.tokenize(prompt),
        top_k=s.top_k,
        top_p=s.top_p,
        min_p=s.min_p,
        typical_p=s.typical_p,
        temp=s.temperature,
        repeat_penalty=s.repeat_penalty,
        frequency_penalty=s.frequency_penalty,
        presence_penalty=s.presence_penalty,
        mirostat_mode=s.mirostat_mode,
        mirostat_tau=s.mirostat_tau,
        mirostat_eta=s.mirostat_eta,
        logits_processor=processors,
        grammar=grammar,
    )
    try:
        for token in gen:
            if model.is_eog(token):
                break
            tokens.append(token)
            if len(tokens) == s.max_tokens:
                break
    finally:
        gen.close()
    return b"".join(model.piece(t) for t in tokens).decode("utf-8", errors="replace")


@pytest.mark.parametrize(
    ("prompt", "constraint"),
    [
        ("Is the sky blue? Answer:", {"grammar": YES_NO}),
        ("The first prime numbers as a JSON array:", {"grammar": NUMBERS}),
        ("A JSON record about Paris:", {"json_schema": RECORD}),
        ("Tell me a story:", {"json_schema": {"type": "object"}}),
    ],
)
def test_greedy_output_with_a_grammar_is_what_filtering_every_token_gives(
    model: LlamaCppModel, llm: Any, prompt: str, constraint: dict[str, object]
) -> None:
    s = replace(SamplingParams(temperature=0.0, max_tokens=60), **constraint)  # type: ignore[arg-type]
    text = ours(model, prompt, s)
    assert text and text == reference(model, llm, prompt, s)


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingParams(temperature=0.9, seed=11, max_tokens=24),
        SamplingParams(temperature=0.0, max_tokens=24, logit_bias=NO_END),
        SamplingParams(temperature=0.7, seed=5, max_tokens=24, top_k=0, top_p=0.8, min_p=0.1),
        SamplingParams(
            temperature=1.0,
            seed=3,
            max_tokens=24,
            typical_p=0.5,
            repeat_penalty=1.3,
            presence_penalty=0.5,
            frequency_penalty=0.5,
            logit_bias={1: -100.0},
        ),
        SamplingParams(temperature=1.0, seed=3, max_tokens=24, mirostat_mode=1),
        SamplingParams(temperature=1.0, seed=3, max_tokens=24, mirostat_mode=2),
        SamplingParams(temperature=-1.0, seed=3, max_tokens=24),
    ],
)
def test_without_a_grammar_sampling_is_llama_cpp_pythons(
    model: LlamaCppModel, llm: Any, sampling: SamplingParams
) -> None:
    text = ours(model, "Once upon a time", sampling)
    assert text == reference(model, llm, "Once upon a time", sampling, seed=sampling.seed or 0)


def replay(
    model: LlamaCppModel, grammar: str, tokens: list[int], check_index: bool = False
) -> None:
    """Feed ``tokens`` to a fresh llama.cpp grammar sampler: each must be one it allows. With
    ``check_index``, also check at each step that the VocabIndex keeps every allowed token."""
    import llama_cpp.llama_cpp as ll

    g = ll.llama_sampler_init_grammar(model.vocab, grammar.encode(), b"root")
    assert g
    every = np.arange(model.n_vocab, dtype=np.intc)
    text = b""
    try:
        for i, token in enumerate(tokens):
            complete = text.decode("utf-8", errors="ignore").encode() == text
            if check_index and complete and b"\0" not in text:
                allowed = every[grammar_allows(g, every)]
                index = model.vocab_index()
                assert index is not None
                kept = index.candidates(g)
                assert np.isin(allowed, kept).all(), (i, text)
                assert len(kept) < len(every) or len(allowed) > len(every) // 2
            assert grammar_allows(g, np.array([token], dtype=np.intc))[0], (i, text, token)
            ll.llama_sampler_accept(g, token)
            text += model.piece(token, special=True)
    finally:
        ll.llama_sampler_free(g)


def schema_grammar(schema: dict[str, object]) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf(json.dumps(schema))


@pytest.mark.parametrize("seed", range(6))
def test_every_sampled_token_is_one_thegrammar_allows(model: LlamaCppModel, seed: int) -> None:
    hot = SamplingParams(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, seed=seed, max_tokens=80)
    record = schema_grammar(RECORD)
    cases = [
        ("Is the sky blue? Answer:", replace(hot, grammar=YES_NO), YES_NO),
        ("Some numbers:", replace(hot, grammar=NUMBERS, repeat_penalty=1.2), NUMBERS),
        ("A JSON record about Paris:", replace(hot, json_schema=RECORD), record),
        ("Hello", replace(hot, temperature=0.8, top_k=40, json_schema=RECORD), record),
        ("Is the sky blue? Answer:", replace(hot, grammar=YES_NO, mirostat_mode=2), YES_NO),
        ("Some numbers:", replace(hot, grammar=NUMBERS, mirostat_mode=1), NUMBERS),
    ]
    for prompt, sampling, grammar in cases:
        tokens = sampled_tokens(model, prompt, sampling)
        replay(model, grammar, tokens)
        text = b"".join(model.piece(t) for t in tokens if not model.is_eog(t)).decode()
        if sampling.grammar == YES_NO:
            assert YES_NO_RE.fullmatch(text), text
        elif sampling.json_schema is not None and model.is_eog(tokens[-1]):
            # llama_cpp's converter lets strings hold control characters
            assert set(json.loads(text, strict=False)) == {"city", "population", "tags"}


@pytest.mark.parametrize(
    ("prompt", "grammar"),
    [
        ("A JSON record about Paris:", schema_grammar(RECORD)),
        ("What's the weather in Paris? Call a tool.", schema_grammar(
            {"type": "object", "properties": {"name": {"const": "get_weather"}, "arguments": {
                "type": "object", "properties": {"city": {"type": "string"}}}}}
        )),
        ("Some numbers:", NUMBERS),
        ("Ünïcödé, emoji 🙂 and 日本語:", 'root ::= [^a-z]+ [a-z]'),
    ],
)  # fmt: skip
def test_the_vocab_index_keeps_every_token_thegrammar_allows(
    model: LlamaCppModel, prompt: str, grammar: str
) -> None:
    s = SamplingParams(temperature=1.0, seed=2, max_tokens=25, grammar=grammar)
    replay(model, grammar, sampled_tokens(model, prompt, s), check_index=True)


def test_the_vocab_index_changes_no_token(
    model: LlamaCppModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With or without the index, the grammar leaves the chain the same candidates."""
    weather = schema_grammar(
        {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}
    )
    runs = [
        SamplingParams(temperature=t, seed=seed, max_tokens=30, grammar=g, min_p=min_p)
        for t, seed, min_p in [(0.0, 0, 0.05), (0.8, 1, 0.05), (1.5, 2, 0.0), (1.5, 3, 0.0)]
        for g in (weather, NUMBERS)
    ]
    prompt = "The weather in Paris, as JSON:"
    with_index = [sampled_tokens(model, prompt, s) for s in runs]
    assert model.vocab_index() is not None
    monkeypatch.setattr(model, "_vocab_index", None)
    monkeypatch.setattr(VocabIndex, "WORTH", float("inf"))
    without = [sampled_tokens(model, prompt, s) for s in runs]
    assert model._vocab_index is None and model.grammar_seconds > 0
    assert with_index == without


def test_asking_the_grammar_about_the_best_tokens_only_changes_no_token(
    model: LlamaCppModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a rejection, the grammar is asked about the best-scored tokens only (greedy and
    top-k sampling): the same tokens as filtering the whole vocabulary, bias and penalties
    included."""
    tool_call = schema_grammar(
        {
            "type": "object",
            "properties": {
                "name": {"const": "get_weather"},
                "arguments": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
            "required": ["name", "arguments"],
        }
    )
    runs = [
        SamplingParams(temperature=0.0, max_tokens=30, grammar=tool_call),
        SamplingParams(temperature=0.0, max_tokens=30, grammar=NUMBERS, logit_bias={236771: 8.0}),
        SamplingParams(temperature=0.8, seed=1, max_tokens=30, grammar=tool_call),
        SamplingParams(
            temperature=1.2, seed=2, max_tokens=30, grammar=NUMBERS, top_k=10,
            repeat_penalty=1.3, presence_penalty=-0.5, frequency_penalty=0.4,
        ),
    ]  # fmt: skip
    prompt = "What's the weather in Paris? Call a tool."
    hits: list[int] = []
    shortcut = Sampler._sample_among_the_best

    def counted(self: Sampler, data: Any, cur: Any) -> int | None:
        token = shortcut(self, data, cur)
        if token is not None:
            hits.append(token)
        return token

    monkeypatch.setattr(Sampler, "_sample_among_the_best", counted)
    fast = [sampled_tokens(model, prompt, s) for s in runs]
    assert len(hits) >= len(runs)  # the shortcut chose tokens in these runs
    monkeypatch.setattr("app.engine.sampling.TOP_CHECKED", ())
    slow = [sampled_tokens(model, prompt, s) for s in runs]
    assert fast == slow
