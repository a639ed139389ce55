"""The open conversation's logic: send, stream into the store, stop, regenerate, edit, branches.

No widgets here: ``ConversationController`` talks to the ``ChatStore`` and the
``EngineSession`` and tells the chat pane what changed through signals (GUI thread).

Persistence: the user's message is saved when sent; an answer is created in the store as a
"streaming" message before the first token, its text is appended every ``SAVE_INTERVAL_MS``
and at the end, then it is finished as complete / stopped / error with its stats. So closing or
killing the app loses at most the last half second of an answer.

Remote models: a conversation whose model is a remote id (``provider::model``) is answered by
that provider. The conversation's model and the engine's selected remote model follow each
other: opening the chat selects its remote model (or goes back to the local one), and picking
a remote model in the picker makes it the open chat's model. Remote answers send the whole
history (the provider's context length is not known); the context meter then shows the tokens
used without a total.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.chats.models import ChatStoreError, Conversation, Message, Status
from app.chats.store import ChatStore
from app.config import Settings
from app.engine.providers import is_remote_id
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
from app.ui.chat.context import (
    PER_MESSAGE_OVERHEAD,
    PROMPT_OVERHEAD,
    TokenCounter,
    Turn,
    answer_room,
    estimate_tokens,
    plan_context,
)
from app.ui.engine_session import EngineSession, model_name
from app.ui.settings import presets

log = logging.getLogger(__name__)

SAVE_INTERVAL_MS = 500
DEFAULT_TITLE = "New chat"
BUSY_TEXT = "Ember is still answering. Stop the answer (Esc) first."
NO_MODEL_TEXT = "No model is loaded. Pick one from the model menu at the top, or open a GGUF file."
UNKNOWN_CONTEXT = -1  # context_changed's total for a remote model: its size is not known


def title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 60 else line[:57].rstrip() + "…"


@dataclass(slots=True)
class _Answer:
    """The answer being generated."""

    conversation_id: str
    message_id: str
    model_path: str
    model: str
    history: list[Message]
    handle: JobHandle | None = None
    text: str = ""
    unsaved: list[str] = field(default_factory=list)
    tokens: int = 0
    prompt_tokens: int = 0
    dropped: int = 0
    n_ctx: int = 0
    waiting_for_model: bool = False
    started_at: float = field(default_factory=time.perf_counter)


class ConversationController(QObject):
    """The conversation on screen and the answer being written.

    Signals (GUI thread):
    ``conversation_opened(Conversation | None)``; ``conversations_changed()`` (the sidebar
    should refresh); ``branch_changed(list[Message], str | None streaming_id)``;
    ``message_added(Message, bool streaming)``; ``message_changed(Message)``;
    ``stream_text(str message_id, str text)``; ``context_notice(str message_id, int dropped,
    int n_ctx)``; ``busy_changed(bool)``; ``context_changed(int used, int n_ctx)`` (n_ctx 0:
    no model, ``UNKNOWN_CONTEXT``: a remote model of unknown context);
    ``problem(str kind, str text)`` with kind need_model, busy, error or engine;
    ``answer_finished(Message)``; ``settings_flush_requested()`` before the conversation
    changes or a message is sent (editors of the chat's settings save pending edits).
    """

    conversation_opened = Signal(object)
    settings_flush_requested = Signal()
    conversations_changed = Signal()
    branch_changed = Signal(list, object)
    message_added = Signal(object, bool)
    message_changed = Signal(object)
    stream_text = Signal(str, str)
    context_notice = Signal(str, int, int)
    busy_changed = Signal(bool)
    context_changed = Signal(int, int)
    problem = Signal(str, str)
    answer_finished = Signal(object)

    def __init__(
        self,
        store: ChatStore,
        engine: EngineSession,
        settings: Settings,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.engine = engine
        self.settings = settings
        self.conversation: Conversation | None = None
        self.branch: list[Message] = []
        self.answer: _Answer | None = None
        self.counter = TokenCounter(engine, self)
        self._draft: dict[str, Any] = self._new_draft()
        self._draft_text = ""
        self._following_engine = False
        self._save_timer = QTimer(self)
        self._save_timer.setInterval(SAVE_INTERVAL_MS)
        self._save_timer.timeout.connect(self.save_streamed_text)
        engine.model_loaded.connect(self._on_model_loaded)
        engine.load_failed.connect(self._on_model_load_failed)
        engine.model_unloaded.connect(self.refresh_context)
        engine.remote_selected.connect(self._on_remote_selected)

    # -- queries --------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.answer is not None

    @property
    def conversation_id(self) -> str | None:
        return self.conversation.id if self.conversation else None

    def message(self, message_id: str) -> Message | None:
        return next((m for m in self.branch if m.id == message_id), None)

    def last_answer_text(self) -> str | None:
        for message in reversed(self.branch):
            if message.role == "assistant" and message.content:
                if self.answer is not None and message.id == self.answer.message_id:
                    return self.answer.text or None
                return message.content
        return None

    # -- conversation settings ------------------------------------------------------------

    def _new_draft(self) -> dict[str, Any]:
        values = presets.global_defaults(self.settings)
        return {
            "model": self.engine.remote_model,  # a new chat keeps the chosen remote model
            "system_prompt": self.settings.get("chat.system_prompt"),
            "settings": {"preset": presets.preset_matching(values), "sampling": values},
        }

    def conversation_settings(self) -> tuple[str | None, str, dict[str, Any]]:
        """(model path or None, system prompt, settings blob) of the open or draft chat."""
        if self.conversation is None:
            return self._draft["model"], self._draft["system_prompt"], self._draft["settings"]
        c = self.conversation
        return c.model, c.system_prompt, c.settings

    def sampling_values(self) -> dict[str, Any]:
        _, _, blob = self.conversation_settings()
        return presets.conversation_values(blob, presets.global_defaults(self.settings))

    def sampling_params(self) -> SamplingParams:
        return presets.to_sampling_params(self.sampling_values())

    def update_settings(
        self, model: str | None, system_prompt: str, settings_blob: dict[str, Any]
    ) -> None:
        if self.conversation is None:
            self._draft = {
                "model": model,
                "system_prompt": system_prompt,
                "settings": settings_blob,
            }
        else:
            self.conversation = self.store.update_conversation_settings(
                self.conversation.id,
                model=model,
                system_prompt=system_prompt,
                settings=settings_blob,
            )
        self._select_engine_model()
        self.refresh_context()

    def remote_target(self) -> str | None:
        """The remote model (``provider::model``) of the open or draft chat, if it has one."""
        model, _, _ = self.conversation_settings()
        return model if is_remote_id(model) else None

    def _select_engine_model(self) -> None:
        """Make the engine's remote selection match the chat (None: the local model)."""
        if not self._following_engine:
            self.engine.select_remote(self.remote_target())

    @Slot(object)
    def _on_remote_selected(self, model_id: str | None) -> None:
        """The picker chose a remote model (or the local one): the chat follows."""
        if self._following_engine:
            return
        self._following_engine = True
        try:
            self.settings_flush_requested.emit()  # pending edits first, with the old model
            model, system_prompt, blob = self.conversation_settings()
            if model_id is not None and model != model_id:
                self.update_settings(model_id, system_prompt, blob)
            elif model_id is None and is_remote_id(model):
                self.update_settings(None, system_prompt, blob)
            else:
                self.refresh_context()
        finally:
            self._following_engine = False

    # -- opening --------------------------------------------------------------------------

    def open_conversation(self, conversation_id: str | None) -> None:
        self.settings_flush_requested.emit()
        self.save_streamed_text()
        conversation: Conversation | None = None
        if conversation_id:
            try:
                conversation = self.store.get_conversation(conversation_id)
            except ChatStoreError:
                conversation = None
            if conversation is not None and conversation.is_deleted:
                conversation = None
        self.conversation = conversation
        if conversation is None:
            self._draft = self._new_draft()
            self.branch = []
        else:
            self.branch = self.store.active_branch(conversation.id)
        self._select_engine_model()
        self.settings.set("ui.last_conversation", conversation.id if conversation else "")
        streaming_id = self._streaming_id_on_screen()
        if streaming_id and self.answer is not None:
            self.branch = [
                _with_content(m, self.answer.text) if m.id == streaming_id else m
                for m in self.branch
            ]
        self.conversation_opened.emit(conversation)
        self.branch_changed.emit(list(self.branch), streaming_id)
        self.refresh_context()

    def new_conversation(self) -> None:
        self.open_conversation(None)

    def reload_conversation(self) -> None:
        """Re-read the open conversation (after a rename elsewhere, say)."""
        if self.conversation is not None:
            try:
                self.conversation = self.store.get_conversation(self.conversation.id)
            except ChatStoreError:
                self.open_conversation(None)
                return
            self.conversation_opened.emit(self.conversation)

    def _streaming_id_on_screen(self) -> str | None:
        answer = self.answer
        if answer is not None and answer.conversation_id == self.conversation_id:
            return answer.message_id
        return None

    # -- sending --------------------------------------------------------------------------

    def target_model(self) -> str | None:
        """The model the next answer uses: the chat's own choice, else the loaded one."""
        preferred, _, _ = self.conversation_settings()
        if is_remote_id(preferred):
            return preferred
        if preferred and Path(preferred).is_file():
            return preferred
        if self.engine.loaded is not None:
            return self.engine.loaded.path
        return self.engine.loading_path

    def send(self, text: str) -> bool:
        """Send a user message and start the answer; False (nothing saved) when it cannot."""
        text = text.strip()
        if not text:
            return False
        self.settings_flush_requested.emit()
        if self.answer is not None:
            self.problem.emit("busy", BUSY_TEXT)
            return False
        if self.target_model() is None:
            self.problem.emit("need_model", NO_MODEL_TEXT)
            return False
        if self.conversation is None:
            model, system_prompt, blob = self.conversation_settings()
            self.conversation = self.store.create_conversation(
                title_from(text), model=model, system_prompt=system_prompt, settings=blob
            )
            self.settings.set("ui.last_conversation", self.conversation.id)
            self.conversation_opened.emit(self.conversation)
        elif not self.branch and self.conversation.title == DEFAULT_TITLE:
            self.conversation = self.store.rename_conversation(
                self.conversation.id, title_from(text)
            )
            self.conversation_opened.emit(self.conversation)
        message = self.store.add_message(self.conversation.id, "user", text)
        self.branch.append(message)
        self.message_added.emit(message, False)
        self._start_answer(message)
        self.conversations_changed.emit()
        return True

    def regenerate(self, message_id: str) -> None:
        """A new version of an answer (or an answer to a question): a sibling branch."""
        if self.answer is not None:
            self.problem.emit("busy", BUSY_TEXT)
            return
        message = self.message(message_id)
        if message is None:
            return
        question = message if message.role == "user" else self.message(message.parent_id or "")
        if question is None:
            return
        if self.target_model() is None:
            self.problem.emit("need_model", NO_MODEL_TEXT)
            return
        index = self.branch.index(question)
        self.branch = self.branch[: index + 1]
        self.branch_changed.emit(list(self.branch), None)
        self._start_answer(question)

    def edit_and_resend(self, message_id: str, text: str) -> None:
        """Send an edited question as a new version; the old one keeps its branch."""
        text = text.strip()
        if self.answer is not None:
            self.problem.emit("busy", BUSY_TEXT)
            return
        message = self.message(message_id)
        if message is None or message.role != "user" or not text:
            return
        if self.target_model() is None:
            self.problem.emit("need_model", NO_MODEL_TEXT)
            return
        edited = self.store.add_sibling(message_id, text)
        index = self.branch.index(message)
        self.branch = [*self.branch[:index], edited]
        self.branch_changed.emit(list(self.branch), None)
        self._start_answer(edited)
        self.conversations_changed.emit()

    def stop(self) -> None:
        answer = self.answer
        if answer is None:
            return
        if answer.handle is not None:
            answer.handle.cancel()  # the final "cancelled" event finishes it as stopped
        else:
            self._finish_answer("stopped", {})

    # -- branches and messages ------------------------------------------------------------

    def switch_sibling(self, message_id: str, step: int) -> None:
        if self.answer is not None and self.answer.conversation_id == self.conversation_id:
            self.problem.emit("busy", BUSY_TEXT)
            return
        siblings = self.store.siblings(message_id)
        ids = [m.id for m in siblings]
        if message_id not in ids:
            return
        target = ids.index(message_id) + step
        if not 0 <= target < len(ids) or ids[target] == message_id:
            return
        self.branch = self.store.switch_to_sibling(ids[target])
        self.branch_changed.emit(list(self.branch), None)
        self.refresh_context()

    def delete_message(self, message_id: str) -> None:
        """Delete a message and everything after it on its branch."""
        if self.answer is not None and self.answer.conversation_id == self.conversation_id:
            self.problem.emit("busy", BUSY_TEXT)
            return
        if self.conversation is None or self.message(message_id) is None:
            return
        self.store.delete_message(message_id)
        self.branch = self.store.active_branch(self.conversation.id)
        self.branch_changed.emit(list(self.branch), None)
        self.conversations_changed.emit()
        self.refresh_context()

    # -- the answer -----------------------------------------------------------------------

    def _start_answer(self, question: Message) -> None:
        assert self.conversation is not None
        path = self.target_model()
        assert path is not None
        remote = is_remote_id(path)
        name = path if remote else model_name(path)
        index = self.branch.index(question)
        history = [
            m
            for m in self.branch[: index + 1]
            if not (m.role == "assistant" and m.status == "error" and not m.content)
        ]
        streaming = self.store.begin_streaming_message(
            self.conversation.id, parent_id=question.id, metadata={"model": name}
        )
        self.branch.append(streaming)
        self.answer = _Answer(self.conversation.id, streaming.id, path, name, history)
        self.message_added.emit(streaming, True)
        self.busy_changed.emit(True)
        self._save_timer.start()
        if remote:
            self._submit_remote_answer()
            return
        loaded = self.engine.loaded
        if loaded is not None and loaded.path == path:
            self._count_and_submit()
            return
        self.answer.waiting_for_model = True
        if self.engine.loading_path != path:
            self.engine.load(path)

    @Slot(object)
    def _on_model_loaded(self, _loaded: LoadedModel) -> None:
        if self.answer is not None and self.answer.waiting_for_model:
            self.answer.waiting_for_model = False
            self._count_and_submit()
        self.refresh_context()

    @Slot(str, object)
    def _on_model_load_failed(self, _path: str, error: EngineError) -> None:
        if self.answer is not None and self.answer.waiting_for_model:
            self._finish_answer("error", {"error": f"The model could not be loaded: {error}"})

    def _count_and_submit(self) -> None:
        answer = self.answer
        if answer is None:
            return
        _, system_prompt, _ = self.conversation_settings()
        texts = [system_prompt, *(m.content for m in answer.history)]
        self.counter.ensure(texts, self._submit_answer)

    def _submit_answer(self) -> None:
        answer = self.answer
        loaded = self.engine.loaded
        if answer is None or answer.handle is not None:
            return
        if loaded is None:
            self._finish_answer("error", {"error": NO_MODEL_TEXT})
            return
        _, system_prompt, _ = self.conversation_settings()
        sampling = self.sampling_params()
        count = self.counter.count_or_estimate
        turns = [Turn(m.role, m.content, count(m.content)) for m in answer.history]
        room = answer_room(loaded.n_ctx, sampling.max_tokens)
        plan = plan_context(system_prompt, count(system_prompt), turns, loaded.n_ctx, room)
        answer.n_ctx = loaded.n_ctx
        answer.prompt_tokens = plan.prompt_tokens
        if not plan.fits:
            self._finish_answer(
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
        if plan.dropped:
            self.context_notice.emit(answer.message_id, plan.dropped, loaded.n_ctx)
        self._run_answer(ChatRequest(plan.messages, sampling, model=loaded.model_id))

    def _submit_remote_answer(self) -> None:
        """The whole history to the provider: only it knows its context length, and it says
        so clearly when the chat outgrows it."""
        answer = self.answer
        if answer is None or answer.handle is not None:
            return
        _, system_prompt, _ = self.conversation_settings()
        messages: list[ChatMessage] = []
        if system_prompt:
            messages.append({"role": "system", "content": system_prompt})
        messages += [{"role": m.role, "content": m.content} for m in answer.history]
        answer.prompt_tokens = PROMPT_OVERHEAD + sum(
            estimate_tokens(m.get("content") or "") + PER_MESSAGE_OVERHEAD for m in messages
        )
        self._run_answer(ChatRequest(messages, self.sampling_params(), model=answer.model_path))

    def _run_answer(self, request: ChatRequest) -> None:
        assert self.answer is not None
        handle = self.engine.chat(request)
        self.answer.handle = handle
        handle.delta.connect(self._on_answer_delta)
        handle.finished.connect(self._on_answer_finished)
        handle.failed.connect(self._on_answer_failed)
        self.refresh_context()

    def _is_current(self, handle: object) -> bool:
        return self.answer is not None and handle is self.answer.handle

    @Slot(str, int)
    def _on_answer_delta(self, text: str, tokens: int) -> None:
        if not self._is_current(self.sender()):
            return
        assert self.answer is not None
        self.answer.text += text
        self.answer.unsaved.append(text)
        self.answer.tokens += tokens
        if self.answer.conversation_id == self.conversation_id:
            self.stream_text.emit(self.answer.message_id, text)
            self.refresh_context()

    @Slot(object)
    def _on_answer_finished(self, event: Finished) -> None:
        if not self._is_current(self.sender()):
            return
        status: Status = "stopped" if event.reason == "cancelled" else "complete"
        self._finish_answer(status, _stats(event.usage, event.timings, event.reason))

    @Slot(object)
    def _on_answer_failed(self, event: Failed) -> None:
        if not self._is_current(self.sender()):
            return
        error = event.error
        text = str(error)
        if isinstance(error, ContextOverflowError):
            text += " Start a new chat, or delete some earlier messages."
        metadata = {**_stats(event.usage, event.timings, "error"), "error": text}
        self._finish_answer("error", metadata)
        if isinstance(error, EngineCrashedError):
            self.problem.emit("engine", text)

    @Slot()
    def save_streamed_text(self) -> None:
        """Append the text streamed since the last save (called every SAVE_INTERVAL_MS)."""
        answer = self.answer
        if answer is None or not answer.unsaved:
            return
        chunk = "".join(answer.unsaved)
        answer.unsaved.clear()
        try:
            self.store.append_to_message(answer.message_id, chunk)
        except (ChatStoreError, ValueError):
            log.exception("Could not save the streamed answer")

    def _finish_answer(self, status: Status, metadata: dict[str, Any]) -> None:
        answer = self.answer
        if answer is None:
            return
        self.save_streamed_text()
        self.answer = None
        self._save_timer.stop()
        metadata = {"model": answer.model, "model_path": answer.model_path, **metadata}
        if answer.dropped:
            metadata["dropped_turns"] = answer.dropped
            metadata["n_ctx"] = answer.n_ctx
        try:
            message = self.store.finish_message(
                answer.message_id, status, metadata, content=answer.text
            )
        except (ChatStoreError, ValueError):
            log.exception("Could not finish the answer in the chat history")
            self.busy_changed.emit(False)
            return
        if answer.conversation_id == self.conversation_id:
            self.branch = [message if m.id == message.id else m for m in self.branch]
            self.message_changed.emit(message)
        self.busy_changed.emit(False)
        self.conversations_changed.emit()
        self.refresh_context()
        self.answer_finished.emit(message)

    # -- the context meter ----------------------------------------------------------------

    def set_draft(self, text: str) -> None:
        self._draft_text = text
        self.refresh_context()

    @Slot()
    def refresh_context(self) -> None:
        if self.remote_target() is not None:
            self.context_changed.emit(self.context_used(), UNKNOWN_CONTEXT)
            return
        loaded = self.engine.loaded
        if loaded is None:
            self.context_changed.emit(0, 0)
            return
        self.context_changed.emit(self.context_used(), loaded.n_ctx)

    def context_used(self) -> int:
        """Tokens the conversation fills: exact after an answer, else counted or estimated."""
        answer = self.answer
        draft = estimate_tokens(self._draft_text) if self._draft_text.strip() else 0
        if answer is not None and answer.conversation_id == self.conversation_id:
            return answer.prompt_tokens + answer.tokens
        last = self.branch[-1] if self.branch else None
        if last is not None and last.role == "assistant":
            meta = last.metadata
            prompt, tokens = meta.get("prompt_tokens"), meta.get("tokens")
            if isinstance(prompt, int) and isinstance(tokens, int) and prompt:
                return prompt + tokens + draft
        _, system_prompt, _ = self.conversation_settings()
        count = self.counter.count_or_estimate
        total = sum(count(m.content) + PER_MESSAGE_OVERHEAD for m in self.branch)
        if system_prompt:
            total += count(system_prompt) + PER_MESSAGE_OVERHEAD
        return total + draft + (PROMPT_OVERHEAD if self.branch or draft else 0)

    # -- shutdown -------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Save an answer in progress as far as it got (marked stopped) and cancel it."""
        answer = self.answer
        if answer is None:
            return
        handle = answer.handle
        self._finish_answer("stopped", {"interrupted": True})
        if handle is not None:
            handle.cancel()


def _with_content(message: Message, content: str) -> Message:
    return dataclasses.replace(message, content=content)


def _stats(usage: Any, timings: Any, reason: str) -> dict[str, Any]:
    return {
        "tokens": usage.completion_tokens,
        "prompt_tokens": usage.prompt_tokens,
        "cached_tokens": usage.cached_tokens,
        "ttft": round(timings.time_to_first_token, 4),
        "tps": round(timings.generation_tokens_per_second, 2),
        "generation_seconds": round(timings.generation_seconds, 3),
        "finish_reason": reason,
    }
