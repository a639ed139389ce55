"""The open conversation: what is on screen, its settings and draft, sending and branches.

No widgets here: ``ConversationController`` talks to the ``ChatStore`` and the
``EngineSession`` and tells the chat pane what changed through signals (GUI thread).

Answers are written by the ``AnswerRunner`` (answers.py): one at a time per conversation, any
number of conversations at once. The controller shows the open conversation's answer (opening a
chat that is answering shows its answer live) and leaves the others to the runner, which saves
them as they stream. The composer's text is kept per chat as it is typed (drafts.py).

A chat remembers its model: an answer saves the model it was written with as the chat's model;
chat_model.py keeps the open chat's model and the engine's in step.

Remote models: a conversation whose model is a remote id (``provider::model``) is answered by
that provider. The conversation's model and the engine's selected remote model follow each
other: opening the chat selects its remote model (or goes back to the local one), and picking
a remote model in the picker makes it the open chat's model. Remote answers send the whole
history (the provider's context length is not known); the context meter then shows the tokens
used without a total.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.chats.models import ChatStoreError, Conversation, Message, StoreDamagedError
from app.chats.store import ChatStore
from app.config import Settings
from app.engine.types import SamplingParams
from app.tools.choices import DECISIONS
from app.ui.chat.answers import NO_MODEL_TEXT, Answer, AnswerRunner
from app.ui.chat.attaching import AttachmentTray
from app.ui.chat.chat_images import image_refusal
from app.ui.chat.chat_model import ChatModelSync, model_file, remote_model
from app.ui.chat.chat_record import with_gui_keys, with_partial_stats
from app.ui.chat.context import TokenCounter, tokens_filled
from app.ui.chat.drafts import DraftKeeper
from app.ui.chat.thinking import reasoning_effort
from app.ui.chat.tool_turn import ToolSetup
from app.ui.chat.waiting_label import THINKING
from app.ui.engine_session import EngineSession
from app.ui.settings import presets

if TYPE_CHECKING:
    from app.attachments.embedder import Embedders

__all__ = ["ConversationController", "title_from"]

DEFAULT_TITLE = "New chat"
BUSY_TEXT = (
    "Ember is still answering in this chat. Stop the answer (Esc) first, or ask in another chat."
)
UNKNOWN_CONTEXT = -1  # context_changed's total for a remote model: its size is not known
METER_INTERVAL_MS = 250  # the context meter's pace while an answer streams


def title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 60 else line[:57].rstrip() + "…"


class ConversationController(QObject):
    """The conversation on screen; the answers being written (``answers``).

    Signals (GUI thread):
    ``conversation_opened(Conversation | None)``; ``conversations_changed()`` (the sidebar
    should refresh); ``branch_changed(list[Message], str | None streaming_id)``;
    ``message_added(Message, bool streaming)``; ``message_changed(Message)``;
    ``stream_text(str message_id, str text)`` (the open chat's answer only);
    ``context_notice(str message_id, int dropped, int n_ctx)``; ``answer_waiting(str
    message_id, str text)`` what the open chat's answer waits for until its text comes
    (waiting_label.py); ``busy_changed(bool)`` whether
    the open chat is answering (also when another chat is opened);
    ``context_changed(int used, int n_ctx)`` (n_ctx 0: no model, ``UNKNOWN_CONTEXT``: a remote
    model of unknown context); ``problem(str kind, str text)`` with kind need_model, busy,
    error or engine; ``answer_finished(Message)`` for an answer of any chat;
    ``settings_flush_requested()`` before the conversation changes or a message is sent
    (editors of the chat's settings save pending edits); ``settings_changed()`` when the chat's
    model changed other than through its settings panel; ``draft_restored(str)`` the unsent
    text of the chat just opened, for the composer; ``tool_approval_requested(ToolCall)`` a
    tool call of the open chat waits for Allow once / Always / Deny (``decide_tool``);
    ``tool_call_running(ToolCall)`` it runs; ``tool_call_finished(ToolCall)`` it ran, was
    denied or failed.
    """

    conversation_opened = Signal(object)
    settings_flush_requested = Signal()
    settings_changed = Signal()
    draft_restored = Signal(str)
    tool_approval_requested = Signal(object)
    tool_call_running = Signal(object)
    tool_call_finished = Signal(object)
    conversations_changed = Signal()
    branch_changed = Signal(list, object)
    message_added = Signal(object, bool)
    message_changed = Signal(object)
    stream_text = Signal(str, str)
    context_notice = Signal(str, int, int)
    answer_waiting = Signal(str, str)
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
        *,
        embedders: Embedders | None = None,
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.engine = engine
        self.settings = settings
        self.conversation: Conversation | None = None
        self.branch: list[Message] = []
        self.counter = TokenCounter(engine, self)
        self.answers = AnswerRunner(
            store, engine, self.counter, self, settings=settings, embedders=embedders
        )
        self.drafts = DraftKeeper(store, settings, self)
        self.attachments = AttachmentTray(self)  # the composer's files, taken when sending
        self._new_chat: dict[str, Any] = self._new_chat_settings()
        self._draft_text = ""
        self.sent_context = 0  # what the meter showed at the send (files too): kept until counted
        self.answers.text_added.connect(self._on_answer_text)
        self.answers.context_notice.connect(self._on_answer_context_notice)
        self.answers.waiting_changed.connect(self._on_answer_waiting)
        self.answers.finished.connect(self._on_answer_finished)
        self.answers.problem.connect(self.problem)
        self.answers.message_saved.connect(self._on_answer_message_saved)
        self.answers.approval_requested.connect(self._on_tool_approval_requested)
        self.answers.call_running.connect(self._on_tool_call_running)
        self.answers.call_finished.connect(self._on_tool_call_finished)
        engine.model_loaded.connect(self.refresh_context)
        engine.model_unloaded.connect(self.refresh_context)
        self.models = ChatModelSync(self)
        self._meter_timer = QTimer(self)
        self._meter_timer.setSingleShot(True)
        self._meter_timer.setInterval(METER_INTERVAL_MS)
        self._meter_timer.timeout.connect(self.refresh_context)

    # -- queries --------------------------------------------------------------------------

    @property
    def answer(self) -> Answer | None:
        """The open chat's answer being written, if any."""
        return self.answers.get(self.conversation_id)

    @property
    def busy(self) -> bool:
        return self.answer is not None

    @property
    def conversation_id(self) -> str | None:
        return self.conversation.id if self.conversation else None

    def message(self, message_id: str) -> Message | None:
        return next((m for m in self.branch if m.id == message_id), None)

    def last_answer_text(self) -> str | None:
        answer = self.answer
        for message in reversed(self.branch):
            if message.role == "assistant" and message.content:
                if answer is not None and message.id == answer.message_id:
                    return answer.text or None
                return message.content
        return None

    # -- conversation settings ------------------------------------------------------------

    def _new_chat_settings(self) -> dict[str, Any]:
        values = presets.global_defaults(self.settings)
        return {
            "model": self.engine.remote_model,  # a new chat keeps the chosen remote model
            "system_prompt": self.settings.get("chat.system_prompt"),
            "settings": {"preset": presets.preset_matching(values), "sampling": values},
        }

    def conversation_settings(self) -> tuple[str | None, str, dict[str, Any]]:
        """(model path or None, system prompt, settings blob) of the open or new chat."""
        if self.conversation is None:
            new = self._new_chat
            return new["model"], new["system_prompt"], new["settings"]
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
            self._new_chat = {
                "model": model,
                "system_prompt": system_prompt,
                "settings": settings_blob,
            }
        else:
            conversation_id = self.conversation.id
            self.conversation = self.store.update_conversation_settings(
                conversation_id,
                model=model,
                system_prompt=system_prompt,
                settings=with_gui_keys(self.store, conversation_id, settings_blob),
            )
        self.models.select_engine_model()
        self.refresh_context()

    def set_model(self, model: str | None) -> None:
        """Make ``model`` the open chat's model, keeping its other settings."""
        self.settings_flush_requested.emit()  # pending edits first, with the old model
        if self.conversation is None:
            self._new_chat["model"] = model
        elif self.conversation.model != model:
            self.conversation = self.store.update_conversation_settings(
                self.conversation.id, model=model
            )
        self.settings_changed.emit()

    def remote_target(self) -> str | None:
        """The remote model (``provider::model``) of the open or new chat, if it has one."""
        return remote_model(self.conversation_settings()[0])

    def load_chat_model(self) -> bool:
        """At start-up: load the open chat's model file if no model is loaded or loading
        (before the last model would be restored); False when there is nothing to do."""
        return self.models.load_chat_model()

    # -- opening --------------------------------------------------------------------------

    def open_conversation(self, conversation_id: str | None) -> None:
        self.settings_flush_requested.emit()
        self.drafts.flush()
        damage: StoreDamagedError | None = None
        try:
            conversation, branch = self._read(conversation_id)
        except StoreDamagedError as error:
            damage = error
            try:  # from the recovered history, which may still hold it
                conversation, branch = self._read(conversation_id)
            except ChatStoreError:
                conversation, branch = None, []
        except ChatStoreError:
            conversation, branch = None, []
        self.conversation, self.branch, self.sent_context = conversation, branch, 0
        if conversation is None:
            self._new_chat = self._new_chat_settings()
        self.models.select_engine_model()
        self.models.pick_chat_model()
        self.settings.set("ui.last_conversation", conversation.id if conversation else "")
        self.attachments.show_chat(conversation.id if conversation else None)
        answer = self.answer
        streaming_id = answer.message_id if answer is not None else None
        if answer is not None:
            self.branch = [
                dataclasses.replace(m, content=answer.text) if m.id == streaming_id else m
                for m in self.branch
            ]
        self.conversation_opened.emit(conversation)
        self.branch_changed.emit(list(self.branch), streaming_id)
        if answer is not None and answer.message_id and answer.waiting != THINKING:
            self.answer_waiting.emit(answer.message_id, answer.waiting)
        self.busy_changed.emit(answer is not None)
        self.draft_restored.emit(self.drafts.text_for(conversation))
        self.refresh_context()
        turn = answer.turn if answer is not None else None
        if turn is not None and turn.pending is not None:
            self.tool_approval_requested.emit(turn.pending)  # still waiting for a yes
        elif turn is not None and turn.running_call is not None:
            self.tool_call_running.emit(turn.running_call)
        if damage is not None:  # said after the chat is on screen (opening one clears notices)
            self._on_store_damaged(damage)

    def _read(self, conversation_id: str | None) -> tuple[Conversation | None, list[Message]]:
        """The conversation (None: new, gone or deleted) and its branch on screen."""
        if not conversation_id:
            return None, []
        conversation = self.store.get_conversation(conversation_id)
        if conversation.is_deleted:
            return None, []
        branch = self.store.active_branch(conversation.id)
        return conversation, with_partial_stats(branch, conversation)

    def _on_store_damaged(self, error: StoreDamagedError) -> None:
        """chats.db was replaced by what could be recovered from it: say so, list it again."""
        self.problem.emit("error", str(error))
        self.conversations_changed.emit()

    def new_conversation(self) -> None:
        self.open_conversation(None)

    def reload_conversation(self) -> None:
        """Re-read the open conversation (after a rename elsewhere, say)."""
        if self.conversation is not None:
            try:
                self.conversation = self.store.get_conversation(self.conversation.id)
            except StoreDamagedError as error:
                self._on_store_damaged(error)
                self.open_conversation(self.conversation.id)
                return
            except ChatStoreError:
                self.open_conversation(None)
                return
            self.conversation_opened.emit(self.conversation)

    # -- sending --------------------------------------------------------------------------

    def target_model(self) -> str | None:
        """The model the next answer uses: the chat's own choice, else the loaded one."""
        preferred, _, _ = self.conversation_settings()
        chosen = remote_model(preferred) or model_file(preferred)
        if chosen is not None:
            return chosen
        if self.engine.loaded is not None:
            return self.engine.loaded.path
        return self.engine.loading_path

    def _can_answer(self) -> bool:
        if self.busy:
            self.problem.emit("busy", BUSY_TEXT)
            return False
        if self.target_model() is None:
            self.problem.emit("need_model", NO_MODEL_TEXT)
            return False
        return True

    def send(self, text: str) -> bool:
        """Send a user message and start the answer; False (nothing saved) when it cannot."""
        text = text.strip()
        if not text:
            return False
        self.settings_flush_requested.emit()
        if not self._can_answer():
            return False
        reading = self.attachments.reading
        if reading:
            self.problem.emit(
                "busy", f"{reading[0].name} is still being read; send once its chip shows its size."
            )
            return False
        refusal = image_refusal(self.target_model(), self.engine.loaded)
        ready = [f for f in self.attachments.images if f.state == "ready"]
        if refusal and ready:  # said on the chips too: not a silent drop
            self.problem.emit("images", refusal)
            return False
        if self.conversation is None:
            model, system_prompt, blob = self.conversation_settings()
            self.conversation = self.store.create_conversation(
                title_from(text), model=model, system_prompt=system_prompt, settings=blob
            )
            self.drafts.forget_new_chat()
            self.attachments.adopt(self.conversation.id)  # as its files, if any
            self.settings.set("ui.last_conversation", self.conversation.id)
            self.conversation_opened.emit(self.conversation)
        elif not self.branch and self.conversation.title == DEFAULT_TITLE:
            self.conversation = self.store.rename_conversation(
                self.conversation.id, title_from(text)
            )
            self.conversation_opened.emit(self.conversation)
        attached = self.attachments.take_ready()  # files with an error are left out, as said
        metadata = {"attachments": attached} if attached else None
        message = self.store.add_message(self.conversation.id, "user", text, metadata=metadata)
        self.branch.append(message)
        self.message_added.emit(message, False)
        self._start_answer(message)
        self.conversations_changed.emit()
        return True

    def regenerate(self, message_id: str) -> None:
        """A new version of an answer (or an answer to a question): a sibling branch."""
        message = self.message(message_id)
        if message is None or not self._can_answer():
            return
        question = message if message.role == "user" else self.message(message.parent_id or "")
        if question is None:
            return
        index = self.branch.index(question)
        self.branch = self.branch[: index + 1]
        self.branch_changed.emit(list(self.branch), None)
        self._start_answer(question)

    def edit_and_resend(self, message_id: str, text: str) -> None:
        """Send an edited question as a new version; the old one keeps its branch."""
        text = text.strip()
        message = self.message(message_id)
        if message is None or message.role != "user" or not text or not self._can_answer():
            return
        attached = message.metadata.get("attachments")  # the new version keeps its files
        edited = self.store.add_sibling(
            message_id, text, {"attachments": attached} if attached else None
        )
        index = self.branch.index(message)
        self.branch = [*self.branch[:index], edited]
        self.branch_changed.emit(list(self.branch), None)
        self._start_answer(edited)
        self.conversations_changed.emit()

    def stop(self) -> None:
        """Stop the open chat's answer (answers of other chats go on)."""
        self.answers.stop(self.conversation_id)

    def _start_answer(self, question: Message) -> None:
        assert self.conversation is not None
        path = self.target_model()
        assert path is not None
        if self.conversation.model != path:  # the chat remembers the model it answers with
            self.set_model(path)
        _, system_prompt, _ = self.conversation_settings()
        index = self.branch.index(question)
        history = [
            m
            for m in self.branch[: index + 1]
            if not (m.role == "assistant" and m.status == "error" and not m.content)
        ]
        _, streaming = self.answers.start(
            self.conversation.id,
            question,
            history=history,
            model_path=path,
            system_prompt=system_prompt,
            sampling=self.sampling_params(),
            tools=self.tool_setup(),
            reasoning_effort=reasoning_effort(self.conversation_settings()[2]),
        )
        self.branch.append(streaming)
        self.message_added.emit(streaming, True)
        self.busy_changed.emit(True)
        self.refresh_context()

    # -- the answers ----------------------------------------------------------------------

    @Slot(str, str, str)
    def _on_answer_text(self, conversation_id: str, message_id: str, text: str) -> None:
        if conversation_id == self.conversation_id:
            self.stream_text.emit(message_id, text)
            if not self._meter_timer.isActive():  # the meter need not move with every word
                self._meter_timer.start()

    @Slot(str, str, int, int)
    def _on_answer_context_notice(
        self, conversation_id: str, message_id: str, dropped: int, n_ctx: int
    ) -> None:
        if conversation_id == self.conversation_id:
            self.context_notice.emit(message_id, dropped, n_ctx)

    @Slot(str, str, str)
    def _on_answer_waiting(self, conversation_id: str, message_id: str, text: str) -> None:
        if conversation_id == self.conversation_id:
            self.answer_waiting.emit(message_id, text)

    @Slot(str, object)
    def _on_answer_finished(self, conversation_id: str, message: Message | None) -> None:
        on_screen = conversation_id == self.conversation_id
        if on_screen and message is not None:
            self.branch = [message if m.id == message.id else m for m in self.branch]
            self.message_changed.emit(message)
        if on_screen:
            self.busy_changed.emit(False)
        self.conversations_changed.emit()
        self.refresh_context()
        if message is not None:
            self.answer_finished.emit(message)

    # -- tools ----------------------------------------------------------------------------

    def tool_setup(self) -> ToolSetup:
        """The open (or new) chat's tools: which MCP servers, and the tool choice."""
        return ToolSetup.from_blob(self.conversation_settings()[2])

    def set_tool_setup(self, setup: ToolSetup) -> None:
        model, system_prompt, blob = self.conversation_settings()
        self.update_settings(model, system_prompt, {**blob, "tools": setup.to_json()})

    def decide_tool(self, decision: str) -> None:
        """The person's answer to the open chat's pending tool call."""
        answer = self.answer
        if answer is not None and answer.turn is not None:
            for known in DECISIONS:  # narrowed to the Literal the loop takes
                if decision == known:
                    answer.turn.decide(known)

    @Slot(str, object, bool)
    def _on_answer_message_saved(
        self, conversation_id: str, message: Message, streaming: bool
    ) -> None:
        if conversation_id != self.conversation_id:
            return
        if any(m.id == message.id for m in self.branch):
            self.branch = [message if m.id == message.id else m for m in self.branch]
            self.message_changed.emit(message)
        else:
            self.branch.append(message)
            self.message_added.emit(message, streaming)

    # The open chat's tool calls, for the cards above the composer:

    @Slot(str, object)
    def _on_tool_approval_requested(self, conversation_id: str, call: object) -> None:
        if conversation_id == self.conversation_id:
            self.tool_approval_requested.emit(call)

    @Slot(str, object)
    def _on_tool_call_running(self, conversation_id: str, call: object) -> None:
        if conversation_id == self.conversation_id:
            self.tool_call_running.emit(call)

    @Slot(str, object)
    def _on_tool_call_finished(self, conversation_id: str, call: object) -> None:
        if conversation_id == self.conversation_id:
            self.tool_call_finished.emit(call)

    # -- branches and messages ------------------------------------------------------------

    def switch_sibling(self, message_id: str, step: int) -> None:
        if self.busy:
            self.problem.emit("busy", BUSY_TEXT)
            return
        siblings = self.store.siblings(message_id)
        ids = [m.id for m in siblings]
        if message_id not in ids:
            return
        target = ids.index(message_id) + step
        if not 0 <= target < len(ids) or ids[target] == message_id:
            return
        self.branch = self._with_stats(self.store.switch_to_sibling(ids[target]))
        self.branch_changed.emit(list(self.branch), None)
        self.refresh_context()

    def delete_message(self, message_id: str) -> None:
        """Delete a message and everything after it on its branch."""
        if self.busy:
            self.problem.emit("busy", BUSY_TEXT)
            return
        if self.conversation is None or self.message(message_id) is None:
            return
        self.store.delete_message(message_id)
        self.branch = self._with_stats(self.store.active_branch(self.conversation.id))
        self.branch_changed.emit(list(self.branch), None)
        self.conversations_changed.emit()
        self.refresh_context()

    def _with_stats(self, messages: list[Message]) -> list[Message]:
        if self.conversation is None:
            return messages
        return with_partial_stats(messages, self.store.get_conversation(self.conversation.id))

    # -- the context meter and the draft --------------------------------------------------

    def set_draft(self, text: str) -> None:
        """The composer's text changed: keep it as the chat's draft, update the meter."""
        self._draft_text = text
        self.drafts.changed(self.conversation_id, text)
        self.refresh_context()

    @Slot()
    def refresh_context(self) -> None:
        # the chat's model may have changed: can it read the images attached?
        self.attachments.set_image_refusal(image_refusal(self.target_model(), self.engine.loaded))
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
        if answer is not None and answer.prompt_tokens:  # else as much as before it was sent
            return answer.prompt_tokens + answer.tokens
        return tokens_filled(
            self.branch,
            self.conversation_settings()[1],
            self._draft_text,
            self.counter.count_or_estimate,
            floor=self.sent_context if answer is not None else 0,
        )

    # -- shutdown -------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Keep the draft, and save every answer in progress as far as it got (marked
        interrupted, with its stats so far) before cancelling it."""
        self.drafts.flush()
        self.answers.shutdown()
