"""The context-fitting rule: which turns are left out when a conversation outgrows the context."""

from __future__ import annotations

from app.engine.fitting import (
    PER_MESSAGE_OVERHEAD,
    PROMPT_OVERHEAD,
    Turn,
    answer_room,
    estimate_tokens,
    fit_messages,
    message_text,
    plan_context,
)
from app.engine.types import ChatMessage


def _turns(n: int, tokens: int) -> list[Turn]:
    turns = []
    for i in range(n):
        turns.append(Turn("user", f"q{i}", tokens))
        turns.append(Turn("assistant", f"a{i}", tokens))
    return [*turns, Turn("user", "last", tokens)]


def _words(text: str) -> int:
    """A stand-in tokenizer for the rule's tests: one token a word."""
    return len(text.split())


def test_plan_keeps_everything_that_fits() -> None:
    plan = plan_context("Be brief.", 5, _turns(3, 10), n_ctx=4096, room=512)
    assert plan.fits and plan.dropped == 0
    assert plan.messages[0] == {"role": "system", "content": "Be brief."}
    assert len(plan.messages) == 1 + 7


def test_plan_drops_whole_old_turns_and_keeps_the_system_prompt() -> None:
    plan = plan_context("Be brief.", 5, _turns(10, 100), n_ctx=1024, room=256)
    assert plan.fits and plan.dropped > 0 and plan.dropped % 2 == 0
    assert plan.messages[0]["role"] == "system"
    assert plan.messages[1]["role"] == "user"
    assert plan.messages[-1]["content"] == "last"
    assert plan.prompt_tokens <= 1024 - 256


def test_plan_says_when_even_the_last_message_is_too_long() -> None:
    plan = plan_context("", 0, [Turn("user", "huge", 5000)], n_ctx=2048, room=256)
    assert not plan.fits
    assert plan.messages == [{"role": "user", "content": "huge"}]


def test_answer_room() -> None:
    assert answer_room(4096, None) == 512
    assert answer_room(4096, 100) == 100
    assert answer_room(512, 4000) == 256
    assert answer_room(40, None) == 32


def test_estimate_is_cautious() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("x" * 32) == 10  # real text is closer to 8 tokens


def test_fit_messages_keeps_system_and_newest_and_drops_whole_turns() -> None:
    word = "word " * 40  # 40 tokens each
    messages: list[ChatMessage] = [{"role": "system", "content": "Be brief."}]
    for i in range(10):
        messages.append({"role": "user", "content": f"q{i} {word}"})
        messages.append({"role": "assistant", "content": f"a{i} {word}"})
    messages.append({"role": "user", "content": "last question"})
    plan = fit_messages(messages, _words, n_ctx=512, max_tokens=64)
    assert plan.fits
    assert plan.dropped > 0 and plan.dropped % 2 == 0
    assert plan.messages[0] == messages[0]
    assert plan.messages[1]["role"] == "user"
    assert plan.messages[1:] == messages[1 + plan.dropped :]
    assert plan.messages[-1]["content"] == "last question"
    assert plan.prompt_tokens <= 512 - 64
    # as many turns as fit are kept: the newest dropped turn would not have fit
    newest_dropped = messages[1 + plan.dropped - 2 : 1 + plan.dropped]
    cost = sum(_words(message_text(m)) + PER_MESSAGE_OVERHEAD for m in newest_dropped)
    assert plan.prompt_tokens + cost > 512 - 64


def test_fit_messages_drops_a_tool_exchange_with_its_question() -> None:
    call: ChatMessage = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{}"}}],
    }
    long = "word " * 100
    messages: list[ChatMessage] = [
        {"role": "user", "content": f"first {long}"},
        call,
        {"role": "tool", "content": f"result {long}", "tool_call_id": "1"},
        {"role": "assistant", "content": f"answer {long}"},
        {"role": "user", "content": "second"},
    ]
    plan = fit_messages(messages, _words, n_ctx=256, max_tokens=32)
    assert plan.fits and plan.dropped == 4
    assert plan.messages == [{"role": "user", "content": "second"}]
    kept_all = fit_messages(messages, _words, n_ctx=4096, max_tokens=32)
    assert kept_all.dropped == 0 and kept_all.messages[1] is call  # passed on as they are


def test_fit_messages_without_a_system_prompt_and_with_content_parts() -> None:
    parts: ChatMessage = {"role": "user", "content": [{"type": "text", "text": "a b c"}]}
    assert message_text(parts) == "a b c"
    plan = fit_messages([parts], _words, n_ctx=256, max_tokens=None)
    assert plan.fits and plan.dropped == 0 and plan.messages == [parts]
    assert plan.prompt_tokens == 3 + PER_MESSAGE_OVERHEAD + PROMPT_OVERHEAD


def test_fit_messages_says_when_the_newest_message_alone_is_too_long() -> None:
    messages: list[ChatMessage] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "word " * 1000},
    ]
    plan = fit_messages(messages, _words, n_ctx=256, max_tokens=None)
    assert not plan.fits and plan.prompt_tokens > 1000
