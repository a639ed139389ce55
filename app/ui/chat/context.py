"""What fits in the model's context: counting tokens and dropping the oldest turns.

The defined behaviour when a conversation outgrows the context: the system prompt is always
kept, the newest user message is always kept, and the oldest turns are left out, whole (a
question with its answer), until the prompt plus room for the answer fits. The answer then
says how many messages were left out.

``TokenCounter`` asks the engine for exact counts (tokenize jobs, cached by text) and falls
back to an estimate for very old messages, so preparing a prompt costs a few milliseconds of
engine time and no waiting on the GUI thread.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, Signal, Slot

from app.engine.types import (
    ChatMessage,
    EngineError,
    Event,
    Failed,
    Finished,
    TokenizeRequest,
)
from app.ui.engine_session import EngineSession

PER_MESSAGE_OVERHEAD = 8  # role markers a chat template adds around each message
PROMPT_OVERHEAD = 16  # BOS, the generation prompt
DEFAULT_ANSWER_ROOM = 512
MAX_EXACT_COUNTS = 40  # tokenize jobs per prompt; older messages are estimated


def estimate_tokens(text: str) -> int:
    """A cautious estimate (real text averages closer to 4 characters a token)."""
    return math.ceil(len(text) / 3.2)


def answer_room(n_ctx: int, max_tokens: int | None) -> int:
    """Context kept free for the answer."""
    room = max_tokens if max_tokens else DEFAULT_ANSWER_ROOM
    return max(32, min(room, n_ctx // 2))


@dataclass(frozen=True, slots=True)
class Turn:
    role: str
    content: str
    tokens: int


@dataclass(frozen=True, slots=True)
class ContextPlan:
    messages: list[ChatMessage]
    dropped: int  # messages left out (not counting the system prompt)
    prompt_tokens: int  # estimated tokens of what is sent
    fits: bool  # False when even the newest message alone does not fit


def plan_context(
    system_prompt: str,
    system_tokens: int,
    turns: Sequence[Turn],
    n_ctx: int,
    room: int,
) -> ContextPlan:
    """Choose the messages to send (see the module docstring)."""
    budget = n_ctx - room - PROMPT_OVERHEAD
    fixed = system_tokens + PER_MESSAGE_OVERHEAD if system_prompt else 0
    costs = [t.tokens + PER_MESSAGE_OVERHEAD for t in turns]
    start = 0
    total = fixed + sum(costs)
    while total > budget and start < len(turns) - 1:
        # Drop one whole turn: a message and the replies that follow it up to the next question.
        total -= costs[start]
        start += 1
        while start < len(turns) - 1 and turns[start].role != "user":
            total -= costs[start]
            start += 1
    messages: list[ChatMessage] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages += [{"role": t.role, "content": t.content} for t in turns[start:]]
    return ContextPlan(messages, start, total + PROMPT_OVERHEAD, total <= budget)


class TokenCounter(QObject):
    """Exact token counts from the loaded model, cached by (model, text).

    Counting jobs go straight to the engine worker with a tiny sink (no JobHandle each): a
    first message in a long conversation counts dozens of texts at once.
    """

    _counted = Signal(object, object)  # (model, text), token count or None; worker -> GUI

    def __init__(self, engine: EngineSession, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._engine = engine
        self._cache: dict[tuple[str, str], int] = {}
        self._pending_requests: list[_CountRequest] = []
        self._counted.connect(self._on_counted, Qt.ConnectionType.QueuedConnection)

    def known(self, text: str) -> int | None:
        model = self._model_key()
        return self._cache.get((model, text)) if model else None

    def count_or_estimate(self, text: str) -> int:
        known = self.known(text)
        return known if known is not None else estimate_tokens(text)

    def ensure(self, texts: Sequence[str], on_ready: Callable[[], None]) -> None:
        """Count the texts (newest last; only the newest MAX_EXACT_COUNTS exactly), then call
        ``on_ready`` on the GUI thread. Calls it at once when everything is known."""
        model = self._model_key()
        missing: list[tuple[str, str]] = []
        if model:
            for text in reversed(texts):
                if len(missing) >= MAX_EXACT_COUNTS:
                    break
                key = (model, text)
                if text and key not in self._cache and key not in missing:
                    missing.append(key)
        if not missing:
            on_ready()
            return
        self._pending_requests.append(_CountRequest(on_ready, set(missing)))
        for key in missing:
            self._submit(key)

    def _model_key(self) -> str:
        loaded = self._engine.loaded
        return loaded.model_id if loaded is not None else ""

    def _submit(self, key: tuple[str, str]) -> None:
        def sink(event: Event) -> None:  # engine worker thread
            if isinstance(event, Finished):
                result = event.result
                self._counted.emit(key, len(result) if isinstance(result, list) else None)
            elif isinstance(event, Failed):
                self._counted.emit(key, None)

        try:
            self._engine.worker.submit(
                TokenizeRequest(key[1], model=key[0] or None, add_special=False), sink
            )
        except EngineError:
            self._counted.emit(key, None)

    @Slot(object, object)
    def _on_counted(self, key: tuple[str, str], count: int | None) -> None:
        if count is not None:
            self._cache[key] = count
        for request in list(self._pending_requests):
            request.keys.discard(key)
            if not request.keys:
                self._pending_requests.remove(request)
                request.on_ready()


@dataclass(slots=True)
class _CountRequest:
    on_ready: Callable[[], None]
    keys: set[tuple[str, str]]
