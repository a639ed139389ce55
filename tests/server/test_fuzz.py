"""Hostile request bodies never get a 5xx: hypothesis builds malformed chat, completion and
embedding bodies (wrong types, huge and odd numbers, deep nesting, unicode, nulls, schema and
grammar bombs) and sends them to the real app on real uvicorn; every answer is a 2xx or a 4xx in
OpenAI's error shape, and the server keeps answering. The engine is the scripted model (the
real model's own bounds are proven in test_bounds_before_c.py)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.fuzz import json_values, odd_numbers, schema_bombs

MODEL = "fuzz"

fields: dict[str, st.SearchStrategy[Any]] = {
    "model": st.one_of(st.just(MODEL), st.text(max_size=300), st.just("p::m"), json_values),
    "messages": st.one_of(
        st.lists(
            st.fixed_dictionaries(
                {"role": st.one_of(st.sampled_from(["user", "system", "assistant", "tool"]),
                                   json_values),
                 "content": st.one_of(st.text(max_size=200), json_values)}
            ),
            max_size=3,
        ),
        json_values,
    ),
    "prompt": st.one_of(st.text(max_size=200), st.lists(st.integers(), max_size=5), json_values),
    "input": st.one_of(st.text(max_size=200), st.lists(st.text(max_size=20), max_size=3),
                       json_values),
    "max_tokens": st.one_of(odd_numbers, json_values),
    "temperature": st.one_of(odd_numbers, json_values),
    "top_p": odd_numbers,
    "n": odd_numbers,
    "stop": st.one_of(st.text(max_size=10), st.lists(st.text(max_size=5), max_size=6), json_values),
    "logit_bias": st.one_of(
        st.dictionaries(st.text(max_size=8), odd_numbers, max_size=3), json_values
    ),
    "stream": st.one_of(st.booleans(), json_values),
    "response_format": st.one_of(
        st.builds(lambda s: {"type": "json_schema", "json_schema": {"name": "x", "schema": s}},
                  st.one_of(schema_bombs, json_values)),
        json_values,
    ),
    "grammar": st.one_of(
        st.sampled_from(["root ::= " + "(" * 30000, 'root ::= "a"{0,99999}', "root ::= (", "",
                         "root ::= ( # c\r" + "(" * 30000, 'root ::= "a"{5,2}',
                         "root ::= r0\n" + "".join(f'r{i} ::= r{i + 1} "a" | r{i + 1} "b"\n'
                                                    for i in range(16)) + 'r16 ::= "c"']),
        json_values,
    ),
    "tools": st.one_of(json_values, st.builds(
        lambda s: [{"type": "function", "function": {"name": "f", "parameters": s}}],
        st.one_of(schema_bombs, json_values))),
    "tool_choice": st.one_of(st.sampled_from(["auto", "required", "none"]), json_values),
    "seed": odd_numbers,
}  # fmt: skip
bodies = st.fixed_dictionaries(
    {}, optional={k: v for k, v in fields.items()}
)  # every field may be there or not


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    path=st.sampled_from(["/v1/chat/completions", "/v1/completions", "/v1/embeddings"]),
    body=bodies,
)
def test_no_hostile_body_gets_a_5xx(fuzz_base: str, path: str, body: dict[str, Any]) -> None:
    if isinstance(body.get("max_tokens"), int) and body["max_tokens"] > 50:
        body["max_tokens"] = 50  # keep valid requests short; the shape is what is tested
    with httpx.Client(base_url=fuzz_base, timeout=60) as http:
        r = http.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
        assert r.status_code < 500, (r.status_code, r.text[:300])
        if r.status_code >= 400:
            error = r.json()["error"]
            assert set(error) >= {"message", "type", "param", "code"} and error["message"]
        assert http.get("/health").status_code == 200


def test_deeply_nested_bodies_are_a_400(fuzz_base: str) -> None:
    for depth in (1000, 100_000):
        for inner in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth):
            body = '{"model": "p::m", "messages": ' + inner + "}"
            r = httpx.post(f"{fuzz_base}/v1/chat/completions", content=body,
                           headers={"content-type": "application/json"}, timeout=60)  # fmt: skip
            assert r.status_code == 400, r.text[:200]
