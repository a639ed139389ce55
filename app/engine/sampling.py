"""Sampling in C, one chain per sequence, with grammars applied lazily.

Each generating sequence owns a :class:`Sampler`: llama.cpp's sampler chain (logit bias,
penalties, then greedy, mirostat or top-k/typical/top-p/min-p/temperature/dist) built from its
request's :class:`~app.engine.types.SamplingParams`. Nothing here does per-token Python work
proportional to the vocabulary on the common path: ``llama_sampler_sample`` reads the logits of
one output of the last batch and picks a token in C.

Worker thread only (the engine's scheduler); ``close`` frees the native samplers.
"""

from __future__ import annotations

import ctypes
import time
import weakref
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from app.engine.triggers import TriggerWatch, check_triggers
from app.engine.types import BadRequestError, SamplingParams

if TYPE_CHECKING:
    from app.engine.constraints import Grammar


def _native() -> Any:
    import llama_cpp.llama_cpp as native

    return native


def grammar_for(sampling: SamplingParams) -> Grammar | None:
    """The checked, bounded grammar of a request (see :mod:`app.engine.constraints`)."""
    if not sampling.grammar and sampling.json_schema is None:
        return None
    from app.engine.constraints import grammar_for as bounded

    return bounded(sampling)


class Vocabulary(Protocol):
    """What a sampler needs of the loaded model."""

    vocab: Any  # llama_vocab *
    n_vocab: int
    grammar_seconds: float  # spent applying grammars to whole vocabularies

    def piece(self, token: int, special: bool = False) -> bytes: ...

    def vocab_index(self, build: bool = True) -> VocabIndex | None: ...


# llama_token_data {id, logit, p}, as numpy sees it
_TOKEN_DATA = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)])


# How many of the best-scored tokens the grammar is asked about before filtering all of them.
TOP_CHECKED = (64, 1024)


class Sampler:
    """The sampler chain of one generation, built as llama-cpp-python's ``Llama`` builds it
    (logit bias, penalties, grammar, then greedy, mirostat or top-k, typical, top-p, min-p,
    temperature and dist), but with the grammar applied lazily.

    llama.cpp's grammar sampler checks every candidate against the grammar: with Gemma 3's
    262k-token vocabulary that costs more per token (80-250 ms) than decoding a small model.
    So, like llama-server (common_sampler_sample), the chain first samples without the
    grammar and the grammar checks only the token it chose. When it rejects that token, the
    chain goes back to its state before and samples again from the candidates with every
    token the grammar rejects at -inf, exactly as after llama.cpp's grammar sampler; to find
    those without checking all 262k, :class:`VocabIndex` first rules out, by asking the
    grammar about one- and two-character tokens, every token whose first characters it
    rejects (a few hundred candidates are left between JSON values).

    Every token is one the grammar accepts. Greedy output is exactly what filtering every
    candidate first gives (the most likely token, when allowed, is the most likely allowed
    one); sampling takes the chain's first choice when the grammar allows it, as llama-server
    does, and otherwise exactly the token filtering first would give.

    With ``grammar_triggers`` the grammar waits (a lazy grammar, see
    :mod:`app.engine.triggers`): the chain samples freely, a :class:`TriggerWatch` looks for a
    trigger in the last bytes of the answer, and once one matches the grammar is handed the
    text from the match on (tokens whole, or byte by byte for a token the match starts
    inside), each checked first, and constrains every token after.

    ``sample(ctx, idx)`` samples from output ``idx`` of the last decoded batch and accepts
    the token (into the chain and the grammar). Worker thread only; ``close`` frees the
    native samplers.
    """

    def __init__(
        self,
        model: Vocabulary,
        s: SamplingParams,
        seed: int,
        grammar: Grammar | None = None,
    ) -> None:
        self._native = native = _native()
        self._model = model
        self._grammar: Any = None  # the lazily applied grammar sampler
        # a lazy grammar's trigger watch, until a trigger matches (None: the grammar applies)
        self._watch: TriggerWatch | None = None
        self._chain: Any = native.llama_sampler_chain_init(
            native.llama_sampler_chain_default_params()
        )
        n_vocab = self._n_vocab = model.n_vocab
        add = self._add
        try:
            if s.logit_bias:
                bias = (native.llama_logit_bias * len(s.logit_bias))()
                for entry, (token, value) in zip(bias, s.logit_bias.items(), strict=True):
                    entry.token, entry.bias = token, value
                add(native.llama_sampler_init_logit_bias(n_vocab, len(s.logit_bias), bias))
            add(
                native.llama_sampler_init_penalties(
                    n_vocab,
                    s.repeat_last_n,
                    s.repeat_penalty,
                    s.frequency_penalty,
                    s.presence_penalty,
                )
            )
            # the chain's samplers before the grammar's place (which raise or lower logits);
            # the ones after it choose among the candidates left
            self._n_pre = int(native.llama_sampler_chain_n(self._chain))
            if grammar is not None:
                g = native.llama_sampler_init_grammar(
                    model.vocab, grammar.text.encode("utf-8"), grammar.root.encode("utf-8")
                )
                if not g:  # llama-cpp-python would add the NULL to its chain: a segfault
                    raise BadRequestError(
                        "The grammar does not parse (GBNF); check it, e.g. with llama.cpp's "
                        "gbnf-validator. It needs a `root` rule."
                    )
                self._grammar = g
                if s.grammar_triggers:
                    self._watch = TriggerWatch(check_triggers(s.grammar_triggers))
            if s.temperature < 0.0:
                add(native.llama_sampler_init_dist(seed))
            elif s.temperature == 0.0:
                add(native.llama_sampler_init_greedy())
            elif s.mirostat_mode == 1:
                add(
                    native.llama_sampler_init_mirostat(
                        n_vocab, seed, s.mirostat_tau, s.mirostat_eta, 100
                    )
                )
            elif s.mirostat_mode == 2:
                add(native.llama_sampler_init_mirostat_v2(seed, s.mirostat_tau, s.mirostat_eta))
            else:
                add(native.llama_sampler_init_top_k(s.top_k))
                add(native.llama_sampler_init_typical(s.typical_p, 1))
                add(native.llama_sampler_init_top_p(s.top_p, 1))
                add(native.llama_sampler_init_min_p(s.min_p, 1))
                add(native.llama_sampler_init_temp(s.temperature))
                add(native.llama_sampler_init_dist(seed))
        except BaseException:
            self.close()
            raise
        # How many allowed tokens the samplers after the grammar can look at: greedy takes one,
        # top-k k; others (mirostat, no top-k, dist alone) look at every token (None).
        self._need: int | None = None
        if s.temperature == 0.0:
            self._need = 1
        elif (
            s.temperature > 0.0
            and s.mirostat_mode == 0
            and 0 < s.top_k <= max(TOP_CHECKED, default=0)
        ):
            self._need = s.top_k
        if self._grammar is not None:
            self._one_data = (native.llama_token_data * 1)()
            self._one = native.llama_token_data_array()
            # what the grammar has accepted so far ends in a complete character: the
            # VocabIndex, which reads tokens from their first character, applies
            self._text_tail = b""
            self._text_clean = True

    def _add(self, sampler: Any) -> None:
        self._native.llama_sampler_chain_add(self._chain, sampler)

    def sample(self, ctx: Any, idx: int = -1) -> int:
        native = self._native
        if self._grammar is None:
            return int(native.llama_sampler_sample(self._chain, ctx, idx))
        if self._watch is not None:  # a lazy grammar, not triggered yet: free text
            token = int(native.llama_sampler_sample(self._chain, ctx, idx))
            self._watch_for_trigger(token)
            return token
        # First pass: the chain samples and accepts a token. If the grammar rejects it, the
        # chain goes back to a copy taken before (penalty history, random state) to sample
        # again from the tokens the grammar allows. (Sampling with the copy instead would be
        # simpler but is slower: llama.cpp samples faster with a chain it sampled with.)
        before = native.llama_sampler_clone(self._chain)
        token = int(native.llama_sampler_sample(self._chain, ctx, idx))
        if self._allows(token):
            native.llama_sampler_free(before)
        else:
            native.llama_sampler_free(self._chain)
            self._chain = before
            token = self._sample_allowed(ctx, idx)
            native.llama_sampler_accept(self._chain, token)
        native.llama_sampler_accept(self._grammar, token)
        self._follow_text(token)
        return token

    def _watch_for_trigger(self, token: int) -> None:
        """Feed the trigger watch; on a match, hand the grammar the text from its start."""
        watch = self._watch
        assert watch is not None
        start = watch.feed(token, self._model.piece(token, special=True))
        if start is None:
            return
        self._watch = None
        for tok, begin, end in watch.tokens:
            if end <= start:
                continue
            if begin >= start:
                self._accept_triggered(tok, watch.text)
                continue
            for byte in watch.text[start:end]:  # the match starts inside this token
                self._accept_triggered(byte_token(self._model, byte), watch.text)

    def _accept_triggered(self, token: int | None, text: bytearray) -> None:
        # llama.cpp throws (through the C API: the process ends) on a token its grammar
        # rejects, so each is checked first
        if token is None or not self._allows(token):
            shown = bytes(text[-80:]).decode("utf-8", errors="replace")
            raise BadRequestError(
                f"A grammar trigger matched ({shown!r}) but the grammar does not accept the "
                "text from there: a trigger must match the text the grammar starts with."
            )
        self._native.llama_sampler_accept(self._grammar, token)
        self._follow_text(token)

    def _allows(self, token: int) -> bool:
        """Whether the grammar, in its current state, accepts ``token`` next."""
        entry = self._one_data[0]
        entry.id, entry.logit, entry.p = token, 0.0, 0.0
        one = self._one
        one.data = ctypes.cast(self._one_data, ctypes.POINTER(self._native.llama_token_data))
        one.size, one.selected, one.sorted = 1, -1, False
        self._native.llama_sampler_apply(self._grammar, ctypes.byref(one))
        return bool(one.data[0].logit != -np.inf)

    def _sample_allowed(self, ctx: Any, idx: int) -> int:
        """The chain's choice after the grammar has given every token it rejects a logit of
        -inf: the candidates llama_sampler_sample would lay out, filtered as the grammar
        sampler would filter them, so the chain picks exactly the token it would pick."""
        native = self._native
        logits = native.llama_get_logits_ith(ctx, idx)
        if not logits:
            raise RuntimeError(f"llama.cpp has no logits for output {idx}")
        scores = np.ctypeslib.as_array(logits, shape=(self._n_vocab,))
        data = np.empty(self._n_vocab, dtype=_TOKEN_DATA)
        data["id"] = np.arange(self._n_vocab, dtype=np.intc)
        data["p"] = 0.0
        cur = native.llama_token_data_array(
            data.ctypes.data_as(ctypes.POINTER(native.llama_token_data)), self._n_vocab, -1, False
        )
        if self._need is not None:
            data["logit"] = scores
            token = self._sample_among_the_best(data, cur)
            if token is not None:
                return token
        # mid-character, the grammar reads the next token's first bytes as the character's
        # end, and the VocabIndex (which reads tokens from their start) does not apply
        index = self._model.vocab_index(build=False) if self._text_clean else None
        if index is not None and not self._text_tail:
            ids = index.candidates(self._grammar)
            allowed = ids[grammar_allows(self._grammar, ids)]
            data["logit"] = -np.inf
            data["logit"][allowed] = scores[allowed]
        else:
            started = time.perf_counter()
            data["logit"] = scores
            native.llama_sampler_apply(self._grammar, ctypes.byref(cur))
            self._model.grammar_seconds += time.perf_counter() - started
        native.llama_sampler_apply(self._chain, ctypes.byref(cur))
        if not 0 <= cur.selected < cur.size or cur.data[cur.selected].logit == -np.inf:
            # accepting it would abort the process inside llama.cpp; the grammar is the
            # request's (a character past U+10FFFF, an empty class): a 400, not our failure
            raise BadRequestError(
                "The grammar allows none of the model's tokens here, so the answer cannot go "
                "on. Check the grammar: a character past U+10FFFF or an empty character class "
                "matches nothing."
            )
        return int(cur.data[cur.selected].id)

    def _sample_among_the_best(self, data: np.ndarray, cur: Any) -> int | None:
        """The same choice as filtering every token, found by asking the grammar only about
        the most likely ones; None when too few of those are allowed.

        The samplers before the grammar's place (logit bias, penalties) run on every token
        first. After the grammar come greedy (it takes the best allowed token) or top-k (the
        ``k`` best allowed tokens, then typical, top-p, min-p, temperature and dist among
        those only). So once the grammar allows ``need`` of the best-scored tokens, every
        token not asked about scores lower than all of them and could not be chosen: the
        chain, run on the allowed ones alone, picks what it would pick from all 262k
        filtered (ties in score aside). Asking about 64 tokens costs microseconds; filtering
        the vocabulary costs milliseconds."""
        native, chain, need = self._native, self._chain, self._need
        assert need is not None
        for i in range(self._n_pre):
            native.llama_sampler_apply(native.llama_sampler_chain_get(chain, i), ctypes.byref(cur))
        scores = data["logit"]  # after bias and penalties
        for checked in TOP_CHECKED:
            if checked < need:
                continue
            best = np.argpartition(scores, -checked)[-checked:]
            allowed = best[grammar_allows(self._grammar, best.astype(np.intc))]
            if len(allowed) < need:
                continue
            small = np.empty(len(allowed), dtype=_TOKEN_DATA)
            small["id"] = allowed
            small["logit"] = scores[allowed]
            small["p"] = 0.0
            few = native.llama_token_data_array(
                small.ctypes.data_as(ctypes.POINTER(native.llama_token_data)),
                len(small),
                -1,
                False,
            )
            for i in range(self._n_pre, int(native.llama_sampler_chain_n(chain))):
                sampler = native.llama_sampler_chain_get(chain, i)
                native.llama_sampler_apply(sampler, ctypes.byref(few))
            if not 0 <= few.selected < few.size or few.data[few.selected].logit == -np.inf:
                return None  # let the full filter decide (and say so if nothing is allowed)
            return int(few.data[few.selected].id)
        return None

    def _follow_text(self, token: int) -> None:
        """Track whether the accepted text ends in a complete UTF-8 character (the grammar
        then starts the next token afresh); anything odd turns the VocabIndex off."""
        if not self._text_clean:
            return
        piece = self._model.piece(token, special=True)
        if b"\0" in piece:
            self._text_clean = False
            return
        text = self._text_tail + piece
        try:
            text.decode("utf-8")
            self._text_tail = b""
        except UnicodeDecodeError as e:
            if e.reason == "unexpected end of data" and e.end == len(text):
                self._text_tail = text[e.start :]
            else:
                self._text_clean = False

    def close(self) -> None:
        native = self._native
        if getattr(self, "_grammar", None) is not None:
            native.llama_sampler_free(self._grammar)
            self._grammar = None
        if getattr(self, "_chain", None) is not None:
            native.llama_sampler_free(self._chain)
            self._chain = None

    __del__ = close


class VocabIndex:
    """Which tokens start with which one and two characters, as llama.cpp's grammar reads
    them (the special-token pieces, decoded as UTF-8), built once per model on first use.

    A grammar accepts a token only if it accepts each of its prefixes, so when it rejects a
    token that is exactly some character ``c`` it rejects every token starting with ``c``.
    :meth:`candidates` asks the grammar about the one-character tokens (about 19k for Gemma 3)
    and, inside the large groups it allows (half the vocabulary starts with a space), about
    the two-character ones, and keeps every token not ruled out that way: all the tokens
    the grammar allows and, between JSON values, a few hundred others instead of 262k.
    End-of-generation tokens (the grammar judges them apart), tokens with a NUL byte and
    tokens that do not start with a valid character are always kept.
    """

    BIG_GROUP = 1024  # split groups larger than this by their first two characters
    WORTH = 1.0  # seconds of grammar passes over whole vocabularies that warrant building one

    def __init__(self, model: Vocabulary) -> None:
        native = _native()
        vocab, n = model.vocab, model.n_vocab
        buf = ctypes.create_string_buffer(256)
        to_piece, is_eog = native.llama_token_to_piece, native.llama_vocab_is_eog
        firsts: dict[str, int] = {}
        pairs: dict[str, int] = {}
        first = np.full(n, -1, dtype=np.intc)
        pair = np.full(n, -1, dtype=np.intc)
        probe1: dict[int, int] = {}  # class of a first character -> a token that is just it
        probe2: dict[int, int] = {}  # class of two first characters -> a token that is them
        for token in range(n):
            size = to_piece(vocab, token, buf, 256, 0, True)
            piece = buf.raw[:size] if 0 <= size <= 256 else model.piece(token, special=True)
            if not piece or b"\0" in piece or is_eog(vocab, token):
                continue
            try:
                text, whole = piece.decode("utf-8"), True
            except UnicodeDecodeError as e:  # the grammar reads the characters before it
                text, whole = piece[: e.start].decode("utf-8"), False
            if not text:
                continue
            c = first[token] = firsts.setdefault(text[0], len(firsts))
            if whole and len(text) == 1:
                probe1.setdefault(c, token)
            if len(text) >= 2:
                c = pair[token] = pairs.setdefault(text[:2], len(pairs))
                if whole and len(text) == 2:
                    probe2.setdefault(c, token)
        # classes index flags that have one more slot, always True, for "no class" (-1)
        self._first = np.where(first < 0, len(firsts), first).astype(np.intc)
        self._pair = np.where(pair < 0, len(pairs), pair).astype(np.intc)
        self._n_first, self._n_pair = len(firsts), len(pairs)
        self._probe1 = np.fromiter(probe1.values(), dtype=np.intc, count=len(probe1))
        self._probe1_class = np.fromiter(probe1.keys(), dtype=np.intc, count=len(probe1))
        self._probe2 = np.fromiter(probe2.values(), dtype=np.intc, count=len(probe2))
        self._probe2_class = np.fromiter(probe2.keys(), dtype=np.intc, count=len(probe2))
        self._probe2_parent = self._first[self._probe2]
        self._big = np.bincount(first[first >= 0], minlength=len(firsts)) > self.BIG_GROUP

    def candidates(self, grammar: Any) -> np.ndarray:
        """The token ids, ascending, that ``grammar`` may allow next: a superset of those it
        allows, valid while the text it accepted so far ends in a complete character."""
        allowed1 = np.ones(self._n_first + 1, dtype=bool)
        rejected = ~grammar_allows(grammar, self._probe1)
        allowed1[self._probe1_class[rejected]] = False
        split = (allowed1[:-1] & self._big)[self._probe2_parent]
        allowed2 = np.ones(self._n_pair + 1, dtype=bool)
        if split.any():
            rejected = ~grammar_allows(grammar, self._probe2[split])
            allowed2[self._probe2_class[split][rejected]] = False
        keep = allowed1[self._first] & allowed2[self._pair]
        return np.flatnonzero(keep).astype(np.intc)


_byte_tokens: weakref.WeakKeyDictionary[Any, dict[int, int]] = weakref.WeakKeyDictionary()


def byte_token(model: Vocabulary, byte: int) -> int | None:
    """A token whose piece is exactly the one byte ``byte`` (byte-level vocabularies have all
    256; SentencePiece ones their <0xNN> tokens), found once per model; None if none is."""
    table = _byte_tokens.get(model)
    if table is None:
        table = _byte_tokens[model] = {}
        for token in range(model.n_vocab):
            piece = model.piece(token, special=True)
            if len(piece) == 1:
                table.setdefault(piece[0], token)
                if len(table) == 256:
                    break
    return table.get(byte)


def grammar_allows(grammar: Any, tokens: np.ndarray) -> np.ndarray:
    """For each token, whether the grammar sampler in its current state allows it next."""
    native = _native()
    data = np.zeros(len(tokens), dtype=_TOKEN_DATA)
    data["id"] = tokens
    cur = native.llama_token_data_array(
        data.ctypes.data_as(ctypes.POINTER(native.llama_token_data)), len(tokens), -1, False
    )
    native.llama_sampler_apply(grammar, ctypes.byref(cur))
    return np.asarray(data["logit"] != -np.inf)
