"""A fake engine model that streams canned Markdown as fast as asked (for coalescing tests and
the GUI benchmark). It plugs into the real EngineWorker through its ``model_factory``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from app.engine.llamacpp import Generation
from app.engine.templates import RenderedPrompt
from app.engine.types import (
    ChatRequest,
    LoadedModel,
    LoadParams,
    LoadRequest,
    SamplingParams,
    Timings,
    Usage,
)

_ANSWER = (
    "Sure. Here is a **short** explanation, then an example you can run. The idea is to keep "
    "the loop simple and let the `handler` do the work, so each piece stays easy to test.\n\n"
    "1. Read the events from the queue.\n2. Skip the ones you have seen.\n"
    "3. Hand the rest to the handler.\n\n"
    "```python\nimport queue\n\n\ndef drain(events: queue.Queue, handler) -> int:\n"
    "    seen = set()\n    count = 0\n    while not events.empty():\n"
    "        event = events.get()\n        if event.id in seen:\n            continue\n"
    "        seen.add(event.id)\n        handler(event)\n        count += 1\n"
    "    return count\n```\n\n"
    "The function returns how many events it handled, which makes it easy to log. If the "
    "queue is shared between threads, `queue.Queue` already does the locking for you, so "
    "there is nothing else to add. A table of the trade-offs:\n\n"
    "| Approach | Speed | Memory |\n|---|---|---|\n| set of ids | fast | grows |\n"
    "| bloom filter | fast | fixed |\n\n"
)
# Word-sized pieces, like a tokenizer's output.
_WORDS = _ANSWER.split(" ")
PIECES = (*(word + " " for word in _WORDS[:-1]), _WORDS[-1])


class _Abort:
    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()


class FakeModel:
    """Streams PIECES in a loop at ``tokens_per_second`` (None: as fast as possible)."""

    def __init__(self, request: LoadRequest, tokens_per_second: float | None = None) -> None:
        self.path = request.path
        self.model_id = request.model_id or request.path
        self.params = request.params
        self.n_ctx = request.params.n_ctx or 8192
        self.abort = _Abort()
        self.tokens_per_second = tokens_per_second

    def describe(self) -> LoadedModel:
        return LoadedModel(
            self.model_id, self.path, self.n_ctx, self.n_ctx, 1, self.params, None, False, 0.0
        )

    def close(self) -> None:
        pass

    def tokenize(self, text: str, add_special: bool = True) -> list[int]:
        return list(range(max(1, len(text) // 4)))

    def render_chat(self, request: ChatRequest) -> RenderedPrompt:
        text = "\n".join(str(m.get("content") or "") for m in request.messages)
        return RenderedPrompt(text, (), False)

    def generate(
        self,
        prompt_tokens: list[int],
        sampling: SamplingParams,
        cancelled: threading.Event,
        emit: Callable[[str, int], None],
        extra_stop: tuple[str, ...] = (),
    ) -> Generation:
        limit = sampling.max_tokens or 1000
        pieces: list[str] = []
        started = time.perf_counter()
        delay = 1.0 / self.tokens_per_second if self.tokens_per_second else 0.0
        reason = "length"
        for n in range(limit):
            if cancelled.is_set():
                reason = "cancelled"
                break
            piece = PIECES[n % len(PIECES)]
            pieces.append(piece)
            emit(piece, 1)
            if delay:
                time.sleep(delay)
        elapsed = time.perf_counter() - started
        count = len(pieces)
        timings = Timings(0.001, 0.001, elapsed, 0.0, count / elapsed if elapsed else 0.0)
        return Generation("".join(pieces), reason, Usage(len(prompt_tokens), count), timings)  # type: ignore[arg-type]


def fake_factory(
    tokens_per_second: float | None = None,
) -> Callable[[LoadRequest, Callable[[float], bool]], FakeModel]:
    def make(request: LoadRequest, progress: Callable[[float], bool]) -> FakeModel:
        progress(1.0)
        return FakeModel(request, tokens_per_second)

    return make


def fake_load_params() -> LoadParams:
    return LoadParams(n_ctx=32768)
