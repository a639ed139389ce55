"""Reasoning control through the real server and the real model (a chat template whose prompt
ends inside ``<think>``): the engine closes the thinking after the budget, the openai SDK gets
the thinking as ``reasoning_content`` and the answer without it; Ollama's ``think``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.server.catalog import StaticCatalog, entry_for_file
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.ollama.shapes import capabilities
from tests.helpers.sdist_reasoning import template
from tests.helpers.served import serving

MODEL_ID = "thinker"
OPENS_THINK = (
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: <think>\n{% endif %}"
)
QUESTION: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of France?"}
]
MAX_TOKENS = 16
TIMEOUT = 600.0  # a failsafe for a busy machine, never a timing assertion


@pytest.fixture(scope="module")
def base_url(gemma_path: Path) -> Iterator[str]:
    worker = EngineWorker()
    gateway = Gateway(worker, StaticCatalog([entry_for_file(gemma_path, MODEL_ID)]))
    params = LoadParams(n_ctx=1024, chat_template=OPENS_THINK, n_parallel=2)
    gateway.load(str(gemma_path), MODEL_ID, params).wait(TIMEOUT)
    with serving(gateway, ServerConfig(port=0)) as runner:
        yield f"http://127.0.0.1:{runner.port}"


@pytest.fixture
def client(base_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0) as c:
        yield c


def _ask(client: openai.OpenAI, **extra: Any) -> tuple[str, str, int]:
    answer = client.chat.completions.create(
        model=MODEL_ID,
        messages=QUESTION,
        max_tokens=MAX_TOKENS,
        temperature=0.0,
        extra_body=extra,
        timeout=TIMEOUT,
    )
    message = answer.choices[0].message
    reasoning = (message.model_extra or {}).get("reasoning_content") or ""
    assert answer.usage is not None
    return reasoning, message.content or "", answer.usage.completion_tokens


def test_a_thinking_budget_ends_the_thinking_and_the_answer_follows(
    client: openai.OpenAI,
) -> None:
    unlimited, content, _ = _ask(client)
    assert unlimited and not content  # the model alone never closes its thinking
    reasoning, content, used = _ask(client, thinking_budget_tokens=4)
    assert reasoning and content, (reasoning, content)
    assert unlimited.startswith(reasoning)  # the model's own first thinking tokens
    assert len(reasoning) < len(unlimited)
    assert "</think>" not in content  # (the base model goes on with a transcript after it)
    assert "<think>" not in reasoning and "</think>" not in reasoning
    assert used == MAX_TOKENS


def test_streamed_reasoning_comes_first_and_never_in_the_content(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=MODEL_ID,
        messages=QUESTION,
        max_tokens=MAX_TOKENS,
        temperature=0.0,
        stream=True,
        extra_body={"thinking_budget_tokens": 4},
        timeout=TIMEOUT,
    )
    kinds: list[str] = []
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if (delta.model_extra or {}).get("reasoning_content"):
            kinds.append("reasoning")
        if delta.content:
            assert "</think>" not in delta.content
            kinds.append("content")
    assert "reasoning" in kinds and "content" in kinds
    assert kinds.index("content") > max(i for i, k in enumerate(kinds) if k == "reasoning")


def test_effort_none_on_a_template_without_a_switch_answers_at_once(
    client: openai.OpenAI,
) -> None:
    reasoning, content, _ = _ask(client, reasoning_effort="none")
    assert not reasoning and content


def test_ollama_think_false_answers_without_thinking_and_true_thinks(base_url: str) -> None:
    body = {
        "model": MODEL_ID,
        "messages": QUESTION,
        "stream": False,
        "options": {"temperature": 0, "num_predict": MAX_TOKENS},
    }
    with httpx.Client(base_url=base_url, timeout=TIMEOUT) as http:
        off = http.post("/api/chat", json={**body, "think": False})
        assert off.status_code == 200, off.text
        assert not off.json()["message"].get("thinking") and off.json()["message"]["content"]
        on = http.post("/api/chat", json={**body, "think": True})
        assert on.status_code == 200, on.text
        assert on.json()["message"]["thinking"]
        bad = http.post("/api/chat", json={**body, "think": "maximal"})
        assert bad.status_code == 400, bad.text
        assert "think" in bad.json()["error"]


@pytest.mark.parametrize(
    ("name", "thinks"),
    [
        ("openai-gpt-oss-120b", True),
        ("Qwen-Qwen3-0.6B", True),
        ("CohereForAI-c4ai-command-r7b-12-2024-tool_use", True),
        ("meta-llama-Llama-3.1-8B-Instruct", False),
    ],
)
def test_ollama_lists_thinking_for_every_known_thinking_format(name: str, thinks: bool) -> None:
    info = SimpleNamespace(has_fim=False, chat_template=template(name))
    assert ("thinking" in capabilities(info, embedding_only=False)) is thinks  # type: ignore[arg-type]
