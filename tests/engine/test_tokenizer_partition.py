"""llama.cpp's split of a text at special and user-defined tokens, as scripts/build_llama.py
patches it (every build): the text is cut into the same fragments as before, whatever their
number. The patch only changes how the fragment list is walked (it was quadratic in the
matches: bench/tokenizer_time.py prints the ratio); these tests check the tokens, on the real
test model's vocabulary, against each fragment tokenized alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_cpp import Llama

SPECIAL = ("<start_of_turn>", "<end_of_turn>", "<unused7>")


@pytest.fixture(scope="module")
def vocab(gemma_path: Path) -> Iterator[Llama]:
    model = Llama(str(gemma_path), vocab_only=True, verbose=False)
    yield model
    model.close()


def tokens(vocab: Llama, text: str, special: bool = True) -> list[int]:
    return vocab.tokenize(text.encode(), add_bos=False, special=special)


def test_special_tokens_split_the_text_into_the_same_pieces_however_many(vocab: Llama) -> None:
    unit = "<start_of_turn>user\nHi there<end_of_turn>\n<unused7>w\n\n"
    once = tokens(vocab, unit)
    assert len(once) > 8
    for times in (2, 50, 2000):
        assert tokens(vocab, unit * times) == once * times


def test_a_long_text_is_tokenized_as_its_fragments_are(vocab: Llama) -> None:
    """Fragments of different lengths between the special tokens, at the start, the end and
    side by side: each special token is one id and each run of text is tokenized alone."""
    pieces = ["Hello world", "<start_of_turn>", "<end_of_turn>", "  two  spaces", "<unused7>"]
    pieces += ["a\tb", "<start_of_turn>", "x", "ünïcödé 😀", "<end_of_turn>"]
    text = "".join(pieces * 300)
    expected: list[int] = []
    for piece in pieces * 300:
        expected += tokens(vocab, piece)
    assert all(len(tokens(vocab, s)) == 1 for s in SPECIAL)
    assert tokens(vocab, text) == expected


def test_without_special_parsing_the_control_tokens_stay_text(vocab: Llama) -> None:
    text = "<start_of_turn>w\n" * 500
    ids = tokens(vocab, text, special=False)
    start = tokens(vocab, "<start_of_turn>")[0]
    assert start not in ids
    assert ids == tokens(vocab, "<start_of_turn>w\n", special=False) * 500
