"""A slot of the batching scheduler (:mod:`app.engine.scheduler`): one admitted job, its
sequence of the context, its sampler, and where it is (:class:`SlotState`).

A slot reads its prompt (``PROMPT``, a chunk a step), then writes its answer (``GENERATING``, a
token a step, plus drafted ones: :mod:`app.engine.speculation`). When the running answers fill
the context the newest one is ``PAUSED``: its KV is given up and everything it held is read
again once the others leave room. Worker thread only.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.engine.media import MediaPrompt
from app.engine.speculation import Drafter
from app.engine.textstream import StopMatcher, Utf8Stream
from app.engine.types import SamplerLike, Timings

if TYPE_CHECKING:
    from app.engine.reasoning import ThinkingBudget
    from app.engine.worker import Job


class SlotState(enum.Enum):
    """Where a slot is: reading its prompt (a chunk a step), or writing (a token a step)."""

    PROMPT = "prompt"
    GENERATING = "generating"
    PAUSED = "paused"  # gave its KV up when running answers filled the context; reads it again


# Tokens of room beyond a paused answer's own kept for the running ones before it resumes
RESUME_MARGIN = 64


@dataclass(slots=True, eq=False)
class Slot:
    """One admitted job: its sequence, prompt, sampler and what it has produced."""

    job: Job
    seq: int
    sampler: SamplerLike
    prompt: list[int]
    reused: int  # prompt tokens found in the cache
    max_tokens: int
    matcher: StopMatcher
    echo: str = ""  # completions with echo: the prompt text, put before the answer
    tokens: list[int] = field(default_factory=list)  # decoded: the KV the sequence holds
    pending: list[int] = field(default_factory=list)  # prompt tokens still to decode
    last: int = -1  # the sampled token not yet decoded (while generating)
    n_out: int = 0
    chunk: int = 0  # tokens this slot put in the current batch
    i_batch: int = -1  # batch index of its output in the current batch, or -1
    pieces: list[str] = field(default_factory=list)
    utf8: Utf8Stream = field(default_factory=Utf8Stream)
    admitted_at: float = field(default_factory=time.perf_counter)
    first_at: float | None = None
    queued: float = 0.0
    media: MediaPrompt | None = None  # a prompt with images: where they are, their chunks
    state: SlotState = SlotState.PROMPT
    special: bool = False  # control tokens are rendered in the text (ChatRequest.special_tokens)
    progress: bool = False  # its request asked for PromptProgress events
    thinking: ThinkingBudget | None = None  # a limit on the answer's thinking tokens
    forced: list[int] = field(default_factory=list)  # the budget's closing tokens still to feed
    drafter: Drafter | None = None  # speculative decoding (app.engine.speculation)
    draft: list[int] = field(default_factory=list)  # drafted tokens in the current batch
    outputs: list[int] = field(default_factory=list)  # batch indexes of [last, *draft]

    def __post_init__(self) -> None:
        if not self.pending:
            self.state = SlotState.GENERATING

    @property
    def generating(self) -> bool:
        return self.state is SlotState.GENERATING

    def timings(self) -> Timings:
        """How long the job waited, read its prompt and wrote its answer, until now."""
        ended = time.perf_counter()
        start, queued = self.admitted_at, self.queued
        if self.first_at is None:
            return Timings(prompt_seconds=ended - start, queued_seconds=queued)
        prompt_s = self.first_at - start
        gen_s = ended - self.first_at
        evaluated = len(self.prompt) - self.reused
        n = self.n_out
        return Timings(
            time_to_first_token=prompt_s + queued,
            prompt_seconds=prompt_s,
            generation_seconds=gen_s,
            prompt_tokens_per_second=evaluated / prompt_s if prompt_s > 0 else 0.0,
            generation_tokens_per_second=(n - 1) / gen_s if n > 1 and gen_s > 0 else 0.0,
            queued_seconds=queued,
        )

    def pause(self) -> None:
        """Give the sequence's KV up (the caller removes its cells): everything it held, and
        the token it sampled last, are read again when it resumes, and the answer goes on."""
        if self.generating:
            self.pending = [*self.tokens, self.last]
        else:
            self.pending = [*self.tokens, *self.pending]
        self.tokens.clear()  # the same list: a drafter reads it
        self.draft, self.outputs = [], []
        self.state = SlotState.PAUSED

    def read(self, n: int) -> None:
        """``n`` more prompt tokens are in the sequence; all of them: it generates next."""
        self.tokens.extend(self.pending[:n])
        del self.pending[:n]
        if not self.pending:
            self.state = SlotState.GENERATING
