"""Reasoning control: effort mapped onto the variables real templates read (llama.cpp's own
templates from the llama-cpp-python sdist), and a thinking budget the engine enforces on the
real Gemma 3 270M model with a template whose prompt ends inside ``<think>``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.reasoning import (
    THINK,
    ReasoningFormat,
    ThinkingBudget,
    ThinkingPlan,
    effective_budget,
    prompt_opens_reasoning,
    reasoning_format,
    template_controls,
    template_kwargs,
)
from app.engine.templates import ChatTemplate
from app.engine.types import (
    BadRequestError,
    ChatMessage,
    ChatRequest,
    Delta,
    Event,
    Finished,
    LoadParams,
    SamplingParams,
    TokenizeRequest,
)
from app.engine.worker import EngineWorker
from tests.helpers.sdist_reasoning import template

HI: list[ChatMessage] = [{"role": "user", "content": "Hi"}]


def _prompt(name: str, effort: str | None) -> str:
    return ChatTemplate(template(name)).render(HI, reasoning_effort=effort).text


# ---- effort onto each family's template -------------------------------------------------


@pytest.mark.parametrize(
    ("name", "off_tail", "on_tail"),
    [
        ("Qwen-Qwen3-0.6B", "<think>\n\n</think>\n\n", "<|im_start|>assistant\n"),
        ("HuggingFaceTB-SmolLM3-3B", "<think>\n\n</think>\n", "<|im_start|>assistant\n"),
        ("GLM-4.6", "/nothink<|assistant|>\n<think></think>", "Hi<|assistant|>"),
        ("deepseek-ai-DeepSeek-V3.1", "<｜Assistant｜><think></think>", "<｜Assistant｜><think>"),
        ("Qwen-QwQ-32B", "<think>\n</think>", "assistant\n<think>\n"),
        (
            "CohereForAI-c4ai-command-r7b-12-2024-tool_use",
            "<|START_THINKING|><|END_THINKING|>",
            "<|CHATBOT_TOKEN|>",
        ),
        ("Cohere2MoE", "<|START_THINKING|><|END_THINKING|>", "<|START_THINKING|>"),
        ("ByteDance-Seed-OSS", "</seed:think>", "<seed:bos>assistant\n"),
    ],
)
def test_none_switches_thinking_off_where_the_template_can(
    name: str, off_tail: str, on_tail: str
) -> None:
    assert template_controls(template(name)).switches_off
    assert _prompt(name, "none").endswith(off_tail)
    assert _prompt(name, "high").endswith(on_tail)
    assert effective_budget(template(name), "none", None) is None  # the template does it


def test_granite_reads_thinking() -> None:
    name = "ibm-granite-granite-3.3-2B-Instruct"
    assert template_kwargs(template(name), "low") == {"thinking": True}
    assert "<think>" in _prompt(name, "low") and "<think>" not in _prompt(name, "none")


def test_gpt_oss_gets_its_effort_line_and_none_is_a_budget_of_0() -> None:
    name, source = "openai-gpt-oss-120b", template("openai-gpt-oss-120b")
    assert "Reasoning: high" in _prompt(name, "high")
    assert "Reasoning: low" in _prompt(name, "minimal")  # gpt-oss knows low, medium, high
    assert "Reasoning: medium" in _prompt(name, None)  # the template's own default
    assert effective_budget(source, "none", None) == 0
    fmt = reasoning_format(source)
    assert fmt is not None
    assert fmt.close == "<|end|><|start|>assistant<|channel|>final<|message|>"


@pytest.mark.parametrize(
    ("name", "close", "opens"),
    [
        ("Kimi-K2-Thinking", "</think>", False),
        ("NVIDIA-Nemotron-Nano-v2", "</think>", True),
        ("mistralai-Ministral-3-14B-Reasoning-2512", "[/THINK]", False),
    ],
)
def test_templates_without_a_switch_get_a_budget_of_0_for_none(
    name: str, close: str, opens: bool
) -> None:
    source = template(name)
    assert not template_controls(source).switches_off
    assert template_kwargs(source, "none") == {}
    assert effective_budget(source, "none", None) == 0
    assert effective_budget(source, "high", 12) == 12
    fmt = reasoning_format(source)
    assert fmt is not None and fmt.close == close
    assert prompt_opens_reasoning(source, "high") is opens


def test_where_the_answer_starts_follows_the_effort() -> None:
    source = template("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B")
    assert prompt_opens_reasoning(source, "high")
    assert not prompt_opens_reasoning(source, "none")
    assert not prompt_opens_reasoning(None)


def test_a_template_without_reasoning_gets_nothing() -> None:
    source = template("meta-llama-Llama-3.1-8B-Instruct")
    assert template_kwargs(source, "high", 100) == {}
    assert reasoning_format(source) is None


def test_an_unknown_effort_or_a_negative_budget_is_refused() -> None:
    source = template("Qwen-Qwen3-0.6B")
    with pytest.raises(BadRequestError, match="reasoning effort"):
        ChatTemplate(source).render(HI, reasoning_effort="maximal")
    with pytest.raises(BadRequestError, match="thinking budget"):
        ChatTemplate(source).render(HI, thinking_budget=-1)


# ---- the budget counter (no model) ------------------------------------------------------


def _plan(budget: int, inside: bool, fmt: ReasoningFormat = THINK) -> ThinkingPlan:
    return ThinkingPlan(budget, fmt, inside)


def test_the_budget_counts_tokens_after_the_opening_even_split_across_tokens() -> None:
    budget = ThinkingBudget(_plan(2, inside=False))
    for piece in (b"Sure", b" <thi", b"nk>"):
        budget.feed(piece)
        assert not budget.spent
    budget.feed(b"one")
    assert not budget.spent
    budget.feed(b" two")
    assert budget.spent
    budget.closed()
    assert not budget.spent


def test_a_model_that_closes_its_thinking_itself_is_left_alone() -> None:
    budget = ThinkingBudget(_plan(3, inside=True))
    for piece in (b"a", b"</thi", b"nk>", b"x", b"y", b"z"):
        budget.feed(piece)
    assert not budget.spent


def test_a_marker_split_inside_a_character_is_found() -> None:
    kimi = ReasoningFormat("kimi", "◁/think▷", "◁think▷", "◁/think▷")
    budget = ThinkingBudget(_plan(1, inside=False, fmt=kimi))
    data = "◁think▷".encode()
    budget.feed(data[:1])
    budget.feed(data[1:])
    assert not budget.spent
    budget.feed(b"hmm")
    assert budget.spent


# ---- the budget on the real model -------------------------------------------------------

OPENS_THINK = (
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: <think>\n{% endif %}"
)
GREEDY = SamplingParams(temperature=0.0, max_tokens=24, seed=1)
QUESTION: list[ChatMessage] = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def thinker(gemma_path: Path) -> Iterator[EngineWorker]:
    w = EngineWorker()
    params = LoadParams(n_ctx=1024, flash_attn=False, chat_template=OPENS_THINK, n_parallel=2)
    w.load(str(gemma_path), params).result(600)
    yield w
    w.shutdown()


def _answer(worker: EngineWorker, request: ChatRequest) -> tuple[list[Delta], Finished]:
    events: list[Event] = []
    job = worker.submit(request, events.append)
    job.result(600)
    final = events[-1]
    assert isinstance(final, Finished)
    return [e for e in events if isinstance(e, Delta)], final


@pytest.mark.parametrize("budget", [0, 5])
def test_the_engine_closes_the_thinking_after_the_budget(
    thinker: EngineWorker, budget: int
) -> None:
    free, _ = _answer(thinker, ChatRequest(list(QUESTION), GREEDY))
    assert THINK.close not in "".join(d.text for d in free)  # the model never closes it
    deltas, final = _answer(
        thinker,
        ChatRequest(list(QUESTION), GREEDY, thinking_budget=budget),
    )
    text = "".join(d.text for d in deltas)
    thinking, close, answer = text.partition(THINK.close)
    assert close and answer.strip(), text
    assert thinking == "".join(d.text for d in free[:budget])  # the model's own first tokens
    n_thinking = len(thinker.run(TokenizeRequest(thinking, add_special=False))) if thinking else 0
    assert n_thinking <= budget
    assert final.usage.completion_tokens == GREEDY.max_tokens


def test_none_on_a_template_without_a_switch_is_a_budget_of_0(thinker: EngineWorker) -> None:
    request = ChatRequest(list(QUESTION), GREEDY, reasoning_effort="none")
    deltas, _ = _answer(thinker, request)
    assert "".join(d.text for d in deltas).startswith(THINK.close)
