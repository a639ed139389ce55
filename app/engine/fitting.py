"""What fits in the model's context: the one rule for dropping the oldest turns.

When a conversation outgrows the context, the system prompt is always kept, the newest user
message is always kept, and the oldest turns are left out, whole (a question with its
answers), until the prompt plus room for the answer fits. The caller then says how many
messages were left out. The chat window and ``ember run``'s terminal chat both follow it; the
OpenAI-compatible API does not (a client there owns its history, and OpenAI answers
``context_length_exceeded`` rather than dropping messages).

Token counts come from the caller (exact ones from the loaded model, or
:func:`estimate_tokens`); what a chat template adds around the messages is estimated with
``PER_MESSAGE_OVERHEAD`` and ``PROMPT_OVERHEAD``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.engine.types import ChatMessage, content_text

PER_MESSAGE_OVERHEAD = 8  # role markers a chat template adds around each message
PROMPT_OVERHEAD = 16  # BOS, the generation prompt
DEFAULT_ANSWER_ROOM = 512
MIN_ANSWER_ROOM = 32


def estimate_tokens(text: str) -> int:
    """A cautious estimate (real text averages closer to 4 characters a token)."""
    return math.ceil(len(text) / 3.2)


def answer_room(n_ctx: int, max_tokens: int | None) -> int:
    """Context kept free for the answer: its length limit, at most half the context."""
    room = max_tokens if max_tokens else DEFAULT_ANSWER_ROOM
    return max(MIN_ANSWER_ROOM, min(room, n_ctx // 2))


def message_text(message: ChatMessage) -> str:
    """The text a message contributes (the text parts of a list of content parts)."""
    return content_text(message.get("content"))


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


def fit_messages(
    messages: Sequence[ChatMessage],
    count: Callable[[str], int],
    n_ctx: int,
    max_tokens: int | None,
) -> ContextPlan:
    """:func:`plan_context` for a message list whose system prompt, if any, comes first;
    ``count`` gives a text's tokens. The kept messages are passed on as they are."""
    head = 1 if messages and messages[0].get("role") == "system" else 0
    system = message_text(messages[0]) if head else ""
    body = messages[head:]
    turns = [Turn(m.get("role", "user"), "", count(message_text(m))) for m in body]
    room = answer_room(n_ctx, max_tokens)
    plan = plan_context(system, count(system) if system else 0, turns, n_ctx, room)
    kept = [*messages[:head], *body[plan.dropped :]]
    return ContextPlan(kept, plan.dropped, plan.prompt_tokens, plan.fits)
