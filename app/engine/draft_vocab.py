"""Whether a draft model can draft for a target model: their vocabularies, from GGUF headers.

A draft model's tokens are verified by the target as token ids, so both must mean the same text
by the same id. The rule is llama.cpp's ``common_speculative_are_compatible``: the same tokenizer
type, the same BOS/EOS ids and add-BOS/add-EOS flags, vocabulary sizes at most
:data:`MAX_SIZE_DIFFERENCE` apart, and the same text for every token id from
:data:`CHECK_FROM` up to the smaller size. Here it is read from the two files' headers
(``tokenizer.ggml.*``, what llama.cpp builds its vocabulary from) before the draft's weights
are loaded, so a wrong choice costs a header read and says why.

:func:`same_tokenizer` is the stricter test the model picker uses to suggest a draft: an equal
:attr:`Vocabulary.signature` (the tokenizer type, size and a hash of every token's text).

No llama_cpp, no Qt: header reads only (:func:`app.engine.gguf.read_gguf` with ``tokens``).
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from app.engine.gguf import TOKENS_KEY, read_gguf
from app.engine.gguf_reader import GGUFError
from app.engine.types import EngineError

MAX_SIZE_DIFFERENCE: Final = 128  # llama.cpp's SPEC_VOCAB_MAX_SIZE_DIFFERENCE
CHECK_FROM: Final = 5  # llama.cpp's SPEC_VOCAB_CHECK_START_TOKEN_ID: special tokens may differ
# llama.cpp's add-BOS/add-EOS when the header does not say, by tokenizer type
_ADD_DEFAULTS: Final = {"llama": (True, False), "bert": (True, False), "t5": (False, True)}


class DraftModelError(EngineError):
    """The draft model cannot draft for the model: its file, or a vocabulary that differs."""


@dataclass(frozen=True)
class Vocabulary:
    """A GGUF's vocabulary as its header describes it."""

    model: str | None  # tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (BPE) ...
    bos: int | None
    eos: int | None
    add_bos: bool
    add_eos: bool
    tokens: tuple[str, ...]

    @functools.cached_property
    def signature(self) -> str:
        """Equal for two files with the same tokenizer: type, size and every token's text."""
        h = hashlib.sha256(f"{self.model}\0{len(self.tokens)}\0{self.bos}\0{self.eos}".encode())
        for token in self.tokens:
            h.update(token.encode("utf-8", "surrogatepass"))
            h.update(b"\0")
        return h.hexdigest()


def _vocabulary(metadata: dict[str, Any], name: str) -> Vocabulary:
    tokens = metadata.get(TOKENS_KEY)
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise DraftModelError(f"{name} has no vocabulary in its header that Ember can read.")
    model = metadata.get("tokenizer.ggml.model")
    model = model if isinstance(model, str) else None
    add_bos, add_eos = _ADD_DEFAULTS.get(model or "", (False, False))
    bos = metadata.get("tokenizer.ggml.bos_token_id")
    eos = metadata.get("tokenizer.ggml.eos_token_id")
    return Vocabulary(
        model=model,
        bos=bos if isinstance(bos, int) else None,
        eos=eos if isinstance(eos, int) else None,
        add_bos=bool(metadata.get("tokenizer.ggml.add_bos_token", add_bos)),
        add_eos=bool(metadata.get("tokenizer.ggml.add_eos_token", add_eos)),
        tokens=tuple(tokens),
    )


@functools.lru_cache(maxsize=32)
def _cached(path: str, size: int, mtime_ns: int) -> Vocabulary:
    del size, mtime_ns  # the cache key: a changed file is read again
    try:
        info = read_gguf(path, tokens=True)
    except GGUFError as e:
        raise DraftModelError(str(e)) from e
    return _vocabulary(info.metadata, Path(path).name)


def read_vocabulary(path: str | os.PathLike[str]) -> Vocabulary:
    """The vocabulary in ``path``'s header (cached per file and modification); raises
    DraftModelError for a missing, unreadable, non-GGUF or damaged file."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        raise DraftModelError(f"No model file at {p}.") from None
    if not p.is_file():
        raise DraftModelError(f"{p} is a folder, not a model file; choose a .gguf file.")
    return _cached(str(p.resolve()), st.st_size, st.st_mtime_ns)


def incompatibility(target: Vocabulary, draft: Vocabulary) -> str | None:
    """Why ``draft``'s tokens cannot be verified by ``target`` (None: they can)."""
    if target.model != draft.model:
        return f"its tokenizer is {draft.model!r}, the model's is {target.model!r}"
    if (target.bos, target.eos) != (draft.bos, draft.eos):
        return (
            f"its BOS/EOS tokens are {draft.bos}/{draft.eos}, the model's {target.bos}/{target.eos}"
        )
    if (target.add_bos, target.add_eos) != (draft.add_bos, draft.add_eos):
        return "it adds BOS/EOS tokens differently"
    n_target, n_draft = len(target.tokens), len(draft.tokens)
    if abs(n_target - n_draft) > MAX_SIZE_DIFFERENCE:
        return f"its vocabulary has {n_draft:,} tokens, the model's {n_target:,}"
    end = min(n_target, n_draft)
    if target.tokens[CHECK_FROM:end] != draft.tokens[CHECK_FROM:end]:
        i = next(i for i in range(CHECK_FROM, end) if target.tokens[i] != draft.tokens[i])
        return f"its token {i} is {draft.tokens[i]!r}, the model's is {target.tokens[i]!r}"
    return None


def check_draft(target_path: str, draft_path: str) -> None:
    """Raise DraftModelError, saying why, unless ``draft_path`` can draft for ``target_path``."""
    name = Path(draft_path).name
    reason = incompatibility(read_vocabulary(target_path), read_vocabulary(draft_path))
    if reason is not None:
        raise DraftModelError(
            f"{name} cannot be the draft model of {Path(target_path).name}: {reason}. A draft "
            "model must have the same vocabulary (usually a smaller model of the same family)."
        )


def same_tokenizer(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two files have the same tokenizer (equal signatures); False if either is
    unreadable."""
    try:
        return read_vocabulary(a).signature == read_vocabulary(b).signature
    except DraftModelError:
        return False
