"""/v1/responses on the scripted model: reasoning items and their events, a failure in the
middle of a stream (``error`` and ``response.failed``), the store's bounds through the routes,
and hostile input: every bad body, id or item is a clean 4xx in OpenAI's shape, never a 500,
nothing outside EMBER_HOME is read, and the server keeps answering."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from app.engine.templates import RenderedPrompt
from app.engine.types import ChatRequest, LoadParams, LoadRequest
from app.engine.worker import EngineWorker
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.responses.store import ResponseKeeper, StoreLimits
from app.server.runner import ServerRunner
from tests.helpers.scripted_model import ScriptedModel
from tests.helpers.served import serving

MODEL = "thinker"
BROKEN = "broken"
PIECES = ("<think>", "Hm.", "</think>", "Hi!")


SLOW = "slow"
EFFORTS: list[str | None] = []  # each chat request's reasoning_effort, as the engine saw it


class _Model(ScriptedModel):
    """Writes ``<think>Hm.</think>Hi!`` and ends; the ``broken`` one fails after two tokens,
    the ``slow`` one writes 20 tokens a second until its max_output_tokens."""

    def __init__(self, request: LoadRequest, _progress: object = None) -> None:
        if request.model_id == SLOW:
            super().__init__(request, tokens_per_second=20)
        else:
            super().__init__(request, pieces=PIECES, eog_after=4)

    def render_chat(self, request: ChatRequest) -> RenderedPrompt:
        EFFORTS.append(request.reasoning_effort)
        return super().render_chat(request)

    def decode(self) -> int:
        if self.model_id == BROKEN and self.decodes >= 3:
            raise RuntimeError("ggml_abort at /home/build/llama.cpp/ggml.c:1234")
        return super().decode()


@pytest.fixture(scope="module")
def runner() -> Iterator[ServerRunner]:
    worker = EngineWorker(model_factory=_Model)
    gateway = Gateway(worker)
    gateway.load("thinker.gguf", MODEL, LoadParams(n_ctx=4096)).wait(30)
    with serving(gateway, ServerConfig(port=0)) as runner:
        yield runner


@pytest.fixture
def http(runner: ServerRunner) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{runner.port}", timeout=60) as c:
        yield c


@pytest.fixture
def client(runner: ServerRunner) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=runner.base_url, api_key="unused", max_retries=0) as c:
        yield c


def keeper_of(runner: ServerRunner) -> ResponseKeeper:
    server = runner._server
    assert server is not None
    app: Any = server.config.app  # the FastAPI app create_app built
    keeper: ResponseKeeper = app.state.responses
    return keeper


def error_of(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert "Traceback" not in r.text and "/home/" not in r.text
    return dict(body["error"])


def test_reasoning_comes_back_as_a_reasoning_item(client: openai.OpenAI) -> None:
    EFFORTS.clear()
    r = client.responses.create(model=MODEL, input="Hi", reasoning={"effort": "low"})
    assert EFFORTS == ["low"]  # reasoning.effort reaches the engine's ChatRequest
    reasoning, message = r.output
    assert reasoning.type == "reasoning" and reasoning.id.startswith("rs_")
    assert reasoning.content is not None and reasoning.content[0].text == "Hm."
    assert message.type == "message" and r.output_text == "Hi!"
    assert r.reasoning is not None and r.reasoning.effort == "low"
    assert r.usage is not None and r.usage.output_tokens_details.reasoning_tokens == 1
    events = list(client.responses.create(model=MODEL, input="Hi", stream=True))
    assert [e.type for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert [e.output_index for e in events[2:14]] == [0] * 6 + [1] * 6  # type: ignore[union-attr]
    # reasoning resent as it came back is accepted, and not rendered into the prompt
    resent: Any = [*(i.model_dump() for i in r.output), {"role": "user", "content": "More"}]
    again = client.responses.create(model=MODEL, input=resent)
    assert again.output_text == "Hi!"


def test_a_failure_mid_stream_is_an_error_event_and_response_failed(runner: ServerRunner) -> None:
    runner.gateway.load("broken.gguf", BROKEN, LoadParams(n_ctx=4096)).wait(30)
    body = {"model": BROKEN, "input": "Hi", "stream": True}
    with httpx.Client(base_url=f"http://127.0.0.1:{runner.port}", timeout=60) as http:
        with http.stream("POST", "/v1/responses", json=body) as r:
            assert r.status_code == 200
            frames = [f for f in r.read().decode().split("\n\n") if f.startswith("event:")]
        events = [json.loads(f.split("\ndata: ", 1)[1]) for f in frames]
        kinds = [e["type"] for e in events]
        assert kinds[:2] == ["response.created", "response.in_progress"]
        assert kinds[-2:] == ["error", "response.failed"]
        assert events[-2]["code"] == "engine_crashed" and "ggml.c" not in frames[-2]
        failed = events[-1]["response"]
        assert failed["status"] == "failed" and failed["error"]["code"] == "engine_crashed"
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        # a failed response is not stored
        assert http.get(f"/v1/responses/{failed['id']}").status_code == 404
        assert http.get("/health").status_code == 200


def test_the_store_is_bounded(runner: ServerRunner, http: httpx.Client) -> None:
    store = keeper_of(runner).store
    store.limits = StoreLimits(max_count=3)
    try:
        ids: list[str] = []
        for previous in (None, 0, None, None):  # A, B continuing A, C, D
            body = {"model": MODEL, "input": "Hi", "previous_response_id": None}
            if previous is not None:
                body["previous_response_id"] = ids[previous]
            r = http.post("/v1/responses", json=body)
            assert r.status_code == 200, r.text
            ids.append(r.json()["id"])
        assert [http.get(f"/v1/responses/{i}").status_code for i in ids] == [404, 200, 200, 200]
        # B lost its conversation's start: continuing it says which response is gone
        again = {"model": MODEL, "input": "x", "previous_response_id": ids[1]}
        error = error_of(http.post("/v1/responses", json=again), 404)
        assert ids[0] in error["message"] and error["param"] == "previous_response_id"
    finally:
        store.limits = StoreLimits()


def test_remote_models_are_refused_with_a_400(http: httpx.Client) -> None:
    error = error_of(http.post("/v1/responses", json={"model": "lab::big", "input": "Hi"}), 400)
    assert error["code"] == "model_not_supported" and "/v1/chat/completions" in error["message"]


HOSTILE_BODIES: list[tuple[Any, str | None]] = [
    ({"model": MODEL}, "input"),
    ({"model": MODEL, "input": []}, "input"),
    ({"model": MODEL, "input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]"),
    ({"model": MODEL, "input": [{"type": "computer_call_output", "call_id": "c"}]}, "input[0]"),
    ({"model": MODEL, "input": [{"type": {"nested": 1}}]}, "input[0]"),
    ({"model": MODEL, "input": [{"no": "type"}]}, "input[0]"),
    ({"model": MODEL, "input": [17]}, "input[0]"),
    ({"model": MODEL, "input": [{"role": "tool", "content": "x"}]}, None),
    (
        {
            "model": MODEL,
            "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}],
        },
        None,
    ),
    (
        {
            "model": MODEL,
            "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}],
        },
        "input",
    ),
    (
        {
            "model": MODEL,
            "input": [
                {"role": "user", "content": [{"type": "input_image", "image_url": "data:x"}]}
            ],
        },
        None,
    ),
    ({"model": MODEL, "input": [{"type": "function_call", "name": "f"}]}, None),
    (
        {
            "model": MODEL,
            "input": [{"type": "function_call_output", "call_id": "c" * 300, "output": "x"}],
        },
        None,
    ),
    ({"model": MODEL, "input": "Hi", "tools": [{"type": "web_search"}]}, "tools"),
    ({"model": MODEL, "input": "Hi", "tools": [{"type": "function", "name": "bad name!"}]}, None),
    (
        {"model": MODEL, "input": "Hi", "tool_choice": {"type": "function", "name": "nope"}},
        "tool_choice",
    ),
    (
        {
            "model": MODEL,
            "input": "Hi",
            "text": {"format": {"type": "json_schema", "name": "x", "schema": {}}},
        },
        None,
    ),
    ({"model": MODEL, "input": "Hi", "text": {"format": {"type": "xml"}}}, None),
    ({"model": MODEL, "input": "Hi", "max_output_tokens": 0}, "max_output_tokens"),
    ({"model": MODEL, "input": "Hi", "temperature": 9}, "temperature"),
    ({"model": MODEL, "input": "Hi", "reasoning": {"effort": "extreme"}}, None),
    ({"model": MODEL, "input": "Hi", "background": True}, "background"),
    ({"model": MODEL, "input": "Hi", "conversation": "conv_1"}, "conversation"),
    ({"model": MODEL, "input": "Hi", "metadata": {str(i): "v" for i in range(17)}}, "metadata"),
    (
        {"model": MODEL, "input": "Hi", "previous_response_id": "../../../etc/passwd"},
        "previous_response_id",
    ),
    (
        {"model": MODEL, "input": "Hi", "previous_response_id": "resp_" + "a" * 65},
        "previous_response_id",
    ),
    (
        {"model": MODEL, "input": "Hi", "previous_response_id": "resp_x'; DROP TABLE responses;--"},
        None,
    ),
    ("[1, 2]", None),
    ("not json", None),
]


@pytest.mark.parametrize(("body", "param"), HOSTILE_BODIES)
def test_hostile_bodies_are_clean_400s(http: httpx.Client, body: Any, param: str | None) -> None:
    content = body if isinstance(body, str) else json.dumps(body)
    r = http.post("/v1/responses", content=content, headers={"content-type": "application/json"})
    error = error_of(r, 400)
    assert error["type"] == "invalid_request_error"
    if param is not None:
        assert error["param"] == param


def test_deep_nesting_and_huge_items_are_400s(http: httpx.Client) -> None:
    deep = '{"model": "thinker", "input": ' + "[" * 3000 + "]" * 3000 + "}"
    r = http.post("/v1/responses", content=deep, headers={"content-type": "application/json"})
    assert "nested too deeply" in error_of(r, 400)["message"]
    nested: Any = "x"
    for _ in range(150):
        nested = {"a": nested}
    output = {"type": "function_call_output", "call_id": "c", "output": [nested]}
    error_of(http.post("/v1/responses", json={"model": MODEL, "input": [output]}), 400)
    huge = {"model": MODEL, "input": "word " * 600_000}  # 3 MB: past what 4,096 tokens can hold
    assert error_of(http.post("/v1/responses", json=huge), 400)["code"] == "context_length_exceeded"
    many = {"model": MODEL, "input": [{"role": "user", "content": "x"}] * 5000}
    assert error_of(http.post("/v1/responses", json=many), 400)["code"] == "context_length_exceeded"
    assert http.post("/v1/responses", json={"model": MODEL, "input": "Hi"}).status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/v1/responses/resp_doesnotexist",
        "/v1/responses/resp_doesnotexist/input_items",
    ],
)
def test_unknown_ids_are_404s(http: httpx.Client, path: str) -> None:
    assert error_of(http.get(path), 404)["code"] == "response_not_found"
    if not path.endswith("input_items"):
        assert error_of(http.delete(path), 404)["code"] == "response_not_found"
    missing = {"model": MODEL, "input": "Hi", "previous_response_id": "resp_doesnotexist"}
    assert (
        error_of(http.post("/v1/responses", json=missing), 404)["param"] == "previous_response_id"
    )


def test_path_like_ids_read_nothing_outside_ember_home(http: httpx.Client, tmp_path: Path) -> None:
    secret = tmp_path / "secret.db"
    secret.write_text("TOP SECRET")
    for response_id in (
        "..%2F..%2F..%2Fetc%2Fpasswd",
        "%2e%2e",
        str(secret).replace("/", "%2F"),
        "resp_x%00",
        "resp_" + "a" * 5000,
        "%F0%9F%94%A5",
    ):
        for method, suffix in (("GET", ""), ("DELETE", ""), ("GET", "/input_items")):
            r = http.request(method, f"/v1/responses/{response_id}{suffix}")
            assert r.status_code in (400, 404), (response_id, r.text)
            error_of(r, r.status_code)
            assert "TOP SECRET" not in r.text
    error_of(http.get("/v1/responses/resp_abc/input_items?limit=1000"), 400)
    error_of(http.get("/v1/responses/resp_abc/input_items?order=sideways"), 400)
    assert http.get("/health").status_code == 200


def test_a_queued_stream_gets_headers_and_keep_alives(
    runner: ServerRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.server import jobs

    runner.gateway.load("slow.gguf", SLOW, LoadParams(n_ctx=4096, n_parallel=1)).wait(30)
    monkeypatch.setattr(jobs, "QUEUE_DEADLINE", 0.3)
    monkeypatch.setattr(jobs, "KEEPALIVE_AFTER", 0.3)
    base = f"http://127.0.0.1:{runner.port}"
    long = {"model": SLOW, "input": "Hi", "stream": True, "max_output_tokens": 100_000}
    short = {"model": SLOW, "input": "Hi", "stream": True, "max_output_tokens": 3}
    with (
        httpx.Client(base_url=base, timeout=60) as http,
        httpx.Client(base_url=base, timeout=60) as other,
        http.stream("POST", "/v1/responses", json=long) as running,
    ):
        long_lines = running.iter_lines()  # kept: a dropped generator closes the response
        next(long_lines)  # the long answer holds the one slot
        with other.stream("POST", "/v1/responses", json=short) as queued:
            assert queued.status_code == 200
            lines = queued.iter_lines()
            head = [line for line in (next(lines) for _ in range(7)) if line]
            assert [line for line in head if not line.startswith("data: ")] == [
                "event: response.created",
                "event: response.in_progress",
                ": waiting for the engine",
            ]
            running.close()  # the long answer is cancelled; the queued one runs
            rest = [line for line in lines if line]
    assert rest[-2] == "event: response.incomplete", rest
    assert sum(line == "event: response.output_text.delta" for line in rest) == 3


def test_an_image_for_a_model_without_a_projector_names_the_input(http: httpx.Client) -> None:
    import base64
    import io

    from PIL import Image

    png = io.BytesIO()
    Image.new("RGB", (8, 8)).save(png, "PNG")
    url = "data:image/png;base64," + base64.b64encode(png.getvalue()).decode()
    part = {"type": "input_image", "image_url": url}
    body = {"model": MODEL, "input": [{"role": "user", "content": [part]}]}
    error = error_of(http.post("/v1/responses", json=body), 400)
    assert error["code"] == "model_not_vision" and error["param"] == "input"
