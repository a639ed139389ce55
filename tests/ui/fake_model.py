"""A fake engine model that streams canned Markdown as fast as asked (for coalescing tests and
the GUI benchmark). It plugs into the real EngineWorker through its ``model_factory``."""

from __future__ import annotations

from collections.abc import Callable

from app.engine.types import LoadParams, LoadRequest
from tests.helpers.scripted_model import ScriptedModel, scripted_factory

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


def fake_factory(
    tokens_per_second: float | None = None,
) -> Callable[[LoadRequest, Callable[[float], bool]], ScriptedModel]:
    """Models that stream PIECES in a loop at ``tokens_per_second`` (None: at once)."""
    return scripted_factory(pieces=PIECES, tokens_per_second=tokens_per_second)


def fake_load_params() -> LoadParams:
    return LoadParams(n_ctx=32768)
