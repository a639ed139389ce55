"""Answers being written: at most one per conversation, any number of conversations at once.

``AnswerRunner`` starts an answer (a "streaming" message in the store), waits for its model if
that is still loading, fits the history into the context, submits the chat job, collects the
streamed text, and finishes the message as complete / stopped / error with the engine's stats.
It does not know which chat is on screen: the ConversationController shows what concerns the
open one. Each answer has its own job, so stopping one never stops another; how many generate
together is the engine's business ("Parallel answers").

Persistence: every ``SAVE_INTERVAL_MS`` the text streamed since the last save is appended to
the message, and the stats so far (measured here: tokens, time to first token, tok/s) are kept
in the conversation's settings blob (chat_record.py). So closing or killing the app loses at
most the last half second of an answer, and an interrupted answer still shows its stats.

Attached files: when the history holds questions with files, their text (whole, or the
passages relevant to the question) is prepared on a worker thread (attached_prompt.py) before
the history is fitted; the answer records its sources. Meanwhile its message says how far the
question's long files are indexed and embedded ("Reading report.pdf… 40%"); Stop stops that
at its next step (the engine's embedding job is cancelled).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.chats.models import ChatStoreError, Message, Status
from app.chats.store import ChatStore
from app.engine.fitting import (
    PER_MESSAGE_OVERHEAD,
    PROMPT_OVERHEAD,
    Turn,
    answer_room,
    estimate_tokens,
    plan_context,
)
from app.engine.provider_ids import is_remote_id
from app.engine.types import (
    ChatMessage,
    ChatRequest,
    ContextOverflowError,
    EngineCrashedError,
    EngineError,
    Failed,
    Finished,
    LoadedModel,
    SamplingParams,
)
from app.ui.bridge import JobHandle
from app.ui.chat.attached_prompt import (
    IMAGE_TOKENS,
    AttachedPrompt,
    ReadingProgress,
    documents_of,
    needs_preparing,
    prepared_prompt_with,
)
from app.ui.chat.attaching import StopFlag
from app.ui.chat.chat_images import cannot_read_images, remote_content
from app.ui.chat.chat_record import answer_stats, save_partial_stats
from app.ui.chat.context import TokenCounter
from app.ui.chat.thinking import closed_in, thought_seconds
from app.ui.chat.tool_answers import ToolAnswers
from app.ui.chat.tool_turn import CommandRequest, ToolSetup, ToolTurn
from app.ui.chat.waiting_label import THINKING, reading_text
from app.ui.engine_session import EngineSession, model_name
from app.ui.relay import Relay
from app.ui.task_runner import Task, tasks

if TYPE_CHECKING:
    from app.attachments.embedder import Embedders
    from app.config import Settings

log = logging.getLogger(__name__)

SAVE_INTERVAL_MS = 500
# Tokens of attached files for a remote model (whose context length Ember does not know):
# as much as a small local context, so most providers' models take it.
REMOTE_ATTACHED_BUDGET = 12_000
NO_MODEL_TEXT = "No model is loaded. Pick one from the model menu at the top, or open a GGUF file."
TOOLS_NO_IMAGES = (
    "images are not sent while the chat's tools are on; turn the tools off to send them."
)


@dataclass(slots=True)
class Answer:
    """One answer being written, and what it was asked with (fixed when it started)."""

    conversation_id: str
    message_id: str
    model_path: str
    model: str
    history: list[Message]
    system_prompt: str
    sampling: SamplingParams
    handle: JobHandle | None = None
    text: str = ""
    unsaved: list[str] = field(default_factory=list)
    tokens: int = 0
    prompt_tokens: int = 0
    dropped: int = 0
    n_ctx: int = 0
    waiting_for_model: bool = False
    submitted_at: float | None = None
    first_delta_at: float | None = None
    first_delta_tokens: int = 0
    last_delta_at: float | None = None
    saved_stats_tokens: int = 0  # ``tokens`` when the stats so far were last saved
    tools: ToolSetup | None = None  # the chat's tools, when it has some
    turn: ToolTurn | None = None  # the tool loop writing this answer
    attached: AttachedPrompt | None = None  # the attached files' text, once prepared
    preparing: StopFlag | None = None  # set to stop preparing it
    prepared: Task | None = None  # the task preparing it
    waiting: str = THINKING  # what its message says until its text comes (waiting_label.py)
    starting: tuple[str, ...] = ()  # the chat's MCP servers being connected to
    reasoning_effort: str | None = None  # the chat's thinking control (thinking.py)
    thought_for: float | None = None  # seconds from its first token to its "</think>"
    reading: int | None = None  # percent of its long prompt read, until its first token

    @property
    def remote(self) -> bool:
        return is_remote_id(self.model_path)

    def activity(self) -> tuple[str, str]:
        """What it does now, for the status bar: ``("approval", NAME)`` a tool call (NAME:
        the tool) or a server's command line (NAME: ``"the NAME server"``) waits for the
        person's yes; ``("tool", NAME)`` a call runs; ``("loading", "")`` it waits for its
        model to load; ``("starting", NAMES)`` the chat's MCP servers connect;
        ``("generating", "40%")`` the model reads a long prompt; ``("generating", "")``
        anything else (the model reads or writes, its files are read)."""
        turn = self.turn
        if turn is not None and turn.pending is not None:
            call = turn.pending
            if isinstance(call, CommandRequest):
                return "approval", f"the {call.server.name} server"
            return "approval", call.tool or call.name
        if turn is not None and turn.running_call is not None:
            return "tool", turn.running_call.tool or turn.running_call.name
        if self.waiting_for_model:
            return "loading", ""
        if self.starting:
            return "starting", ", ".join(self.starting)
        return "generating", f"{self.reading}%" if self.reading is not None else ""

    def stats_so_far(self) -> dict[str, Any]:
        """What was produced so far, measured on the GUI thread (the engine's own timings
        arrive only with the final event)."""
        stats: dict[str, Any] = {"tokens": self.tokens, "prompt_tokens": self.prompt_tokens}
        first, last = self.first_delta_at, self.last_delta_at
        if self.submitted_at is not None and first is not None:
            stats["ttft"] = round(first - self.submitted_at, 4)
        if first is not None and last is not None and last > first:
            stats["tps"] = round((self.tokens - self.first_delta_tokens) / (last - first), 2)
            stats["generation_seconds"] = round(last - first, 3)
        return stats


class AnswerRunner(QObject):
    """See the module docstring. GUI thread only.

    Signals: ``text_added(str conversation_id, str message_id, str text)``;
    ``context_notice(str conversation_id, str message_id, int dropped, int n_ctx)`` when older
    turns were left out; ``finished(str conversation_id, Message | None)`` once an answer is
    finished and saved (None: saving it failed); ``problem(str kind, str text)`` when the
    engine itself broke; ``waiting_changed(str conversation_id, str message_id, str text)``
    what the answer's message says until its text comes (``Answer.waiting``);
    ``activity_changed()`` when an answer starts or ends, or what one does changes
    (``Answer.activity``: a tool call waits for the person's yes, runs, is done).
    """

    text_added = Signal(str, str, str)
    context_notice = Signal(str, str, int, int)
    finished = Signal(str, object)
    problem = Signal(str, str)
    message_saved = Signal(str, object, bool)
    approval_requested = Signal(str, object)
    call_running = Signal(str, object)
    call_finished = Signal(str, object)
    waiting_changed = Signal(str, str, str)
    activity_changed = Signal()

    def __init__(
        self,
        store: ChatStore,
        engine: EngineSession,
        counter: TokenCounter,
        parent: QObject | None = None,
        *,
        settings: Settings | None = None,
        embedders: Embedders | None = None,
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.engine = engine
        self.counter = counter
        # what long attached files are searched with besides BM25 (Settings → Chat); the
        # choice is read per question, the embedder made on the task's thread
        self.settings = settings
        self.embedders = embedders
        self._answers: dict[str, Answer] = {}  # conversation id -> its answer
        self._save_timer = QTimer(self)
        self._save_timer.setInterval(SAVE_INTERVAL_MS)
        self._save_timer.timeout.connect(self.save_all)
        self._reading = Relay(self._on_reading, self)  # attached files' progress (a task's)
        self.tools = ToolAnswers(self)
        engine.model_loaded.connect(self._on_model_loaded)
        engine.load_failed.connect(self._on_model_load_failed)

    # -- queries --------------------------------------------------------------------------

    def get(self, conversation_id: str | None) -> Answer | None:
        return self._answers.get(conversation_id) if conversation_id else None

    def all(self) -> list[Answer]:
        return list(self._answers.values())

    def set_waiting(self, answer: Answer, text: str) -> None:
        if text != answer.waiting and self._answers.get(answer.conversation_id) is answer:
            answer.waiting = text
            if answer.message_id:
                self.waiting_changed.emit(answer.conversation_id, answer.message_id, text)

    def local_models_in_use(self) -> set[str]:
        """Paths of the local models the running answers use or wait for."""
        return {a.model_path for a in self._answers.values() if not a.remote}

    # -- starting -------------------------------------------------------------------------

    def start(
        self,
        conversation_id: str,
        question: Message,
        *,
        history: list[Message],
        model_path: str,
        system_prompt: str,
        sampling: SamplingParams,
        tools: ToolSetup | None = None,
        reasoning_effort: str | None = None,
    ) -> tuple[Answer, Message]:
        """Begin an answer to ``question`` (the last of ``history``) with ``model_path`` (a
        file or a remote id); returns it and its streaming message."""
        if conversation_id in self._answers:
            raise RuntimeError(f"Conversation {conversation_id} is answering already")
        remote = is_remote_id(model_path)
        name = model_path if remote else model_name(model_path)
        streaming = self.store.begin_streaming_message(
            conversation_id, parent_id=question.id, metadata={"model": name}
        )
        answer = Answer(
            conversation_id, streaming.id, model_path, name, history, system_prompt, sampling
        )
        answer.tools = tools if tools is not None and tools.active and not remote else None
        answer.reasoning_effort = reasoning_effort
        self._answers[conversation_id] = answer
        self._save_timer.start()
        self.activity_changed.emit()
        if remote:
            self._submit_remote(answer)
            return answer, streaming
        loaded = self.engine.loaded
        if loaded is not None and loaded.path == model_path:
            self._count_and_submit(answer)
        else:
            answer.waiting_for_model = True
            self.set_waiting(answer, f"Loading {name}…")
            if self.engine.loading_path != model_path:
                self.engine.load(model_path)
        return answer, streaming

    @Slot(object)
    def _on_model_loaded(self, loaded: LoadedModel) -> None:
        for answer in self.all():
            # One that wanted another model, no longer coming, answers with this one.
            if answer.waiting_for_model and self.engine.loading_path != answer.model_path:
                self._answer_with(answer, loaded)

    @Slot(str, object)
    def _on_model_load_failed(self, path: str, error: EngineError) -> None:
        loaded = self.engine.loaded
        for answer in self.all():
            if not answer.waiting_for_model or self.engine.loading_path == answer.model_path:
                continue
            if answer.model_path == path or loaded is None:
                text = f"{model_name(path)} could not be loaded: {error}"
                self.finish(answer, "error", {"error": text})
            else:
                self._answer_with(answer, loaded)

    def _answer_with(self, answer: Answer, loaded: LoadedModel) -> None:
        answer.waiting_for_model = False
        self.activity_changed.emit()
        answer.model_path, answer.model = loaded.path, model_name(loaded.path)
        self.set_waiting(answer, THINKING)
        self._count_and_submit(answer)

    def _count_and_submit(self, answer: Answer) -> None:
        texts = [answer.system_prompt, *(m.content for m in answer.history)]
        self.counter.ensure(texts, lambda: self._submit(answer))

    def _submit(self, answer: Answer) -> None:
        loaded = self.engine.loaded
        if self._answers.get(answer.conversation_id) is not answer or answer.handle is not None:
            return  # stopped while its tokens were being counted
        if loaded is None:
            self.finish(answer, "error", {"error": NO_MODEL_TEXT})
            return
        count = self.counter.count_or_estimate
        room = answer_room(loaded.n_ctx, answer.sampling.max_tokens)
        prompt = answer.system_prompt
        if answer.attached is None and needs_preparing(answer.history):
            self._prepare_attached(answer, loaded.n_ctx - room - PROMPT_OVERHEAD)
            return
        if answer.attached is not None and not loaded.vision:  # earlier images, a new model
            answer.attached = answer.attached.text_only(cannot_read_images(model_name(loaded.path)))
        elif answer.tools is not None and answer.attached is not None:
            answer.attached = answer.attached.text_only(TOOLS_NO_IMAGES)
        contents = answer.attached.contents if answer.attached is not None else {}
        images = answer.attached.images if answer.attached is not None else {}
        turns = [
            Turn(m.role, text, count(text) + IMAGE_TOKENS * len(images.get(m.id, ())))
            for m in answer.history
            for text in [contents.get(m.id, m.content)]
        ]
        plan = plan_context(prompt, count(prompt), turns, loaded.n_ctx, room)
        answer.n_ctx = loaded.n_ctx
        answer.prompt_tokens = plan.prompt_tokens
        if not plan.fits:
            self.finish(
                answer,
                "error",
                {
                    "error": f"Your message is too long for this model's context (about "
                    f"{plan.prompt_tokens:,} tokens, with {loaded.n_ctx:,} available and "
                    f"{room:,} kept for the answer). Shorten it, or load the model with a "
                    "longer context (Settings → Model loading)."
                },
            )
            return
        answer.dropped = plan.dropped
        if plan.dropped and answer.attached is not None:
            answer.attached = answer.attached.without_room_for(answer.history[: plan.dropped])
        if plan.dropped:
            self.context_notice.emit(
                answer.conversation_id, answer.message_id, plan.dropped, loaded.n_ctx
            )
        if answer.tools is not None:
            if contents:  # the tool loop sends the history's messages as they are
                answer.history = [
                    dataclasses.replace(m, content=contents.get(m.id, m.content))
                    for m in answer.history
                ]
            self.tools.run(answer, loaded, plan.dropped)
            return
        # priority: the app's own chat goes ahead of API requests waiting for a slot
        request = ChatRequest(plan.messages, answer.sampling, model=loaded.model_id, priority=1)
        request.reasoning_effort, request.prompt_progress = answer.reasoning_effort, True
        if answer.attached is not None:
            request.images = answer.attached.images_after(answer.history, plan.dropped)
        self._run(answer, request)

    def _prepare_attached(self, answer: Answer, budget: int) -> None:
        """The attached files' text, read and retrieved on a worker thread; then _submit."""
        if answer.system_prompt:
            budget -= self.counter.count_or_estimate(answer.system_prompt) + PER_MESSAGE_OVERHEAD
        answer.preparing = flag = StopFlag()
        names = [str(e.get("name")) for e in documents_of(answer.history[-1])]
        if names:
            self.set_waiting(answer, reading_text(names, 0, 0))
        find_embedder = None
        if self.embedders is not None and self.settings is not None:
            from app.attachments.embedder import embedding_choice

            # read here, on the GUI thread that owns the engine session; called on the task
            find_embedder = functools.partial(
                self.embedders.get,
                embedding_choice(self.settings),
                self.engine.worker,
                self.engine.loaded,
                answer.preparing,
            )
        answer.prepared = tasks().submit(
            functools.partial(
                prepared_prompt_with,
                find_embedder,
                list(answer.history),
                budget,
                answer.conversation_id,
                flag,
                progress=ReadingProgress(self._reading.send, flag, names),
            ),
            functools.partial(self._on_attached_prepared, answer),
            functools.partial(self._on_attached_failed, answer),
            receiver=self,
            token=flag,
            name="attachments for an answer",
        )

    def _on_reading(self, update: tuple[StopFlag, str]) -> None:
        flag, text = update
        for answer in self.all():
            if answer.preparing is flag and answer.attached is None:  # still reading
                self.set_waiting(answer, text)

    def _on_attached_prepared(self, answer: Answer, attached: AttachedPrompt) -> None:
        answer.attached = attached
        self.set_waiting(answer, THINKING)
        if answer.remote:
            self._submit_remote(answer)
        else:
            self._submit(answer)

    def _on_attached_failed(self, answer: Answer, error: BaseException) -> None:
        if self._answers.get(answer.conversation_id) is not answer:
            return  # stopped meanwhile (its preparing was told to stop): nothing failed
        log.error("Preparing the attached files failed", exc_info=error)
        self.finish(answer, "error", {"error": f"The attached files could not be used: {error}"})

    def _submit_remote(self, answer: Answer) -> None:
        """The whole history to the provider: only it knows its context length, and it says
        so clearly when the chat outgrows it."""
        if self._answers.get(answer.conversation_id) is not answer or answer.handle is not None:
            return  # stopped while its attached files were prepared
        if answer.attached is None and needs_preparing(answer.history):
            self._prepare_attached(answer, REMOTE_ATTACHED_BUDGET)
            return
        contents = answer.attached.contents if answer.attached is not None else {}
        messages: list[ChatMessage] = []
        if answer.system_prompt:
            messages.append({"role": "system", "content": answer.system_prompt})
        images = answer.attached.images if answer.attached is not None else {}
        texts = [answer.system_prompt] if answer.system_prompt else []
        for m in answer.history:
            texts.append(contents.get(m.id, m.content))
            # a list of content parts when it has images (the provider's wire takes them)
            content: Any = remote_content(texts[-1], images.get(m.id, ()))
            messages.append({"role": m.role, "content": content})
        answer.prompt_tokens = PROMPT_OVERHEAD + sum(
            estimate_tokens(t) + PER_MESSAGE_OVERHEAD for t in texts
        )
        answer.prompt_tokens += IMAGE_TOKENS * sum(len(i) for i in images.values())
        request = ChatRequest(messages, answer.sampling, model=answer.model_path)
        request.reasoning_effort = answer.reasoning_effort
        self._run(answer, request)

    def _run(self, answer: Answer, request: ChatRequest) -> None:
        answer.submitted_at = time.perf_counter()
        handle = self.engine.chat(request)
        answer.handle = handle
        handle.delta.connect(self._on_delta)
        handle.prompt_progress.connect(self._on_prompt_progress)
        handle.finished.connect(self._on_job_finished)
        handle.failed.connect(self._on_job_failed)

    # -- streaming ------------------------------------------------------------------------

    def _answer_of(self, handle: object) -> Answer | None:
        return next((a for a in self._answers.values() if a.handle is handle), None)

    @Slot(int, int)
    def _on_prompt_progress(self, done: int, total: int) -> None:
        answer = self._answer_of(self.sender())
        if answer is not None and total > 0 and answer.first_delta_at is None:
            answer.reading = min(99, done * 100 // total)
            self.set_waiting(answer, f"Reading the prompt… {answer.reading}%")
            self.activity_changed.emit()

    @Slot(str, int)
    def _on_delta(self, text: str, tokens: int) -> None:
        answer = self._answer_of(self.sender())
        if answer is None:
            return
        if answer.reading is not None:  # read: the status bar says it writes now
            answer.reading = None
            self.activity_changed.emit()
        now = time.perf_counter()
        if answer.first_delta_at is None:
            answer.first_delta_at = now
            answer.first_delta_tokens = tokens
        answer.last_delta_at = now
        answer.text += text
        if answer.thought_for is None and closed_in(answer.text, len(text)):
            answer.thought_for = round(now - answer.first_delta_at, 1)
        answer.unsaved.append(text)
        answer.tokens += tokens
        self.text_added.emit(answer.conversation_id, answer.message_id, text)

    @Slot(object)
    def _on_job_finished(self, event: Finished) -> None:
        answer = self._answer_of(self.sender())
        if answer is not None:
            status: Status = "stopped" if event.reason == "cancelled" else "complete"
            self.finish(answer, status, answer_stats(event.usage, event.timings, event.reason))

    @Slot(object)
    def _on_job_failed(self, event: Failed) -> None:
        answer = self._answer_of(self.sender())
        if answer is None:
            return
        error = event.error
        text = str(error)
        if isinstance(error, ContextOverflowError):
            text += " Start a new chat, or delete some earlier messages."
        metadata = {**answer_stats(event.usage, event.timings, "error"), "error": text}
        self.finish(answer, "error", metadata)
        if isinstance(error, EngineCrashedError):
            self.problem.emit("engine", text)

    # -- saving and finishing -------------------------------------------------------------

    @Slot()
    def save_all(self) -> None:
        """Save every answer's new text and stats so far (every SAVE_INTERVAL_MS)."""
        for answer in self.all():
            self.save(answer)

    def save(self, answer: Answer) -> None:
        if not answer.message_id:  # between rounds of tool calls: nothing streams now
            return
        try:
            if answer.unsaved:
                chunk = "".join(answer.unsaved)
                answer.unsaved.clear()
                self.store.append_to_message(answer.message_id, chunk)
            if answer.tokens != answer.saved_stats_tokens:
                answer.saved_stats_tokens = answer.tokens
                save_partial_stats(
                    self.store, answer.conversation_id, answer.message_id, answer.stats_so_far()
                )
        except (ChatStoreError, ValueError):
            log.exception("Could not save the streamed answer")

    def stop(self, conversation_id: str | None) -> None:
        """Stop the answer of that conversation (only that one)."""
        answer = self.get(conversation_id)
        if answer is None:
            return
        if answer.turn is not None:
            answer.turn.cancel()  # its ``done`` finishes it as stopped
        elif answer.handle is not None:
            answer.handle.cancel()  # its final "cancelled" event finishes it as stopped
        else:
            self.finish(answer, "stopped", answer.stats_so_far())

    def finish(self, answer: Answer, status: Status, metadata: dict[str, Any]) -> None:
        """Save ``answer``'s message as ``status`` and let it go (tool answers end here too)."""
        if self._answers.get(answer.conversation_id) is not answer:
            return
        if answer.preparing is not None:
            answer.preparing.set()
        if not answer.message_id:  # stopped between rounds of tool calls
            self.tools.ensure_streaming(answer)
        self.save(answer)
        del self._answers[answer.conversation_id]
        if not self._answers:
            self._save_timer.stop()
        metadata = {"model": answer.model, "model_path": answer.model_path, **metadata}
        if answer.attached is not None:
            if answer.attached.sources:
                metadata["sources"] = answer.attached.sources
            if answer.attached.left_out:
                metadata["attachments_left_out"] = answer.attached.left_out
        start, end = answer.first_delta_at, answer.last_delta_at
        written = round(end - start, 1) if start is not None and end is not None else 0.0
        thought = thought_seconds(answer.text, answer.thought_for, written)
        if thought is not None:
            metadata["thought_seconds"] = thought
        if answer.dropped:
            metadata["dropped_turns"] = answer.dropped
            metadata["n_ctx"] = answer.n_ctx
        message: Message | None = None
        try:
            message = self.store.finish_message(
                answer.message_id, status, metadata, content=answer.text
            )
            if answer.saved_stats_tokens:  # the message carries its stats now
                save_partial_stats(self.store, answer.conversation_id, answer.message_id, None)
        except (ChatStoreError, ValueError):
            log.exception("Could not finish the answer in the chat history")
        self.activity_changed.emit()
        self.finished.emit(answer.conversation_id, message)

    def shutdown(self) -> None:
        """Save every answer in progress as far as it got (marked interrupted) and cancel it."""
        for answer in self.all():
            handle, turn = answer.handle, answer.turn
            self.finish(answer, "stopped", {**answer.stats_so_far(), "interrupted": True})
            if handle is not None:
                handle.cancel()
            if turn is not None:
                turn.cancel()
        self.tools.shutdown()
