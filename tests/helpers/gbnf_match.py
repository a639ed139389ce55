"""Does a text match a GBNF grammar, as llama.cpp's own grammar sampler reads it?

Loads only a model's vocabulary (``vocab_only``: no weights) and walks the text through
``llama_sampler_init_grammar`` one byte at a time, each as a token whose piece is that byte
(SentencePiece vocabularies turn "▁" into a space, so their own tokenization of a text is
not always the text): each must keep its logit, and at the end an end-of-generation token
must be allowed (the grammar is complete).
"""

from __future__ import annotations

import ctypes
import math
from pathlib import Path

import llama_cpp as native


class GrammarMatcher:
    def __init__(self, model_path: Path) -> None:
        params = native.llama_model_default_params()
        params.vocab_only = True
        self._model = native.llama_model_load_from_file(str(model_path).encode(), params)
        if not self._model:
            raise RuntimeError(f"cannot load the vocabulary of {model_path}")
        self._vocab = native.llama_model_get_vocab(self._model)
        self._bytes = self._byte_tokens()

    def _byte_tokens(self) -> dict[int, int]:
        found: dict[int, int] = {}
        buf = ctypes.create_string_buffer(64)
        for token in range(native.llama_vocab_n_tokens(self._vocab)):
            n = native.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, True)
            if n == 1:
                found.setdefault(buf.raw[0], token)
                if len(found) == 256:
                    break
        return found

    def close(self) -> None:
        if self._model:
            native.llama_model_free(self._model)
            self._model = None

    def tokens(self, text: str) -> list[int]:
        return [self._bytes[b] for b in text.encode()]

    def parses(self, grammar: str) -> bool:
        sampler = native.llama_sampler_init_grammar(self._vocab, grammar.encode(), b"root")
        if not sampler:
            return False
        native.llama_sampler_free(sampler)
        return True

    def matches(self, grammar: str, text: str) -> bool:
        sampler = native.llama_sampler_init_grammar(self._vocab, grammar.encode(), b"root")
        assert sampler, "llama.cpp refused the grammar"
        try:
            for token in self.tokens(text):
                if not self._allowed(sampler, token):
                    return False
                native.llama_sampler_accept(sampler, token)
            return self._allowed(sampler, native.llama_vocab_eos(self._vocab))
        finally:
            native.llama_sampler_free(sampler)

    @staticmethod
    def _allowed(sampler: ctypes.c_void_p, token: int) -> bool:
        data = (native.llama_token_data * 1)(native.llama_token_data(token, 0.0, 0.0))
        arr = native.llama_token_data_array(data, 1, -1, False)
        native.llama_sampler_apply(sampler, ctypes.byref(arr))
        return not math.isinf(data[0].logit)
