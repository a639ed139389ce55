"""Which model in the library could draft for another (speculative decoding's draft model).

A draft model must have the model's vocabulary (:mod:`app.engine.draft_vocab`) and be smaller,
or it saves nothing. :func:`suggest_draft` narrows the library by what its metadata cache
already knows (tokenizer type, vocabulary size, BOS/EOS: no file read), then confirms the
survivors by their tokenizer's signature (the header's token list, read once per file and
cached), and suggests the smallest. Called off the GUI thread (the model list's scan).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from app.engine.draft_vocab import same_tokenizer
from app.engine.gguf import EMBEDDING_ARCHITECTURES
from app.library.local_model import LocalModel

DRAFT_KEY = "load.draft_model"  # the setting: "" (none), DRAFT_SUGGESTED or a file's path
DRAFT_SUGGESTED = "suggested"  # the library's suggestion for each model, if it has one
# A draft larger than this share of the model costs about what it saves
MAX_DRAFT_SHARE = 0.5


def _could_draft(model: LocalModel, other: LocalModel) -> bool:
    a, b = model.info, other.info
    if a is None or b is None or other.error is not None or other.path == model.path:
        return False
    return (
        b.architecture not in EMBEDDING_ARCHITECTURES
        and other.size <= model.size * MAX_DRAFT_SHARE
        and (a.tokenizer_model, a.vocab_size, a.bos_token_id, a.eos_token_id)
        == (b.tokenizer_model, b.vocab_size, b.bos_token_id, b.eos_token_id)
        and a.vocab_size is not None
    )


def suggest_draft(
    model: LocalModel,
    models: Sequence[LocalModel],
    same: Callable[[Path, Path], bool] = same_tokenizer,
) -> LocalModel | None:
    """The smallest model of ``models`` with ``model``'s tokenizer and at most half its size;
    None when there is none."""
    for other in sorted((m for m in models if _could_draft(model, m)), key=lambda m: m.size):
        if same(model.path, other.path):
            return other
    return None
