"""Ollama's API on Ember's server, through the official `ollama` client and raw HTTP, against
real uvicorn on 127.0.0.1 and the real Gemma 3 270M model (the ``served`` fixture: loaded as
``gemma``, with a library holding ``test/gemma-copy`` and ``test/gemma-link``)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import ollama
import openai
import pytest

from app.engine.types import ChatRequest, Finished
from app.server import convert
from app.server.convert import ChatPlan
from app.server.ollama.answers import ChatAnswer
from tests.helpers.served import N_CTX, Served, ollama_names

COPY = "hf.co/test/gemma-copy:Q4_K_M"  # the library's test/gemma-copy/gemma-copy.gguf


@pytest.fixture
def oc(served: Served) -> Iterator[ollama.Client]:
    with ollama.Client(host=served.root) as c:
        yield c


# ---- 1. who is there, which models ----------------------------------------------------------


def test_root_and_version_answer_like_ollama(http: httpx.Client) -> None:
    assert http.get("/").text == "Ollama is running"
    assert http.head("/").status_code == 200
    version = http.get("/api/version").json()["version"]
    assert [int(p) for p in version.split(".")] >= [0, 5, 0]


def test_tags_show_and_ps_list_the_library_by_name(oc: ollama.Client) -> None:
    listed = {m.model: m for m in oc.list().models}
    assert {"gemma:Q4_K_M", COPY} <= set(listed)
    # the link is the same file as the copy (a hard link of one file): one entry, one name
    assert "hf.co/test/gemma-link:Q4_K_M" not in listed
    copy = listed[COPY]
    assert copy.size and copy.size > 100_000_000
    assert copy.details is not None
    assert copy.details.family == "gemma3"
    assert copy.details.quantization_level == "Q4_K_M"
    assert copy.details.parameter_size == "270M"
    assert len(copy.digest or "") == 64

    shown = oc.show(COPY)
    assert shown.capabilities == ["completion", "tools"]  # no FIM tokens, no <think>
    assert shown.modelinfo is not None
    assert shown.modelinfo["general.architecture"] == "gemma3"
    assert shown.modelinfo["tokenizer.ggml.tokens"] is None  # the vocabulary only when verbose

    running = oc.ps().models
    assert [m.model for m in running] == ["gemma:Q4_K_M"]
    assert running[0].context_length == N_CTX


def test_unknown_model_is_ollama_404(oc: ollama.Client, http: httpx.Client) -> None:
    with pytest.raises(ollama.ResponseError) as e:
        oc.show("nope:latest")
    assert e.value.status_code == 404
    assert "model 'nope:latest' not found" in e.value.error
    answer = http.post("/api/chat", json={"model": "nope", "messages": [{"role": "user"}]})
    assert answer.status_code == 404
    assert set(answer.json()) == {"error"}


def test_names_round_trip_through_both_apis_and_keep_alive_0_unloads(
    served: Served, oc: ollama.Client, client: openai.OpenAI, http: httpx.Client
) -> None:
    """A name /api/tags lists is accepted by the OpenAI API too (it loads the model just in
    time); an empty /api/generate loads, keep_alive 0 unloads."""
    assert COPY in ollama_names(oc)
    vectors = client.embeddings.create(model=COPY, input="hello")
    assert len(vectors.data[0].embedding) == 640
    assert "hf.co/test/gemma-copy:Q4_K_M" in [m.model for m in oc.ps().models]

    gone = oc.generate(model=COPY, keep_alive=0)
    assert gone.done_reason == "unload"
    assert COPY not in [m.model for m in oc.ps().models]

    # any case; no tag: Q4_K_M; num_ctx sets the context of the load it causes
    loaded = oc.chat(model="HF.CO/test/gemma-copy", messages=[], options={"num_ctx": 1536})
    assert loaded.done and loaded.done_reason == "load"
    running = {m["model"]: m for m in http.get("/api/ps").json()["models"]}
    assert running[COPY]["context_length"] == 1536
    messages = [{"role": "user", "content": "Hi"}]
    parts = list(
        oc.chat(
            model=COPY, messages=messages, keep_alive="0s", options={"num_predict": 1}, stream=True
        )
    )
    assert parts[-1].done  # the answer, then the model is unloaded
    assert [m.model for m in oc.ps().models] == ["gemma:Q4_K_M"]


# ---- 2. chat and generate -------------------------------------------------------------------


def test_chat_streams_ndjson_and_answers_whole(oc: ollama.Client, http: httpx.Client) -> None:
    messages = [{"role": "user", "content": "Say hi"}]
    options = {"num_predict": 3, "temperature": 0, "seed": 7}
    parts = list(oc.chat(model="gemma", messages=messages, options=options, stream=True))
    assert parts[-1].done and not any(p.done for p in parts[:-1])
    final = parts[-1]
    assert final.done_reason == "length"  # num_predict is the engine's max_tokens
    assert final.eval_count == 3
    assert final.prompt_eval_count and final.prompt_eval_count > 0
    assert final.total_duration and final.eval_duration and final.prompt_eval_duration
    assert final.total_duration >= final.eval_duration  # nanoseconds, all of them
    streamed = "".join(p.message.content or "" for p in parts)

    whole = oc.chat(model="gemma", messages=messages, options=options, stream=False)
    assert whole.message.role == "assistant"
    assert whole.message.content == streamed  # temperature 0: the same answer
    assert whole.eval_count == 3

    with http.stream(
        "POST", "/api/chat", json={"model": "gemma", "messages": messages, "options": options}
    ) as raw:
        assert raw.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in raw.iter_lines() if line]
    assert lines[-1]["done"] is True and lines[-1]["message"] == {
        "role": "assistant",
        "content": "",
    }
    assert all(set(line) >= {"model", "created_at", "message", "done"} for line in lines)


def test_chat_and_generate_plan_their_job_off_the_event_loop(
    oc: ollama.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning a chat reads the model's header and may build tool grammars: never on the
    event loop, which every other request shares."""
    on_loop: list[bool] = []
    real = convert.plan_chat

    def spy(*args: Any) -> ChatPlan:
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:
            on_loop.append(False)
        return real(*args)

    monkeypatch.setattr(convert, "plan_chat", spy)
    options = {"num_predict": 1, "temperature": 0}
    oc.chat(model="gemma", messages=[{"role": "user", "content": "Hi"}], options=options)
    oc.generate(model="gemma", prompt="Hi", options=options)
    assert on_loop == [False, False]


def test_generate_raw_and_templated_with_system(oc: ollama.Client) -> None:
    raw = oc.generate(
        model="gemma", prompt="One, two,", raw=True, options={"num_predict": 2, "temperature": 0}
    )
    assert raw.done_reason == "length" and raw.eval_count == 2
    assert raw.response
    templated = oc.generate(
        model="gemma",
        prompt="Hi",
        system="Answer in French.",
        options={"num_predict": 2, "temperature": 0},
    )
    # the template wraps the prompt (and the system prompt): more tokens than the raw prompt
    assert templated.prompt_eval_count and raw.prompt_eval_count
    assert templated.prompt_eval_count > 6


def test_stop_option_ends_the_answer(oc: ollama.Client) -> None:
    options: dict[str, Any] = {"num_predict": 6, "temperature": 0}
    first = oc.generate(model="gemma", prompt="1, 2, 3,", raw=True, options=options).response
    words = (first or "").split()
    assert len(words) >= 2
    stopped = oc.generate(
        model="gemma", prompt="1, 2, 3,", raw=True, options={**options, "stop": [words[1]]}
    )
    assert stopped.done_reason == "stop"
    assert words[1] not in (stopped.response or "")


def test_format_schema_constrains_the_answer(oc: ollama.Client) -> None:
    schema = {
        "type": "object",
        "properties": {"yes": {"type": "boolean"}},
        "required": ["yes"],
        "additionalProperties": False,
    }
    answer = oc.chat(
        model="gemma",
        messages=[{"role": "user", "content": "Is the sky blue?"}],
        format=schema,
        options={"num_predict": 12, "temperature": 0},
    )
    assert isinstance(json.loads(answer.message.content or "")["yes"], bool)


def test_tool_calls_arrive_with_arguments_as_objects() -> None:
    """What the model writes as a call becomes Ollama's tool_calls, arguments a JSON object
    (the same parser as the OpenAI routes; no small model calls a tool on cue)."""
    plan = ChatPlan(ChatRequest([]), tool_mode="auto", tool_names=frozenset({"weather"}))
    answer = ChatAnswer("m", 0.0, 0.0, plan)
    text = '<tool_call>{"name": "weather", "arguments": {"city": "Oslo", "days": 2}}</tool_call>'
    lines = [*answer.delta(text[:20]), *answer.delta(text[20:])]
    lines += answer.finish(Finished("job", "stop"))
    calls = [c for line in lines for c in line["message"].get("tool_calls", [])]
    assert calls == [
        {"function": {"index": 0, "name": "weather", "arguments": {"city": "Oslo", "days": 2}}}
    ]
    assert lines[-1]["done"] is True and lines[-1]["done_reason"] == "stop"


def test_earlier_tool_calls_and_results_are_accepted(oc: ollama.Client) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    messages: list[Any] = [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "weather", "arguments": {"city": "Oslo"}}}],
        },
        {"role": "tool", "tool_name": "weather", "content": "Sunny, 20 C"},
    ]
    answer = oc.chat(model="gemma", messages=messages, tools=tools, options={"num_predict": 2})
    assert answer.done and answer.prompt_eval_count and answer.prompt_eval_count > 20


# ---- 3. embeddings --------------------------------------------------------------------------


def test_embed_and_the_older_embeddings(oc: ollama.Client) -> None:
    both = oc.embed(model="gemma", input=["hello", "world"])
    assert len(both.embeddings) == 2 and len(both.embeddings[0]) == 640
    assert both.prompt_eval_count and both.prompt_eval_count >= 2
    short = oc.embed(model="gemma", input="hello", dimensions=8)
    assert len(short.embeddings[0]) == 8
    assert sum(x * x for x in short.embeddings[0]) == pytest.approx(1.0)
    older = oc.embeddings(model="gemma", prompt="hello")
    assert older.embedding == pytest.approx(both.embeddings[0])
    assert oc.embed(model="gemma", input=[]).embeddings == []  # loads, embeds nothing


# ---- hostile input --------------------------------------------------------------------------

HOSTILE: list[tuple[str, Any]] = [
    ("/api/chat", b"{not json"),
    ("/api/chat", b"[1, 2]"),
    ("/api/chat", {"model": 5, "messages": []}),
    ("/api/chat", {"model": "gemma", "messages": "hi"}),
    ("/api/chat", {"model": "gemma", "messages": [{"role": "wizard", "content": "x"}]}),
    (
        "/api/chat",
        {"model": "gemma", "messages": [{"role": "user"}], "options": {"temperature": "hot"}},
    ),
    (
        "/api/chat",
        {"model": "gemma", "messages": [{"role": "user"}], "options": {"num_predict": 10**30}},
    ),
    ("/api/chat", {"model": "gemma", "messages": [{"role": "user"}], "options": {"num_ctx": -1}}),
    ("/api/chat", {"model": "gemma", "messages": [{"role": "user"}], "options": {"seed": 2**70}}),
    (
        "/api/chat",
        {"model": "gemma", "messages": [{"role": "user"}], "options": {"stop": ["x"] * 1000}},
    ),
    ("/api/chat", {"model": "gemma", "messages": [{"role": "user"}], "options": {"top_p": 7}}),
    ("/api/chat", {"model": "gemma", "messages": [{"role": "user"}], "keep_alive": "forever"}),
    ("/api/chat", {"model": "gemma", "messages": [{"role": "user"}], "format": "xml"}),
    (
        "/api/chat",
        {
            "model": "gemma",
            "messages": [{"role": "user"}],
            "format": {
                "type": "object",
                "properties": {"a": {"type": "string", "pattern": "a{100000000}"}},
            },
        },
    ),
    (
        "/api/chat",
        {"model": "gemma", "messages": [{"role": "user", "content": "x", "images": ["aGk="]}]},
    ),
    (
        "/api/chat",
        {
            "model": "gemma",
            "messages": [{"role": "user"}],
            "tools": [{"type": "function", "function": {"name": "bad name!"}}],
        },
    ),
    ("/api/chat", {"model": "gemma", "messages": [{"role": "user"}], "stream": "sometimes"}),
    ("/api/generate", {"model": "gemma", "prompt": "x", "template": "{{ .Prompt }}"}),
    ("/api/generate", {"model": "gemma", "prompt": "x", "context": [1, 2, 3]}),
    ("/api/generate", {"model": "gemma", "prompt": "x", "images": ["aGk="]}),
    ("/api/generate", {"model": "gemma", "prompt": "x", "suffix": "y"}),
    (
        "/api/generate",
        {
            "model": "gemma",
            "prompt": "x",
            "raw": True,
            "format": {
                "type": "object",
                "properties": {"a": {"type": "string", "pattern": "a{100000000}"}},
            },
        },
    ),
    ("/api/generate", {"model": "", "prompt": "x"}),
    ("/api/embed", {"model": "gemma", "input": [1, 2]}),
    ("/api/embed", {"model": "gemma", "input": ["x"] * 3000}),
    ("/api/embed", {"model": "gemma", "input": "x", "dimensions": 100000}),
    ("/api/embed", {"model": "gemma", "input": ["ok", ""]}),
    ("/api/embeddings", {"model": "gemma", "prompt": {"a": 1}}),
    ("/api/show", {"model": ["gemma"]}),
    ("/api/show", {}),
]


@pytest.mark.parametrize(("path", "body"), HOSTILE)
def test_hostile_bodies_are_400_and_the_server_stays_up(
    http: httpx.Client, path: str, body: Any
) -> None:
    if isinstance(body, bytes):
        answer = http.post(path, content=body, headers={"content-type": "application/json"})
    else:
        answer = http.post(path, json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()
    assert set(error) == {"error"} and isinstance(error["error"], str) and error["error"]
    assert http.get("/api/version").status_code == 200


def test_ollama_requests_are_in_the_request_log(served: Served, http: httpx.Client) -> None:
    # records are written once the response is out: wait for these two, not earlier ones
    seen: list[Any] = []
    both = threading.Event()

    def on_record(record: Any) -> None:
        if record.path in ("/api/chat", "/api/embed"):
            seen.append(record)
            if len(seen) == 2:
                both.set()

    unsubscribe = served.runner.request_log.subscribe(on_record)
    try:
        chat = {"model": "nope", "messages": [{"role": "user", "content": "x"}]}
        http.post("/api/chat", json=chat)
        http.post("/api/embed", json={"model": "gemma", "input": "hello"})
        assert both.wait(60)
    finally:
        unsubscribe()
    missing = next(r for r in seen if r.path == "/api/chat")
    assert missing.status == 404 and missing.error and "not found" in missing.error
    embedded = next(r for r in seen if r.path == "/api/embed")
    assert embedded.status == 200 and embedded.model == "gemma" and embedded.prompt_tokens
