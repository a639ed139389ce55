"""A draft model suggested for a model: a smaller one in the library with the same tokenizer
(the same token list, compared by the headers' signatures), the smallest of them."""

from __future__ import annotations

from pathlib import Path

from app.library.drafts import suggest_draft
from app.library.local import Library
from tests.helpers.gguf_writer import write_gguf

OTHER_TOKENS = {"tokenizer.ggml.tokens": [f"w{i}" for i in range(300)]}


def test_the_smallest_smaller_model_with_the_same_tokenizer_is_suggested(tmp_path: Path) -> None:
    models = tmp_path / "models" / "test"
    write_gguf(models / "big" / "big.gguf", vocab_size=300, payload=1 << 20)
    write_gguf(models / "half" / "half.gguf", vocab_size=300, payload=1 << 19)
    write_gguf(models / "small" / "small.gguf", vocab_size=300, payload=1 << 16)
    # the same size of vocabulary, other tokens; and a vocabulary one token larger
    write_gguf(models / "other" / "other.gguf", vocab_size=300, payload=1 << 10,
               extra_kv=OTHER_TOKENS)  # fmt: skip
    write_gguf(models / "wider" / "wider.gguf", vocab_size=301, payload=1 << 10)
    library = Library(tmp_path / "models", hf_cache_dir=tmp_path / "hf", lmstudio_dirs=())
    listed = {m.path.stem: m for m in library.scan()}
    suggested = suggest_draft(listed["big"], list(listed.values()))
    assert suggested is not None and suggested.path.stem == "small"
    # nothing smaller with its tokenizer: no suggestion (a model never drafts for itself)
    assert suggest_draft(listed["small"], list(listed.values())) is None
    assert suggest_draft(listed["other"], list(listed.values())) is None
