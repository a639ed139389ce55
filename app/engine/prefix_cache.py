"""Which sequence of the context holds which tokens: the prefix cache.

The context has ``n_seq`` sequences (``n_parallel`` generating plus idle ones). Each
:class:`CachedSeq` records the tokens whose KV its sequence holds, from position 0. When a job
arrives, :meth:`PrefixCache.acquire` finds the sequence sharing the longest prefix with its
prompt, from any earlier or running request, not only the last one:

* an idle sequence whose tokens all begin the prompt (a follow-up in the same chat) is taken
  over as it is;
* otherwise the prefix is copied into a free sequence with ``llama_memory_seq_cp``, which in a
  unified KV cache only tags the cells with one more sequence id (no memory, no compute), so
  the source keeps its own continuation (switching back to a branch, regenerating, an editor
  resending a file, two chats with one system prompt);
* idle sequences are evicted least-recently-used when a sequence is needed or when the cache
  has no room for a batch (:meth:`evict_one`);
* with a RAM budget (``ram_budget`` bytes, the "cache.ram_mb" setting), an evicted sequence's
  KV is first saved to RAM (``llama_state_seq_get_data``) in :class:`RamTier`, least recently
  used dropped past the budget, and restored into a sequence (``llama_state_seq_set_data``)
  when a later prompt shares more of it than any sequence in the context does: a chat left
  long ago, when many others came between, starts from RAM instead of being read again.

Pure bookkeeping over the model's ``seq_rm``/``seq_cp``; worker thread only.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class SequenceMemory(Protocol):
    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool: ...

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None: ...

    def seq_pos_min(self, seq: int) -> int: ...

    def seq_pos_max(self, seq: int) -> int: ...

    def seq_save(self, seq: int) -> bytes: ...

    def seq_restore(self, seq: int, data: bytes) -> bool: ...


@dataclass(slots=True)
class CachedSeq:
    seq: int
    tokens: list[int] = field(default_factory=list)  # KV held for positions 0..len-1
    busy: bool = False  # a running job owns it
    last_used: int = 0


def common_prefix(a: list[int], b: list[int], limit: int) -> int:
    n = min(len(a), len(b), limit)
    if n <= 0:
        return 0
    if a[:n] == b[:n]:  # the usual case (a follow-up), compared in C
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]: bisect on slices, also in C
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(slots=True)
class SavedSeq:
    tokens: list[int]  # what the saved KV holds, from position 0
    data: bytes  # llama_state_seq_get_data's bytes
    lowest: int  # its lowest position (sliding-window models may have dropped earlier ones)
    last_used: int


class RamTier:
    """Evicted sequences' KV in RAM, least recently used dropped past ``budget`` bytes."""

    # Shorter sequences are not worth saving: reading them again is about as quick.
    MIN_TOKENS = 64

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.saved: list[SavedSeq] = []
        self.used = 0  # bytes

    def add(self, saved: SavedSeq) -> None:
        if len(saved.data) > self.budget:
            return
        self.saved.append(saved)
        self.used += len(saved.data)
        while self.used > self.budget:
            self.take(min(self.saved, key=lambda s: s.last_used))

    def take(self, saved: SavedSeq) -> None:
        self.saved.remove(saved)
        self.used -= len(saved.data)

    def best(
        self, prompt: list[int], limit: int, cut: Callable[[int], int] | None = None
    ) -> tuple[SavedSeq | None, int]:
        """The saved sequence sharing the longest prefix with ``prompt``, and how long."""
        best, best_n = None, 0
        for saved in self.saved:
            n = common_prefix(saved.tokens, prompt, limit)
            n = cut(n) if cut is not None else n
            if n > best_n:
                best, best_n = saved, n
        return best, best_n


class PrefixCache:
    """The sequences of one context and the tokens each holds (and, with a RAM budget, the
    sequences saved from it)."""

    def __init__(
        self,
        memory: SequenceMemory,
        n_seq: int,
        n_swa: int = 0,
        ram_budget: int = 0,
        make_room: Callable[[int], None] | None = None,
    ) -> None:
        """``make_room(n)`` evicts idle sequences until ``n`` more cells fit (the scheduler's
        rule, used before a restore as before a batch)."""
        self._memory = memory
        self._make_room = make_room
        self._n_swa = n_swa
        self.entries = [CachedSeq(i) for i in range(n_seq)]
        self._clock = itertools.count(1)
        self.ram = RamTier(ram_budget) if ram_budget > 0 else None
        self.restored = 0  # sequences brought back from RAM (for tests and stats)

    def acquire(
        self, prompt: list[int], cut: Callable[[int], int] | None = None
    ) -> tuple[int, int]:
        """A sequence for a job with ``prompt``: ``(seq, reused)``, where the sequence's KV
        now holds exactly ``prompt[:reused]`` (at most ``len(prompt) - 1`` tokens, so at least
        one is decoded to get logits). Raises LookupError when every sequence is busy.
        ``cut(n)`` shortens a shared prefix of ``n`` to one that may be reused (an image's
        positions are reused whole or not at all)."""
        limit = len(prompt) - 1
        best, best_n = self._best_in_context(prompt, limit, cut)
        if self.ram is not None:
            saved, saved_n = self.ram.best(prompt, limit, cut)
            if saved is not None and saved_n > best_n + self.ram.MIN_TOKENS // 2:
                restored = self._restore(saved, saved_n)
                if restored is not None:
                    return restored.seq, saved_n
                best, best_n = self._best_in_context(prompt, limit, cut)  # one may be evicted
        dst: CachedSeq | None
        if best is not None and not best.busy and best_n == len(best.tokens):
            dst = best  # a pure continuation: take it over
        else:
            dst = self._free_entry(keep=best)
            if dst is None and best is not None and not best.busy:
                dst = best  # the only idle one: trim it to the shared prefix
            if dst is None:
                raise LookupError("every sequence is busy")
            if dst is not best:
                self._evict(dst)
                if best is not None and best_n > 0:
                    self._memory.seq_cp(best.seq, dst.seq, 0, best_n)
                    dst.tokens = prompt[:best_n]
        reused = best_n if best is not None and dst.tokens[:best_n] == prompt[:best_n] else 0
        if len(dst.tokens) > reused and not self._memory.seq_rm(dst.seq, reused, -1):
            self._clear(dst)  # a model that cannot cut a sequence (recurrent state)
            reused = 0
        dst.tokens = prompt[:reused]
        dst.busy = True
        dst.last_used = next(self._clock)
        return dst.seq, reused

    def _best_in_context(
        self, prompt: list[int], limit: int, cut: Callable[[int], int] | None = None
    ) -> tuple[CachedSeq | None, int]:
        best: CachedSeq | None = None
        best_n = 0
        for e in self.entries:
            n = common_prefix(e.tokens, prompt, limit)
            n = cut(n) if cut is not None else n
            if n > best_n and self.usable(e, n):
                best, best_n = e, n
        return best, best_n

    def usable(self, e: CachedSeq, n: int) -> bool:
        """Whether ``e``'s KV can continue after its first ``n`` tokens. A model with
        sliding-window layers (Gemma 2/3, gpt-oss…) needs the window before position ``n``;
        llama.cpp reuses cells that fell out of every window of a sequence, so a prefix that
        ends earlier than where the sequence went on may have lost them."""
        lowest = self._memory.seq_pos_min(e.seq)
        return lowest <= (max(0, n - self._n_swa) if self._n_swa > 0 else 0)

    def release(self, seq: int, tokens: list[int]) -> None:
        """The job on ``seq`` is over; its sequence holds ``tokens`` and stays cached."""
        e = self.entries[seq]
        e.tokens = tokens
        e.busy = False
        e.last_used = next(self._clock)

    def drop(self, seq: int) -> None:
        """Forget what ``seq`` holds (its KV may be inconsistent, e.g. after a failed decode)."""
        e = self.entries[seq]
        self._clear(e)
        e.busy = False

    def evict_one(self) -> bool:
        """Free the least recently used idle sequence's cells; False if none holds any."""
        idle = [e for e in self.entries if not e.busy and e.tokens]
        if not idle:
            return False
        self._evict(min(idle, key=lambda e: e.last_used))
        return True

    def cached_tokens(self) -> int:
        return sum(len(e.tokens) for e in self.entries if not e.busy)

    def _free_entry(self, keep: CachedSeq | None) -> CachedSeq | None:
        """An idle sequence to use: an empty one, else the least recently used other than
        ``keep`` (the source of a copy)."""
        idle = [e for e in self.entries if not e.busy and e is not keep]
        if not idle:
            return None
        empty = [e for e in idle if not e.tokens]
        return empty[0] if empty else min(idle, key=lambda e: e.last_used)

    def _restore(self, saved: SavedSeq, n: int) -> CachedSeq | None:
        """Bring ``saved`` back into an idle sequence, busy and cut to its first ``n`` tokens;
        None when no sequence is idle or llama.cpp finds no room for it (a cache miss)."""
        assert self.ram is not None
        need = max(0, n - self._n_swa) if self._n_swa > 0 else 0
        # Restoring places the cells as a batch would, and llama.cpp then drops those outside
        # the sliding window of the restored end: the lowest position left is at least
        # len(tokens) - n_swa, so a prefix much shorter than the saved sequence cannot be used.
        lowest = max(saved.lowest, len(saved.tokens) - self._n_swa if self._n_swa > 0 else 0)
        if lowest > need:
            return None  # the sliding-window layers would lack positions before n
        dst = self._free_entry(keep=None)
        if dst is None:
            return None
        self.ram.take(saved)  # in the context again (saved anew when evicted again)
        self._evict(dst)
        dst.busy = True  # not evicted to make room for itself
        if self._make_room is not None:
            # before llama.cpp places the cells: for sliding-window models it would otherwise
            # take cells that idle sequences still need, as for a batch (Scheduler._keep_room)
            self._make_room(len(saved.tokens))
        if not self._memory.seq_restore(dst.seq, saved.data):
            dst.busy = False
            self._clear(dst)  # no room in the KV cache for it
            return None
        if self._memory.seq_pos_min(dst.seq) > need:  # llama.cpp kept less than foreseen
            dst.busy = False
            self._clear(dst)
            return None
        self.restored += 1
        if len(saved.tokens) > n and not self._memory.seq_rm(dst.seq, n, -1):
            dst.busy = False
            self._clear(dst)
            return None
        dst.tokens = saved.tokens[:n]
        dst.busy = True
        dst.last_used = next(self._clock)
        return dst

    def _evict(self, e: CachedSeq) -> None:
        """Free ``e``'s cells, first saving its KV to RAM when there is a RAM tier."""
        if self.ram is not None and len(e.tokens) >= self.ram.MIN_TOKENS:
            data = self._memory.seq_save(e.seq)
            if data:
                lowest = self._memory.seq_pos_min(e.seq)
                self.ram.add(SavedSeq(e.tokens, data, lowest, e.last_used))
        self._clear(e)

    def _clear(self, e: CachedSeq) -> None:
        if e.tokens or self._memory.seq_pos_max(e.seq) >= 0:
            self._memory.seq_rm(e.seq, -1, -1)
        e.tokens = []
