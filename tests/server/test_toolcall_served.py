"""Tool calls in each family's own format through the real server path: uvicorn on 127.0.0.1,
the real EngineWorker and gateway, the official ``openai`` SDK. The scripted model stands in
for llama.cpp (it writes a given answer, token by token) and carries a real chat template
from the llama-cpp-python sdist, so the format is the one the server detects from it.

And issue 26's attack: an answer of ``<tool_call>`` + a code fence + 4,000 spaces (and the
like in every format) comes back as the text it is, while ``/health`` keeps answering."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest

from app.engine.types import LoadedModel, LoadParams, LoadRequest, SamplingParams
from app.engine.worker import EngineWorker
from app.server.catalog import StaticCatalog, entry_for_file
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.toolcalls import BY_NAME
from tests.helpers.scripted_model import ScriptedModel
from tests.helpers.sdist_templates import template
from tests.helpers.served import serving
from tests.helpers.toolcall_families import FAMILIES, TOOLS

ANSWERS = {
    "devstral": (
        "unsloth-mistral-Devstral-Small-2507",
        'Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 2}'
        "[TOOL_CALLS]get_time[ARGS]{}",
    ),
    "qwen3-coder": ("Qwen3-Coder", FAMILIES["qwen3_coder"].output),
    "gpt-oss": ("openai-gpt-oss-120b", FAMILIES["harmony"].output),
}
ATTACK = "```" + " " * 4000


def attack_for(name: str) -> str:
    opener = next((t for t in BY_NAME[name].triggers(["get_weather"]) if "(" not in t), "x\n")
    return opener.replace("\\", "") + ATTACK


ATTACKS = {f"attack-{name}": (FAMILIES[name].templates[0], attack_for(name)) for name in FAMILIES}


# Markers that are control tokens in their model's vocabulary: llama.cpp renders them only
# when asked for special tokens (ChatRequest.special_tokens), as one token each
CONTROL = (
    "[TOOL_CALLS]", "[ARGS]", "<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|call|>",
    "<|constrain|>", "<|return|>",
)  # fmt: skip
_CONTROL_RE = "|".join(re.escape(c) for c in CONTROL)


def token_pieces(text: str) -> tuple[str, ...]:
    """The answer as a model's tokens might bring it (a few characters each, control tokens
    whole)."""
    return tuple(re.findall(rf"{_CONTROL_RE}|\s|\w{{1,4}}|[^\w\s]{{1,3}}", text))


SAMPLING: dict[str, SamplingParams] = {}  # each model's last request's sampling


class TemplatedModel(ScriptedModel):
    """The scripted model with a real chat template: it writes ``answer``, then stops."""

    def __init__(self, request: LoadRequest, source: str, answer: str) -> None:
        pieces = token_pieces(answer)
        super().__init__(request, pieces=pieces, eog_after=len(pieces))
        self.source = source

    def describe(self) -> LoadedModel:
        return dataclasses.replace(super().describe(), chat_template=self.source)

    def piece(self, token: int, special: bool = False) -> bytes:
        text = super().piece(token, special)
        return text if special or text.decode() not in CONTROL else b""

    def new_sampler(self, sampling: SamplingParams, seed: int) -> Any:
        SAMPLING[self.model_id] = sampling
        return super().new_sampler(sampling, seed)


def factory() -> Callable[[LoadRequest, Callable[[float], bool]], ScriptedModel]:
    def make(request: LoadRequest, progress: Callable[[float], bool]) -> ScriptedModel:
        progress(1.0)
        name, answer = {**ANSWERS, **ATTACKS}[request.model_id or ""]
        return TemplatedModel(request, template(name), answer)

    return make


@dataclass
class Server:
    url: str
    client: openai.OpenAI


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("toolcalls")
    ids = [*ANSWERS, *ATTACKS]
    catalog = StaticCatalog([entry_for_file(root / f"{m}.gguf", m) for m in ids])
    worker = EngineWorker(model_factory=factory())
    gateway = Gateway(worker, catalog, LoadParams(n_ctx=32768))
    with serving(gateway, ServerConfig(port=0)) as runner:
        url = f"http://127.0.0.1:{runner.port}"
        yield Server(url, openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0))


def ask(server: Server, model: str, **extra: Any) -> Any:
    create: Any = server.client.chat.completions.create  # (the SDK's overloads, typed)
    return create(
        model=model,
        messages=[{"role": "user", "content": "Weather in Paris, and the time?"}],
        tools=TOOLS,
        tool_choice="auto",
        **extra,
    )


def test_a_devstral_answer_comes_back_as_tool_calls(server: Server) -> None:
    choice = ask(server, "devstral").choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Sure."
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls]
    assert calls == [("get_weather", {"city": "Paris", "days": 2}), ("get_time", {})]
    assert all(c.id.startswith("call_") for c in choice.message.tool_calls)
    # the calls' arguments were constrained by the family's lazy grammar
    sampling = SAMPLING["devstral"]
    assert sampling.grammar_triggers == (r"\[TOOL_CALLS\]",)
    assert sampling.grammar is not None and '"[TOOL_CALLS]"' in sampling.grammar


@pytest.mark.parametrize("model", list(ANSWERS))
def test_streamed_calls_come_name_first_then_arguments(server: Server, model: str) -> None:
    content, reasoning = "", ""
    names: dict[int, str] = {}
    arguments: dict[int, str] = {}
    finish = None
    for chunk in ask(server, model, stream=True):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        reasoning += getattr(delta, "reasoning_content", None) or ""
        for call in delta.tool_calls or []:
            if call.function and call.function.name:
                assert call.index not in names and call.id, "the name comes first, with the id"
                names[call.index] = call.function.name
            elif call.function and call.function.arguments:
                assert call.index in names, "arguments come after the name"
                arguments[call.index] = arguments.get(call.index, "") + call.function.arguments
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls"
    calls = [(names[i], json.loads(arguments.get(i) or "{}")) for i in sorted(names)]
    family = {"devstral": "mistral", "qwen3-coder": "qwen3_coder", "gpt-oss": "harmony"}[model]
    assert calls == FAMILIES[family].calls
    if model == "gpt-oss":
        assert reasoning == FAMILIES["harmony"].reasoning and not content


@pytest.mark.parametrize("model", list(ATTACKS))
def test_a_call_that_never_closes_is_answered_as_text_while_health_answers(
    server: Server, model: str
) -> None:
    done = threading.Event()
    result: dict[str, Any] = {}

    def chat() -> None:
        try:
            result["answer"] = ask(server, model).choices[0].message
        finally:
            done.set()

    thread = threading.Thread(target=chat)
    thread.start()
    health = 0
    while not done.is_set() or health == 0:
        assert httpx.get(server.url + "/health", timeout=60).status_code == 200
        health += 1
    thread.join()
    message = result["answer"]
    assert not message.tool_calls
    # (after a prompt that opens the thinking, as DeepSeek R1's, it is all reasoning)
    reasoning = getattr(message, "reasoning_content", None) or ""
    assert ((message.content or "") + reasoning).rstrip() == ATTACKS[model][1].rstrip()


def test_without_parallel_calls_one_call_is_constrained_and_returned(server: Server) -> None:
    """``parallel_tool_calls: false``: the lazy grammar allows one call (a model that obeys
    it stops after it), and an answer that still holds two (no grammar applied) returns the
    first only, non-streaming and streaming alike."""
    choice = ask(server, "devstral", parallel_tool_calls=False).choices[0]
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls]
    assert calls == [("get_weather", {"city": "Paris", "days": 2})]
    assert choice.finish_reason == "tool_calls"
    single = SAMPLING["devstral"].grammar
    ask(server, "devstral")
    assert single is not None and single != SAMPLING["devstral"].grammar
    assert '( "[TOOL_CALLS]"' in single and ")+" not in single.splitlines()[0]
    names = [
        call.function.name
        for chunk in ask(server, "devstral", parallel_tool_calls=False, stream=True)
        for choice in chunk.choices
        for call in choice.delta.tool_calls or []
        if call.function and call.function.name
    ]
    assert names == ["get_weather"]
