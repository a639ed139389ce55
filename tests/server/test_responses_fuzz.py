"""Hostile /v1/responses bodies never get a 5xx: hypothesis builds malformed Responses bodies
(items of every type with wrong fields, odd numbers, deep values, schema bombs in text.format
and tools, odd ids) and sends them to the real app on real uvicorn; every answer is a 2xx or a
4xx in OpenAI's error shape, and the server keeps answering. The engine is the scripted model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from tests.helpers.fuzz import json_values, odd_numbers, schema_bombs
from tests.helpers.scripted_model import scripted_factory
from tests.helpers.served import serving

MODEL = "fuzz"

texts = st.one_of(st.text(max_size=40), json_values)
parts = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["input_text", "output_text", "refusal", "input_image", "x"])},
        optional={"text": texts, "refusal": texts, "image_url": texts, "file_id": texts},
    ),
    json_values,
)
items = st.one_of(
    st.fixed_dictionaries(
        {"role": st.one_of(st.sampled_from(["user", "system", "developer", "assistant"]), texts)},
        optional={
            "type": st.just("message"),
            "content": st.one_of(texts, st.lists(parts, max_size=3)),
        },
    ),
    st.fixed_dictionaries(
        {"type": st.just("function_call")},
        optional={"call_id": texts, "name": texts, "arguments": texts},
    ),
    st.fixed_dictionaries(
        {"type": st.just("function_call_output")},
        optional={"call_id": texts, "output": st.one_of(texts, st.lists(parts, max_size=3))},
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["reasoning", "item_reference", "web_search_call"])},
        optional={"id": texts, "summary": json_values, "content": json_values},
    ),
    json_values,
)
fields: dict[str, st.SearchStrategy[Any]] = {
    "model": st.one_of(st.just(MODEL), st.text(max_size=100), st.just("p::m"), json_values),
    "instructions": texts,
    "previous_response_id": st.one_of(
        st.sampled_from(["resp_nope", "../x", "resp_" + "a" * 70, "", "resp_a\x00"]), json_values
    ),
    "max_output_tokens": st.one_of(odd_numbers, json_values),
    "temperature": odd_numbers,
    "top_p": odd_numbers,
    "stream": st.one_of(st.booleans(), json_values),
    "store": st.one_of(st.booleans(), json_values),
    "parallel_tool_calls": st.one_of(st.booleans(), json_values),
    "tool_choice": st.one_of(
        st.sampled_from(["auto", "required", "none", {"type": "function", "name": "f"}]),
        json_values,
    ),
    "tools": st.one_of(
        json_values,
        st.builds(lambda s: [{"type": "function", "name": "f", "parameters": s}],
                  st.one_of(schema_bombs, json_values)),
    ),
    "text": st.one_of(
        json_values,
        st.builds(
            lambda s: {"format": {"type": "json_schema", "name": "x", "schema": s}},
            st.one_of(schema_bombs, json_values),
        ),
    ),
    "reasoning": st.one_of(st.fixed_dictionaries({"effort": texts}), json_values),
    "metadata": json_values,
    "include": json_values,
}  # fmt: skip
bodies = st.fixed_dictionaries(
    {"input": st.one_of(st.text(max_size=100), st.lists(items, max_size=4), json_values)},
    optional=fields,
)


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    worker = EngineWorker(model_factory=scripted_factory(eog_after=3))
    gateway = Gateway(worker)
    gateway.load("scripted", MODEL, LoadParams(n_ctx=4096)).wait(30)
    with serving(gateway, ServerConfig(port=0)) as runner:
        yield f"http://127.0.0.1:{runner.port}"


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=bodies)
def test_no_hostile_responses_body_gets_a_5xx(base: str, body: dict[str, Any]) -> None:
    with httpx.Client(base_url=base, timeout=60) as http:
        content = json.dumps(body)
        r = http.post(
            "/v1/responses", content=content, headers={"content-type": "application/json"}
        )
        assert r.status_code < 500, (r.status_code, r.text[:300])
        if r.status_code >= 400:
            error = r.json()["error"]
            assert set(error) == {"message", "type", "param", "code"} and error["message"]
        assert http.get("/health").status_code == 200
