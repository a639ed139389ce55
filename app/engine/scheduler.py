"""Continuous batching: many answers decoded together from one llama.cpp context.

A :class:`Scheduler` serves one loaded model. Each admitted job gets a :class:`Slot` with its own
sequence of the context (from the :class:`~app.engine.prefix_cache.PrefixCache`, so any cached
prefix of its prompt is reused) and its own sampler chain. Each :meth:`Scheduler.step` builds one
batch: one token for every generating slot, then prompt tokens of the slots still reading their
prompt, oldest first, up to ``n_batch`` in all (chunked prefill: a newcomer's long prompt delays
the others by at most one chunk a step), decodes it once, and samples every slot that has an
output. A finished or cancelled slot frees its sequence at once; its tokens stay cached.
A chat with images (:mod:`app.engine.media`) reads its text runs the same way; each image is
a step of its own: encoded by the projector, then its embeddings decoded alone.
A generating slot's entry may carry drafted tokens after its own (:mod:`app.engine.speculation`),
verified by its sampler after the decode; the rejected ones leave its sequence. When the running
answers fill the context, the newest is paused (:class:`~app.engine.slots.SlotState`): its cells
are freed and it reads what it held again once the others leave room; only an answer alone in
the context ends as "length" for want of room.

Pure Python over :class:`~app.engine.types.Model`; runs on the engine worker thread only. The
worker (:mod:`app.engine.worker`) admits jobs and delivers events; the job contract is unchanged.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.engine.draft_model import DraftSource, offer_drafts
from app.engine.media import ImageItem, MediaPrompt, chat_media, decode_image
from app.engine.prefix_cache import PrefixCache
from app.engine.prompt_prep import INLINE_CHARS, Prepared, PromptPrep, prepare, prompt_chars
from app.engine.reasoning import ThinkingBudget
from app.engine.slots import RESUME_MARGIN, Slot, SlotState
from app.engine.speculation import Drafter, draft_rows
from app.engine.textstream import StopMatcher
from app.engine.types import (
    ChatRequest,
    CompletionRequest,
    ContextOverflowError,
    Delta,
    EngineCrashedError,
    EngineError,
    Failed,
    FinalEvent,
    Finished,
    FinishReason,
    Model,
    PromptProgress,
    Started,
    Timings,
    Usage,
)

if TYPE_CHECKING:
    from app.engine.worker import Job

log = logging.getLogger(__name__)

NO_ROOM = 1  # llama_decode: no KV cells for the batch
ABORTED = 2  # llama_decode: the abort callback fired


class Scheduler:
    """The slots of one model. ``finish`` delivers a job's final event (the worker's); ``wake``
    is called from another thread when a long prompt is ready (see :meth:`admit`)."""

    def __init__(
        self,
        model: Model,
        finish: Callable[[Job, FinalEvent], None],
        draft_max: int = 0,
        drafts: DraftSource | None = None,
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        self.model = model
        self.draft_max = draft_max  # most drafted tokens per slot and step (0: no speculation)
        self.drafts = drafts  # a draft model (app.engine.draft_model), else prompt lookup
        self.cache = PrefixCache(
            model, model.n_seq, model.n_swa, model.cache_ram, make_room=self._keep_room
        )
        self.slots: list[Slot] = []  # in admission order
        self._finish_job = finish
        self._inflight: list[Slot] = []
        self._lock = threading.Lock()  # guards _inflight against cancels from other threads
        self._capacity = model.n_ctx  # tokens the running answers held when the cache was full
        self._prep = PromptPrep(model, wake, predictions=draft_max > 0)  # long prompts

    # -- admission ----------------------------------------------------------------------------

    def has_room(self, pending: int = 0) -> bool:
        """Whether a job can start besides the ``pending`` ones about to be admitted."""
        return len(self.slots) + len(self._prep) + pending < self.model.n_parallel

    @property
    def idle(self) -> bool:
        return not self.slots and not self._prep

    def admit(self, job: Job) -> None:
        """Start ``job`` (a chat or completion on this model): a short prompt is rendered and
        tokenized here; a long one off this thread (:mod:`app.engine.prompt_prep`), while the
        job holds a slot, which opens at the first step after that. A request error finishes
        the job then."""
        job.emit(Started(job.id))
        queued = time.perf_counter() - job.submitted_at
        if prompt_chars(job.request) <= INLINE_CHARS:
            self._open(prepare(self.model, job, self.draft_max > 0), queued)
            return
        self._prep.submit(job, queued)

    @property
    def has_work(self) -> bool:
        """Whether :meth:`step` has anything to do now (else the worker may sleep until it is
        woken: a prompt prepared, a job cancelled, a new job)."""
        return bool(self.slots) or self._prep.has_news

    def _open(self, prepared: Prepared, queued: float) -> None:
        job = prepared.job
        try:
            if prepared.error is not None:
                raise prepared.error
            slot = self._new_slot(prepared, queued)
        except EngineError as e:
            error = e
        except Exception as e:  # a bug must not kill the worker
            log.exception("Starting %s failed unexpectedly", job.id)
            error = EngineCrashedError(f"The engine failed: {e}")
        else:
            if slot.echo:
                job.emit(Delta(job.id, slot.echo, 0))
            self.slots.append(slot)
            return
        self._end_unopened(job, queued, error)

    def _end_unopened(self, job: Job, queued: float, error: EngineError | None = None) -> None:
        """End a job whose slot never opened: cancelled, or failed with ``error``."""
        t = Timings(queued_seconds=queued)
        final = (
            Failed(job.id, error, timings=t) if error else Finished(job.id, "cancelled", timings=t)
        )
        self._finish_job(job, final)

    def _new_slot(self, prepared: Prepared, queued: float) -> Slot:
        r = prepared.job.request
        media: MediaPrompt | None = None
        thinking: ThinkingBudget | None = None
        prompt = prepared.prompt
        if isinstance(r, ChatRequest):
            # a grammar from the first token leaves no room for a fed closing text
            eager_grammar = (r.sampling.grammar or r.sampling.json_schema is not None) and (
                not r.sampling.grammar_triggers
            )
            if prepared.thinking is not None and not eager_grammar:
                thinking = ThinkingBudget(prepared.thinking)
            if r.images:  # tokenized with the projector, which the engine thread owns
                media = chat_media(self.model, prepared.text, r.images)
                prompt = media.tokens
        try:
            slot = self._slot_for(prepared, queued, prompt, media=media)
            slot.thinking = thinking
            return slot
        except BaseException:
            if media is not None:
                media.close()
            raise

    def _slot_for(
        self, prepared: Prepared, queued: float, prompt: list[int], media: MediaPrompt | None
    ) -> Slot:
        job = prepared.job
        r = job.request
        assert isinstance(r, ChatRequest | CompletionRequest)
        model = self.model
        if len(prompt) >= model.n_ctx:
            raise ContextOverflowError(
                f"The prompt is {len(prompt)} tokens but the model was loaded with a context of "
                f"{model.n_ctx}. Shorten the conversation or load the model with a larger context."
            )
        s = r.sampling
        seed = s.seed if s.seed is not None else random.randint(0, 2**31 - 1)
        sampler = model.new_sampler(s, seed)
        try:
            seq, reused = self.cache.acquire(prompt, media.round_down if media else None)
        except BaseException:
            sampler.close()
            raise
        room = model.n_ctx - len(prompt)
        slot = Slot(
            job=job,
            seq=seq,
            sampler=sampler,
            prompt=prompt,
            reused=reused,
            max_tokens=min(s.max_tokens or room, room),
            matcher=StopMatcher((*s.stop, *prepared.stops)),
            echo=prepared.echo,
            tokens=prompt[:reused],
            pending=prompt[reused:],
            queued=queued,
            media=media,
            special=bool(getattr(r, "special_tokens", False)),
            progress=isinstance(r, ChatRequest) and r.prompt_progress,
        )
        if self.draft_max > 0:
            by_model = self.drafts is not None  # a draft model, else prompt lookup
            predicted = prepared.predicted
            slot.drafter = Drafter(
                slot.tokens, len(prompt), self.draft_max, predicted, model=by_model
            )
        return slot

    # -- cancelling ---------------------------------------------------------------------------

    def on_cancel(self, job: Job) -> None:
        """From any thread: abort the decode in flight if it only serves cancelled jobs (a
        cancel otherwise takes effect at the next step, without disturbing the others)."""
        with self._lock:
            if self._inflight and all(s.job.cancelled.is_set() for s in self._inflight):
                self.model.abort.set()

    # -- one step -----------------------------------------------------------------------------

    def step(self) -> None:
        """Decode one batch for every active slot and emit what it produced."""
        if self._prep:  # long prompts prepared off this thread, or cancelled meanwhile
            for job, queued in self._prep.take_cancelled():
                self._end_unopened(job, queued)
            for prepared, queued in self._prep.take():
                self._open(prepared, queued)
        for slot in [s for s in self.slots if s.job.cancelled.is_set()]:
            self._end(slot, "cancelled")
        if not self.slots:
            return
        self._resume()
        for slot in self.slots:
            if slot.media is not None and slot.pending:
                image = slot.media.image_at(len(slot.tokens))
                if image is not None:
                    self._image_step(slot, image)  # a decode of its own (see app.engine.media)
                    return
        batch = self.model.batch
        batch.clear()
        budget = self.model.n_batch
        used: list[Slot] = []
        spare = min(  # for drafts
            budget - sum(1 for s in self.slots if s.generating),
            draft_rows(self.model.n_parallel, self.draft_max),
        )
        if self.drafts is not None:
            offer_drafts(self.drafts, self.slots, spare, self.model.n_ctx)
        for slot in self.slots:
            slot.chunk, slot.i_batch = 0, -1
            if slot.generating:
                slot.i_batch = batch.add(slot.seq, [slot.last], len(slot.tokens), True)
                slot.chunk = 1
                if slot.drafter is not None:
                    spare -= self._add_draft(slot, spare)
                budget -= slot.chunk
                used.append(slot)
        for slot in self.slots:
            if budget <= 0:
                break
            if slot.generating or slot.state is SlotState.PAUSED:
                continue
            run = budget
            if slot.media is not None:  # text up to the next image, which waits for its step
                run = slot.media.text_run(len(slot.tokens), min(budget, len(slot.pending)))
                if run <= 0:
                    continue
            chunk = slot.pending[:run]
            done = len(chunk) == len(slot.pending)
            index = batch.add(slot.seq, chunk, len(slot.tokens), done)
            slot.i_batch = index if done else -1
            slot.chunk = len(chunk)
            budget -= len(chunk)
            used.append(slot)
        if not used:
            return  # every answer is paused (none resumable: the next step tries again)
        self._keep_room(sum(s.chunk for s in used))
        if not self._decode(used, self.model.decode):
            return
        now = time.perf_counter()
        for slot in used:
            if slot.generating:
                slot.tokens.append(slot.last)
                if slot.draft:
                    self._verify(slot, now)
                    continue
            else:
                slot.read(slot.chunk)
                if slot.pending and slot.progress:  # how far a long prompt has been read
                    read = len(slot.tokens)
                    slot.job.emit(PromptProgress(slot.job.id, read, read + len(slot.pending)))
            if slot.i_batch >= 0:
                self._sample(slot, now)

    # -- speculative decoding (app.engine.speculation) ------------------------------------

    def _add_draft(self, slot: Slot, spare: int) -> int:
        """Put ``slot``'s draft, if it has one, in the batch after its last token; returns
        how many tokens it drafted. Never past its ``max_tokens`` or the context."""
        assert slot.drafter is not None
        pos = len(slot.tokens) + 1
        room = min(spare, slot.max_tokens - slot.n_out - 1, self.model.n_ctx - 1 - pos)
        draft = slot.drafter.draft(slot.last, room) if room > 0 else []
        slot.draft = draft
        if not draft:
            slot.outputs = []
            return 0
        batch = self.model.batch
        slot.outputs = [slot.i_batch]
        for i, token in enumerate(draft):
            slot.outputs.append(batch.add(slot.seq, [token], pos + i, True))
        slot.chunk += len(draft)
        return len(draft)

    def _verify(self, slot: Slot, now: float) -> None:
        """Sample ``slot``'s outputs in order with its own sampler while each sampled token is
        the drafted one (whose KV is then already in the sequence); the drafted tokens after
        the first difference leave the sequence. Exact for greedy and sampled answers alike
        (see app.engine.speculation)."""
        drafter = slot.drafter
        assert drafter is not None
        draft, outputs = slot.draft, slot.outputs
        drafter.drafted += len(draft)
        accepted = 0
        for j, index in enumerate(outputs):
            slot.i_batch = index
            token = self._sample(slot, now)
            if token is None:  # ended (its sequence already cut back to its tokens)
                break
            if j < len(draft) and token == draft[j]:
                slot.tokens.append(token)  # decoded in this batch, as the draft
                accepted += 1
                drafter.accepted += 1
            else:
                break
        drafter.adapt(len(draft), accepted)
        slot.draft, slot.outputs = [], []
        if slot in self.slots and accepted < len(draft):
            self.model.seq_rm(slot.seq, len(slot.tokens), -1)

    def _decode(self, used: list[Slot], decode: Callable[[], int]) -> bool:
        """Run one ``decode`` (of the batch, or of an image's embeddings) for the ``used``
        slots, abortable by their cancels; False when it failed (and was dealt with)."""
        with self._lock:
            self._inflight = used
            if all(s.job.cancelled.is_set() for s in used):
                return False  # every one was cancelled since the step began: next step ends them
        try:
            code = decode()
        except EngineError as e:  # the request's fault (an image): that slot ends, no harm
            for slot in used:
                self.model.seq_rm(slot.seq, len(slot.tokens), -1)
                self._end(slot, "error", error=e)
            return False
        except Exception as e:  # a native failure must not kill the worker
            log.exception("Decoding failed")
            self._after_failed_decode(-1, used, EngineCrashedError(f"The engine failed: {e}"))
            return False
        finally:
            with self._lock:
                self._inflight = []
            self.model.abort.clear()
        if code != 0:
            self._after_failed_decode(code, used)
            return False
        return True

    def _image_step(self, slot: Slot, image: ImageItem) -> None:
        """Encode ``slot``'s next image and decode its embeddings into its sequence."""
        assert slot.media is not None
        try:
            embeddings = slot.media.encode(image)  # cannot be aborted: cancels checked around it
        except EngineError as e:
            self._end(slot, "error", error=e)
            return
        except Exception as e:  # a native failure must not kill the worker
            log.exception("Encoding an image failed")
            self._end(slot, "error", error=EngineCrashedError(f"The engine failed: {e}"))
            return
        if slot.job.cancelled.is_set():
            self._end(slot, "cancelled")
            return
        self._keep_room(image.n_pos)
        slot.chunk = image.n_pos
        last = -1

        def decode() -> int:
            nonlocal last
            code, last = decode_image(
                self.model.ctx,
                embeddings,
                len(slot.tokens),
                slot.seq,
                non_causal=image.non_causal,
                n_batch=self.model.n_batch,
            )
            return code

        if not self._decode([slot], decode):
            return
        slot.read(image.n_pos)
        if slot.generating:  # the prompt ends with the image: its last row has the logits
            slot.i_batch = last
            self._sample(slot, time.perf_counter())

    def _keep_room(self, n_new: int) -> None:
        """Evict idle conversations, least recently used first, before the batch could fill
        the KV cache. (llama.cpp would otherwise, for models with sliding-window layers, reuse
        cells that idle sequences still need for their prefixes, rather than report no room.)
        Shared prefixes are counted once per sequence, so this errs on the side of room."""
        running = sum(len(s.tokens) for s in self.slots)
        while running + self.cache.cached_tokens() + n_new > self.model.n_ctx:
            if not self.cache.evict_one():
                return

    def _next_token(self, slot: Slot) -> tuple[int, bool]:
        """The slot's next token, and whether it was fed rather than sampled: once the
        thinking budget is spent, the tokens that close the thinking, one a step, as if the
        model had written them; else the sampler's choice."""
        budget = slot.thinking
        if budget is not None and budget.spent:
            budget.closed()
            slot.forced = self.model.tokenize(budget.close, add_special=False)
        if slot.forced:
            return slot.forced.pop(0), True
        return slot.sampler.sample(self.model.ctx, slot.i_batch), False

    def _sample(self, slot: Slot, now: float) -> int | None:
        """Sample ``slot``'s output ``i_batch`` and emit it; the token when the answer goes on
        (it is ``slot.last`` then), None when it ended."""
        model = self.model
        try:
            token, fed = self._next_token(slot)
        except EngineError as e:
            self._end(slot, "error", error=e)
            return None
        except Exception as e:
            log.exception("Sampling failed")
            self._end(slot, "error", error=EngineCrashedError(f"The engine failed: {e}"))
            return None
        if slot.first_at is None:
            slot.first_at = now
        if model.is_eog(token) and not fed:  # harmony's close has <|end|> in it
            self._end(slot, "stop")
            return None
        if slot.thinking is not None:
            slot.thinking.feed(model.piece(token, special=True))
        slot.n_out += 1
        text = slot.matcher.feed(slot.utf8.feed(model.piece(token, slot.special)))
        if text:
            slot.pieces.append(text)
            slot.job.emit(Delta(slot.job.id, text, 1))
        if slot.matcher.stopped:
            self._end(slot, "stop")
        elif slot.n_out >= slot.max_tokens:
            self._end(slot, "length")
        else:
            slot.last = token
            return token
        return None

    def _after_failed_decode(
        self, code: int, used: list[Slot], error: EngineError | None = None
    ) -> None:
        # llama.cpp has removed the failed ubatch's cells; earlier ubatches of the batch stay.
        # Cut every sequence of the batch back to what the slot knows it holds.
        for slot in used:
            self.model.seq_rm(slot.seq, len(slot.tokens), -1)
        if code == ABORTED:
            return  # the cancelled slots end at the next step; others decode again
        if code == NO_ROOM:
            if self.cache.evict_one():
                return  # try again with the cells of an idle conversation
            self._make_room(used)
            return
        error = error or EngineCrashedError(f"llama.cpp failed to decode (code {code}).")
        for slot in used:
            self._end(slot, "error", error=error)

    def _make_room(self, used: list[Slot]) -> None:
        """The KV cache is full of running sequences: pause the newest one (preemption, as
        vLLM does): its cells are freed, and it reads what it held again once the others have
        left room (:meth:`_resume`), so no answer ends as "length" for sharing the context. A
        lone answer cannot be paused for room: reading its prompt it fails with a context
        error, else it stops as too long (so does a chat with images, which cannot be read
        again from its tokens)."""
        victim = used[-1]
        active = [s for s in self.slots if s.state is not SlotState.PAUSED]
        if len(active) > 1 and victim.media is None:
            self._capacity = min(self._capacity, sum(len(s.tokens) for s in active))
            self.model.seq_rm(victim.seq)
            victim.pause()
            log.info("Paused %s: the running answers filled the context", victim.job.id)
            return
        if not victim.first_at:
            error = ContextOverflowError(
                f"The context ({self.model.n_ctx} tokens) is full: the answers being written "
                "share it. Try again when they finish, or load the model with a larger context "
                "or fewer parallel answers."
            )
            self._end(victim, "error", error=error)
        else:
            self._end(victim, "length")

    def _resume(self) -> None:
        """Paused answers, oldest first, go on reading once the running ones leave room."""
        held = sum(
            len(s.tokens) + len(s.pending) for s in self.slots if s.state is not SlotState.PAUSED
        )
        for slot in self.slots:
            if slot.state is not SlotState.PAUSED:
                continue
            need = len(slot.pending)
            if held and held + need + RESUME_MARGIN > self._capacity:
                return
            slot.state = SlotState.PROMPT
            held += need
            log.info("Resumed %s", slot.job.id)

    # -- ending ---------------------------------------------------------------------------

    def _end(self, slot: Slot, reason: FinishReason, error: EngineError | None = None) -> None:
        self.slots.remove(slot)
        if self.drafts is not None:
            self.drafts.forget(slot.job.id)
        if slot.draft:  # ended while verifying: drafted tokens past its end leave the sequence
            self.model.seq_rm(slot.seq, len(slot.tokens), -1)
            slot.draft = []
        slot.sampler.close()
        if slot.media is not None:
            slot.media.close()
        self.cache.release(slot.seq, slot.tokens)
        if reason not in {"stop", "error"}:
            tail = slot.matcher.feed(slot.utf8.flush()) + slot.matcher.flush()
            if tail:
                slot.pieces.append(tail)
                slot.job.emit(Delta(slot.job.id, tail, 0))
        job = slot.job
        drafter = slot.drafter
        usage = Usage(
            len(slot.prompt),
            slot.n_out,
            cached_tokens=slot.reused,
            drafted_tokens=drafter.drafted if drafter else 0,
            accepted_tokens=drafter.accepted if drafter else 0,
            predicted=bool(drafter and drafter.prediction),
        )
        timings = slot.timings()
        if error is not None:
            self._finish_job(job, Failed(job.id, error, usage, timings))
            return
        text = "".join(slot.pieces)
        stopped_by = slot.matcher.stop_string if reason == "stop" else None
        final = Finished(job.id, reason, usage, timings, slot.echo + text, stopped_by)
        self._finish_job(job, final)

    def cancel_all(self) -> None:
        for job, queued in self._prep.drain():  # before the model can be freed
            job.cancelled.set()
            self._end_unopened(job, queued)
        for slot in list(self.slots):
            slot.job.cancelled.set()
            self._end(slot, "cancelled")

    def fail_all(self, error: EngineError) -> None:
        """End every slot with ``error`` (after a failure the scheduler cannot place)."""
        for job, queued in self._prep.drain():
            self._end_unopened(job, queued, error)
        for slot in list(self.slots):
            self.slots.remove(slot)
            if self.drafts is not None:
                self.drafts.forget(slot.job.id)
            with contextlib.suppress(Exception):
                slot.sampler.close()
            if slot.media is not None:
                with contextlib.suppress(Exception):
                    slot.media.close()
            self.cache.drop(slot.seq)
            self.model.seq_rm(slot.seq)
            job = slot.job
            self._finish_job(job, Failed(job.id, error, timings=slot.timings()))


def describe_slots(scheduler: Scheduler) -> list[dict[str, Any]]:
    """What each slot is doing (for logs and tests)."""
    return [
        {
            "job": s.job.id,
            "seq": s.seq,
            "state": s.state.value,
            "prompt": len(s.prompt),
            "pending": len(s.pending),
        }
        for s in scheduler.slots
    ]
