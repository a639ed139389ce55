"""Exact token counts for the chat window; the context-fitting rule itself is in the core.

What is dropped when a conversation outgrows the context is decided by
``app.engine.fitting`` (re-exported here for the chat pane); this module only gives it exact
counts. ``TokenCounter`` asks the engine (tokenize jobs, cached by text) and falls back to an
estimate for very old messages, so preparing a prompt costs a few milliseconds of engine time
and no waiting on the GUI thread. ``tokens_filled`` is what the context meter shows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtCore import QObject, Slot

from app.chats.models import Message
from app.engine.fitting import (
    PER_MESSAGE_OVERHEAD,
    PROMPT_OVERHEAD,
    estimate_tokens,
)
from app.engine.types import (
    EngineError,
    Event,
    Failed,
    Finished,
    TokenizeRequest,
)
from app.ui.engine_session import EngineSession
from app.ui.relay import Relay

__all__ = ["MAX_EXACT_COUNTS", "TokenCounter"]

MAX_EXACT_COUNTS = 40  # tokenize jobs per prompt; older messages are estimated


def tokens_filled(
    branch: Sequence[Message],
    system_prompt: str,
    draft: str,
    count: Callable[[str], int],
    *,
    floor: int = 0,
) -> int:
    """Tokens a conversation fills with ``draft`` typed in the composer: exact after an answer
    (its message's counts), else each message's ``count`` (at least ``floor``)."""
    drafted = estimate_tokens(draft) if draft.strip() else 0
    last = branch[-1] if branch else None
    if last is not None and last.role == "assistant":
        prompt, tokens = last.metadata.get("prompt_tokens"), last.metadata.get("tokens")
        if isinstance(prompt, int) and isinstance(tokens, int) and prompt:
            return prompt + tokens + drafted
    total = sum(count(m.content) + PER_MESSAGE_OVERHEAD for m in branch)
    if system_prompt:
        total += count(system_prompt) + PER_MESSAGE_OVERHEAD
    return max(floor, total + drafted + (PROMPT_OVERHEAD if branch or drafted else 0))


class TokenCounter(QObject):
    """Exact token counts from the loaded model, cached by (model, text).

    Counting jobs go straight to the engine worker with a tiny sink (no JobHandle each): a
    first message in a long conversation counts dozens of texts at once. The sink holds only a
    ``Relay``, never the counter: the engine may drop a job after the window closed, and what
    it drops last is destroyed on its thread.
    """

    def __init__(self, engine: EngineSession, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._engine = engine
        self._cache: dict[tuple[str, str], int] = {}
        self._pending_requests: list[_CountRequest] = []
        self._counted = Relay(self._on_counted, self)  # ((model, text), count or None)

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
        send = self._counted.send

        def sink(event: Event) -> None:  # engine worker thread; holds only the relay
            if isinstance(event, Finished):
                result = event.result
                send((key, len(result) if isinstance(result, list) else None))
            elif isinstance(event, Failed):
                send((key, None))

        try:
            self._engine.worker.submit(
                TokenizeRequest(key[1], model=key[0] or None, add_special=False), sink
            )
        except EngineError:
            send((key, None))

    @Slot(object)
    def _on_counted(self, counted: tuple[tuple[str, str], int | None]) -> None:
        key, count = counted
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
