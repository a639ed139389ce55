"""A draft model: a small GGUF with the target's vocabulary guesses the next tokens of every
drafting answer, in the scheduler's step, before the target's decode verifies them.

:class:`DraftModel` has its own llama.cpp context on the worker thread with one sequence per
generating slot (``n_parallel``), kept in step with the target's accepted tokens: before each
draft, a slot's draft sequence is cut back to what it shares with the slot's tokens (the
target's KV) and the rest is read, at most ``n_batch`` tokens over all slots a step (a new
answer's prompt is read over a few steps, without drafts meanwhile). Then every drafting slot
is drafted in the same decodes: one decode adds each slot's next token, greedy (argmax) on the
draft's logits, up to the slot's ``k`` tokens, and a slot stops early when the draft is unsure
(its top token's probability below :data:`P_MIN`, llama-server's ``--draft-p-min``) or ends the
answer. A greedy draft is a point mass, so the scheduler's verification (sampling the slot's
own chain and accepting while it agrees) stays exact for greedy, sampled and grammar-constrained
answers alike (:mod:`app.engine.speculation`).

How many tokens each slot asks for is :class:`~app.engine.speculation.Drafter`'s adaptive
rule (longer while accepted, shorter or paused when not), so an answer the draft model cannot
guess soon stops paying for its drafts. The vocabulary is checked before the draft's weights
load (:mod:`app.engine.draft_vocab`), and its memory counts in the fit estimate
(:func:`app.engine.sizing.estimate`).

:func:`offer_drafts` is the scheduler's hook. Worker thread only; llama_cpp is imported lazily.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from app.engine.draft_vocab import DraftModelError, check_draft
from app.engine.sizing import draft_context
from app.engine.types import LoadParams

if TYPE_CHECKING:
    from app.engine.slots import Slot

log = logging.getLogger(__name__)

P_MIN: Final = 0.75  # a draft goes on while its top token is at least this likely
TAIL: Final = 64  # tokens compared one by one when a draft sequence is cut back


@dataclass(frozen=True, slots=True)
class DraftWant:
    """One slot's request for a draft: its tokens (the target's KV), the token about to be
    decoded after them, and how many tokens to guess after that."""

    key: str
    tokens: Sequence[int]
    last: int
    k: int


class DraftSource(Protocol):
    """Drafts for several slots at once (a :class:`DraftModel`, or a test's fake)."""

    def propose(self, wants: list[DraftWant]) -> dict[str, list[int]]: ...

    def forget(self, key: str) -> None: ...

    def close(self) -> None: ...


def offer_drafts(source: DraftSource, slots: Sequence[Slot], spare: int, n_ctx: int) -> None:
    """Ask ``source`` for the drafts of every generating slot that wants one this step (within
    ``spare`` drafted tokens over all, each slot's ``max_tokens`` and the context), and leave
    each on its drafter, which the scheduler's batch takes next."""
    wants: list[DraftWant] = []
    owners: dict[str, Slot] = {}
    for slot in slots:
        drafter = slot.drafter
        if drafter is None or not slot.generating or spare <= 0:
            continue
        pos = len(slot.tokens) + 1
        room = min(spare, slot.max_tokens - slot.n_out - 1, n_ctx - 1 - pos)
        k = drafter.wants(slot.last, room)
        if k > 0:
            wants.append(DraftWant(slot.job.id, slot.tokens, slot.last, k))
            owners[slot.job.id] = slot
            spare -= k
    if not wants:
        return
    for key, draft in source.propose(wants).items():
        drafter = owners[key].drafter
        assert drafter is not None
        drafter.offered = draft


@dataclass(slots=True)
class _Sequence:
    seq: int
    held: list[int] = field(default_factory=list)  # the tokens in the draft's sequence


class DraftModel:
    """A loaded draft model and its context, drafting for ``target``'s slots (see the module
    doc). Made, used and closed on the engine worker thread."""

    def __init__(self, path: str, target: Any, params: LoadParams) -> None:
        from llama_cpp import llama_cpp as native

        from app.engine.batch import Batch
        from app.engine.load_settings import kv_cache_type_id

        check_draft(target.path, path)  # before any weights are read
        self.path = path
        self._native = native
        self._model: Any = None
        self._ctx: Any = None
        mparams = native.llama_model_default_params()
        mparams.n_gpu_layers = 999 if getattr(target, "n_gpu_layers", 0) else 0
        mparams.use_mmap = params.use_mmap
        self._model = native.llama_model_load_from_file(path.encode("utf-8"), mparams)
        if not self._model:
            raise DraftModelError(
                f"llama.cpp could not load the draft model {Path(path).name}: the file may be "
                "damaged or use an architecture this build does not support."
            )
        self.n_parallel = target.n_parallel
        self.n_batch = target.n_batch
        c = native.llama_context_default_params()
        c.n_ctx = draft_context(target.n_ctx, params)
        c.n_batch = self.n_batch
        c.n_ubatch = max(1, min(params.n_ubatch, self.n_batch))
        c.n_seq_max = self.n_parallel
        c.n_threads = target.n_threads
        c.n_threads_batch = params.n_threads_batch or target.n_threads
        c.flash_attn_type = (
            native.LLAMA_FLASH_ATTN_TYPE_AUTO
            if params.flash_attn
            else native.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        c.type_k = kv_cache_type_id(params.cache_type_k)
        c.type_v = kv_cache_type_id(params.cache_type_v)
        c.swa_full = True  # rejected drafts are cut from the end of a sequence
        c.kv_unified = True
        c.no_perf = True
        c.n_outputs_max = self.n_parallel
        c.embeddings = False
        self._ctx = native.llama_init_from_model(self._model, c)
        if not self._ctx:
            self.close()
            raise DraftModelError(
                f"llama.cpp could not make a context for the draft model {Path(path).name}."
            )
        self._memory = native.llama_get_memory(self._ctx)
        self._vocab = native.llama_model_get_vocab(self._model)
        self.n_vocab = min(int(native.llama_vocab_n_tokens(self._vocab)), target.n_vocab)
        self.batch = Batch(native, self.n_batch + self.n_parallel)
        self._free = list(range(self.n_parallel))
        self._sequences: dict[str, _Sequence] = {}
        self.decodes = 0  # draft decodes made (for tests and the benchmark)
        self.most_at_once = 0  # most answers one draft decode guessed for
        log.info("Loaded the draft model %s", Path(path).name)

    # -- drafting -------------------------------------------------------------------------

    def propose(self, wants: list[DraftWant]) -> dict[str, list[int]]:
        """Greedy drafts of up to ``k`` tokens for each want (see the module doc)."""
        batch = self.batch
        batch.clear()
        budget = self.n_batch
        rows: dict[str, int] = {}
        drafting: list[tuple[DraftWant, _Sequence]] = []
        for want in wants:
            state = self._sequence(want.key)
            if state is None:
                continue
            self._follow(state, want.tokens)
            missing = len(want.tokens) - len(state.held)
            if missing + 1 > budget:  # a prompt still being read: a chunk now, drafts later
                chunk = list(want.tokens[len(state.held) : len(state.held) + budget])
                if chunk:
                    batch.add(state.seq, chunk, len(state.held), False)
                    state.held.extend(chunk)
                    budget -= len(chunk)
                continue
            todo = [*want.tokens[len(state.held) :], want.last]
            rows[want.key] = batch.add(state.seq, todo, len(state.held), True)
            state.held.extend(todo)
            budget -= len(todo)
            drafting.append((want, state))
        drafts: dict[str, list[int]] = {w.key: [] for w, _ in drafting}
        self.most_at_once = max(self.most_at_once, len(drafting))
        if batch.n == 0 or not self._decode():
            return {}
        while drafting:
            going_on: list[tuple[DraftWant, _Sequence]] = []
            batch.clear()
            for want, state in drafting:
                token = self._guess(rows[want.key])
                if token is None:
                    continue
                draft = drafts[want.key]
                draft.append(token)
                if len(draft) >= want.k or self._native.llama_vocab_is_eog(self._vocab, token):
                    continue
                rows[want.key] = batch.add(state.seq, [token], len(state.held), True)
                state.held.append(token)
                going_on.append((want, state))
            self.most_at_once = max(self.most_at_once, len(going_on))
            if not going_on or not self._decode():
                break
            drafting = going_on
        return {key: draft for key, draft in drafts.items() if draft}

    def _guess(self, row: int) -> int | None:
        """The draft's most likely token at batch row ``row``; None when it is less likely
        than :data:`P_MIN`."""
        import numpy as np  # loaded with llama_cpp already; not at the app's start

        ptr = self._native.llama_get_logits_ith(self._ctx, row)
        logits = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))
        token = int(logits.argmax())
        top = logits[token]
        if float(np.exp(logits - top).sum()) * P_MIN > 1.0:  # p(top) = 1 / sum(exp(l - top))
            return None
        return token

    def _follow(self, state: _Sequence, tokens: Sequence[int]) -> None:
        """Cut the draft's sequence back to what it shares with ``tokens``."""
        held = state.held
        n = len(held)
        if n <= len(tokens) and held == list(tokens[:n]):
            return
        # after a rejection only the last few differ: compare the rest in one go (C speed)
        start = max(0, min(n, len(tokens)) - TAIL)
        same = start if held[:start] == list(tokens[:start]) else 0
        while same < min(n, len(tokens)) and held[same] == tokens[same]:
            same += 1
        self._native.llama_memory_seq_rm(self._memory, state.seq, same, -1)
        del held[same:]

    def _decode(self) -> bool:
        self.decodes += 1
        code = int(self._native.llama_decode(self._ctx, self.batch.ready()))
        if code == 0:
            return True
        log.warning("The draft model failed to decode (code %d); its sequences start over", code)
        for state in self._sequences.values():
            self._native.llama_memory_seq_rm(self._memory, state.seq, -1, -1)
            state.held.clear()
        return False

    def _sequence(self, key: str) -> _Sequence | None:
        state = self._sequences.get(key)
        if state is None and self._free:
            state = self._sequences[key] = _Sequence(self._free.pop())
        return state

    def forget(self, key: str) -> None:
        """The slot ``key`` ended: its draft sequence is free."""
        state = self._sequences.pop(key, None)
        if state is not None:
            self._native.llama_memory_seq_rm(self._memory, state.seq, -1, -1)
            self._free.append(state.seq)

    def close(self) -> None:
        native = self._native
        if self._ctx:
            with contextlib.suppress(Exception):
                native.llama_free(self._ctx)
            self._ctx = None
        if self._model:
            with contextlib.suppress(Exception):
                native.llama_model_free(self._model)
            self._model = None


def open_draft(target: Any, params: LoadParams) -> DraftModel | None:
    """The draft model ``params`` names for ``target`` (None without one, or with drafting
    off); raises DraftModelError saying why it cannot draft."""
    if not params.draft_model or params.draft_max <= 0:
        return None
    return DraftModel(params.draft_model, target, params)
