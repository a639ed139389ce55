"""A reasoning model's thinking in the app: split from its answer, timed, and the per-chat
control of how hard it thinks.

The text of an answer is kept whole in the chat history, thinking included, the way the model
wrote it; the app shows the ``<think>…</think>`` part folded above the answer ("Thought for
12 s", thought_block.py). The same tags as the API's splitter (app/server/reasoning.py, which
is not imported here: it brings the template engine with it). A model whose template opens
the thinking in the prompt writes only ``</think>``: the text before it is its thinking.
Linear in the text, no regular expressions.

The control (``blob["thinking"]`` in the chat's settings): ``default`` (the model's own), or an
effort passed as ``ChatRequest.reasoning_effort`` ("none" turns thinking off). Offered for
models whose template knows about thinking (:func:`supports_thinking`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OPEN = "<think>"
CLOSE = "</think>"
DEFAULT = "default"
# (stored value, label): the effort the engine gets is the value, "default" sends none
EFFORTS = (
    (DEFAULT, "Model default"),
    ("none", "Off"),
    ("low", "Low"),
    ("medium", "Medium"),
    ("high", "High"),
)
# What a template that can think or not, or think harder, reads or writes.
_TEMPLATE_SIGNS = ("enable_thinking", "reasoning_effort", "thinking", OPEN)


@dataclass(frozen=True, slots=True)
class Split:
    thinking: str  # what the model thought ("" when it did not)
    answer: str
    open: bool  # the thinking has not ended (yet)

    @property
    def thought(self) -> bool:
        return bool(self.thinking) or self.open


def split_thinking(text: str) -> Split:
    """``text`` as thinking and answer."""
    head = text.lstrip()
    close = text.find(CLOSE)
    if head.startswith(OPEN):
        body = head[len(OPEN) :]
        close = body.find(CLOSE)
        if close < 0:
            return Split(body.strip(), "", True)
        return Split(body[:close].strip(), body[close + len(CLOSE) :].lstrip(), False)
    if close >= 0 and OPEN not in text[:close]:  # the prompt opened it
        return Split(text[:close].strip(), text[close + len(CLOSE) :].lstrip(), False)
    return Split("", text, False)


def closed_in(text: str, added: int) -> bool:
    """Whether the last ``added`` characters of ``text`` completed a ``</think>``."""
    return CLOSE in text[-(added + len(CLOSE) - 1) :]


def thought_seconds(text: str, closed_after: float | None, written_for: float) -> float | None:
    """How long the model thought: until ``</think>`` (``closed_after`` seconds after its first
    token), or all the time it wrote if it never closed it; None if it did not think."""
    if not split_thinking(text).thought:
        return None
    return closed_after if closed_after is not None else written_for


def thought_title(seconds: float | None, thinking_now: bool) -> str:
    if thinking_now:
        return "Thinking…"
    if seconds is None:
        return "Thoughts"
    return f"Thought for {seconds:.0f} s" if seconds >= 1 else "Thought for a moment"


def supports_thinking(template: str | None) -> bool:
    """Whether a chat template knows about thinking (Qwen3, DeepSeek-R1, GPT-OSS, …)."""
    return bool(template) and any(sign in template for sign in _TEMPLATE_SIGNS)  # type: ignore[operator]


def thinking_choice(blob: dict[str, Any] | None) -> str:
    value = (blob or {}).get("thinking")
    return value if isinstance(value, str) and value in dict(EFFORTS) else DEFAULT


def reasoning_effort(blob: dict[str, Any] | None) -> str | None:
    """What ``ChatRequest.reasoning_effort`` gets for a chat's settings."""
    choice = thinking_choice(blob)
    return None if choice == DEFAULT else choice
