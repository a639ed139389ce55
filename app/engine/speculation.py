"""Speculative decoding inside the batching scheduler: where drafts come from, and how many.

A generating slot's batch entry is normally one token, the one it sampled last. With a draft it
is that token followed by up to ``k`` guessed ones, every one with logits, in the same
``llama_decode`` that serves every other slot. The scheduler then samples output 0 with the
slot's own sampler chain; while the token it samples equals the next drafted one, that drafted
token's KV is already in the sequence and the next output is sampled too. At the first
difference (or the end of the draft) the token sampled is the slot's next one, and the drafted
tokens after it are removed from the sequence (``llama_memory_seq_rm``), so the sequence and the
prefix cache's record of it hold exactly the answer's tokens.

Why the output is exactly the model's, greedy or sampled: drafts here are deterministic (a point
mass ``q`` on the drafted token ``d``). Rejection sampling accepts ``d`` with probability
``min(1, p(d)/q(d)) = p(d)`` and otherwise samples from ``norm(max(0, p - q))``, which is ``p``
without ``d``. Sampling ``t ~ p`` and accepting when ``t == d`` is the same thing: ``d`` with
probability ``p(d)``, else a token from ``p`` conditioned on ``t != d``. So each position is
sampled by the slot's C sampler chain from the logits non-speculative decoding would give it
(the drafted prefix equals the answer's), with the chain's penalty history, random state and
grammar advanced exactly as without drafts (positions past the first difference are never
sampled). Even a fixed seed gives the same text (up to the rounding below). A grammar checks
each token the chain picks, as always, so constrained answers speculate too (a drafted token the
grammar would reject is simply never sampled). That is exact given the logits, as
tests/engine/test_speculation.py proves with the scripted model's exact arithmetic. The logits
themselves are not bit for bit the same: a token decoded in a batch with drafted tokens after it
is computed by llama.cpp's multi-row kernels, which sum in another order than one row alone
(differences up to about 1.0 on the CPU build), so where two tokens nearly tie a greedy answer
can take the other branch and differ from there on: most answers are identical, some branch
(on the test model 7 of 24 with prompt lookup, 4 of 24 with a draft model:
bench/speculative_identity.py). vLLM and
llama-server document the same; batching several answers together does it too. Sampled answers
keep the model's distribution (tests/engine/test_speculation_distribution.py).

Draft sources (:class:`Drafter`):

* **prediction** (OpenAI's ``prediction: {type: "content"}``): the text the answer is expected
  to be (an editor's file before an edit). Drafted from where the answer has followed it so
  far; after a difference, found again by the last :data:`NGRAM` tokens.
* **prompt lookup**: the last :data:`NGRAM` tokens looked up in the prompt and the answer so
  far (their most recent earlier occurrence); the tokens that followed are the draft. Code and
  quoted text repeat; free prose rarely does, and then there is simply no draft.
* **a draft model** (``LoadParams.draft_model``, :mod:`app.engine.draft_model`), instead of
  prompt lookup: a small model with the same vocabulary guesses greedily for every drafting
  slot at once before the step's decode and leaves each slot's guess in ``offered``
  (:meth:`Drafter.wants` says how many tokens to guess). Greedy guesses are point masses too.

Adaptive: a prompt-lookup or draft-model draft's length doubles while whole drafts are accepted
and falls to what was accepted otherwise (a prediction, which the answer follows but at its
edits, is drafted at full length); drafts that are rejected outright make the slot stop
drafting for a number of steps that doubles each time (up to :data:`MAX_BACKOFF`), so free
chat pays for at most an occasional one-token guess, and so does a prediction the answer does
not follow.

Pure Python, worker thread only; no llama.cpp calls here.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

NGRAM = 3  # tokens matched to find a draft
LOOKUP_START = 4  # first draft length from prompt lookup
MIN_DRAFT = 1
CANDIDATES = 16  # recent occurrences of an n-gram compared by what precedes them
LOOKBACK = 16  # tokens before an occurrence compared
MAX_BACKOFF = 64  # most steps without drafting after drafts rejected outright
MAX_INDEXED = 16384  # most recent prompt tokens indexed for lookup (bounds the work at admission)
# Most drafted tokens in one batch, over all slots: each is an output row of logits, which
# llama.cpp reserves in its compute buffer (n_vocab floats a row: 1 MiB for Gemma 3)
MAX_DRAFT_ROWS = 32


def draft_rows(n_parallel: int, draft_max: int) -> int:
    """How many drafted tokens one batch may hold (the context reserves rows for them)."""
    return max(0, min(n_parallel * draft_max, MAX_DRAFT_ROWS))


class NgramIndex:
    """Where each :data:`NGRAM`-gram of ``tokens`` occurred with a token after it.

    ``tokens`` is read, never copied: the list may grow (the answer's tokens are appended to
    it) and the index catches up on the next lookup. Each token is indexed once."""

    def __init__(self, tokens: Sequence[int], start: int = 0) -> None:
        self.tokens = tokens
        self._ends: dict[tuple[int, ...], list[int]] = {}
        self._next = max(start, 0) + NGRAM  # the next end position to index

    def _catch_up(self) -> None:
        tokens, ends = self.tokens, self._ends
        last = len(tokens) - 1  # ends up to here have a token after them
        for end in range(self._next, last + 1):
            key = tuple(tokens[end - NGRAM : end])
            found = ends.get(key)
            if found is None:
                ends[key] = [end]
            else:
                found.append(end)
        self._next = max(self._next, last + 1)

    def find(self, tail: tuple[int, ...], after: int | None = None) -> int:
        """Where the token after ``tail`` is: its most recent occurrence, or with ``after`` the
        first one from there on (else the most recent); -1 when ``tail`` never occurred."""
        self._catch_up()
        found = self._ends.get(tail)
        if not found:
            return -1
        if after is not None:
            i = bisect.bisect_left(found, after)
            if i < len(found):
                return found[i]
        return found[-1]

    def find_best(self, tail: tuple[int, ...], before: Sequence[int]) -> int:
        """Like :meth:`find`, but of the recent occurrences of ``tail`` the one whose preceding
        tokens match ``before`` (what precedes ``tail`` now) longest: in repetitive text (code)
        the most recent occurrence is often the wrong one."""
        self._catch_up()
        found = self._ends.get(tail)
        if not found:
            return -1
        tokens, n = self.tokens, len(before)
        best, best_len = found[-1], -1
        for end in reversed(found[-CANDIDATES:]):
            start = end - NGRAM  # compare backwards from the token before the occurrence
            same = 0
            while same < LOOKBACK and same < start and same < n:
                if tokens[start - 1 - same] != before[n - 1 - same]:
                    break
                same += 1
            if same > best_len:
                best, best_len = end, same
                if same == LOOKBACK:
                    break
        return best


class Drafter:
    """The drafts of one slot: from its ``prediction`` (token ids) if any, else prompt lookup
    over ``tokens`` (the slot's list: prompt, then the answer as it is decoded)."""

    def __init__(
        self,
        tokens: list[int],
        answer_start: int,
        draft_max: int,
        prediction: list[int] | None = None,
        *,
        model: bool = False,
    ) -> None:
        self.tokens = tokens
        self.draft_max = max(0, draft_max)
        self.prediction = prediction or []
        start = answer_start - MAX_INDEXED
        # a draft model (``model``) replaces prompt lookup
        self._lookup = NgramIndex(tokens, start) if not model and self.draft_max else None
        self._predicted = NgramIndex(self.prediction) if self.prediction else None
        self._sync = 0 if self.prediction else -1  # where the answer follows the prediction
        self._mark = 0  # the prediction's position after the last token the answer followed
        self._seen = answer_start  # tokens of the answer already compared with the prediction
        self.k = self.draft_max if self.prediction else min(LOOKUP_START, self.draft_max)
        self._skip = 0
        self._backoff = 1
        self.model = model and self.draft_max > 0  # a draft model drafts (not prompt lookup)
        self.offered: list[int] | None = None  # the draft model's guess for this step
        self.drafted = 0  # tokens drafted, counted by the scheduler
        self.accepted = 0  # of which the answer took

    def wants(self, last: int, room: int) -> int:
        """With a draft model: how many tokens to ask it for this step (0: none, while paused
        or while the prediction drafts)."""
        if not self.model or room <= 0:
            return 0
        self._follow(last)
        if self._skip > 0 or self._predicted_guess(last, room):
            return 0
        return min(self.k, room)

    def draft(self, last: int, room: int) -> list[int]:
        """Up to ``room`` tokens guessed to follow ``tokens`` then ``last`` (the token about to
        be decoded)."""
        self._follow(last)
        offered, self.offered = self.offered, None
        if self._skip > 0:
            self._skip -= 1
            return []
        k = min(self.k, room)
        if k <= 0:
            return []
        guess = self._predicted_guess(last, room)
        if guess:
            return guess
        if offered:
            return offered[:k]
        tail = self._tail(last)
        if self._lookup is None or tail is None:
            return []
        end = self._lookup.find_best(tail, self.tokens[-NGRAM - LOOKBACK + 1 : -NGRAM + 1])
        return self.tokens[end : end + k] if end >= 0 else []

    def _tail(self, last: int) -> tuple[int, ...] | None:
        tail = (*self.tokens[len(self.tokens) - NGRAM + 1 :], last)
        return tail if len(tail) >= NGRAM else None

    def _predicted_guess(self, last: int, room: int) -> list[int]:
        """The prediction from where the answer follows it (found again by the last
        :data:`NGRAM` tokens after a difference), at full length; [] when it does not."""
        if self._predicted is None or room <= 0:
            return []
        if self._sync < 0:
            tail = self._tail(last)
            if tail is None:
                return []
            self._sync = self._predicted.find(tail, self._mark)
        if self._sync < 0:
            return []
        return self.prediction[self._sync : self._sync + min(self.draft_max, room)]

    def _follow(self, last: int) -> None:
        """Move the prediction's pointer over the answer's tokens decoded since last time."""
        if self._predicted is None:
            return
        tokens, pred = self.tokens, self.prediction
        for i in range(self._seen, len(tokens) + 1):
            token = tokens[i] if i < len(tokens) else last
            if self._sync >= 0:
                if self._sync < len(pred) and pred[self._sync] == token:
                    self._sync += 1
                    self._mark = self._sync
                else:
                    self._sync = -1
        self._seen = len(tokens) + 1

    def adapt(self, drafted: int, accepted: int) -> None:
        """How the last draft went (the caller counts ``drafted`` and ``accepted``): the next
        draft's length, and whether to pause drafting."""
        if drafted <= 0:
            return
        if accepted == drafted:
            self.k = min(self.k * 2, self.draft_max)
            self._backoff = 1
        elif accepted > 0:
            self.k = max(MIN_DRAFT, min(accepted * 2, self.draft_max))
            self._backoff = 1
        else:
            self.k = MIN_DRAFT
            self._skip = self._backoff
            self._backoff = min(self._backoff * 2, MAX_BACKOFF)
