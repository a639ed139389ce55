"""Hostile Ollama request bodies never get a 5xx: hypothesis builds malformed chat, generate,
embed, show, copy and delete bodies (wrong types, huge and odd numbers, odd options, keep_alive
and formats, schema bombs, images, unicode) and sends them to the real app on real uvicorn;
every answer is a 2xx, or a 4xx in Ollama's ``{"error": "..."}`` shape, and the server keeps
answering. The engine is the scripted model, as in test_fuzz.py."""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.fuzz import json_values, odd_numbers, schema_bombs

MODEL = "fuzz"

options = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            name: st.one_of(odd_numbers, json_values)
            for name in (
                "num_predict",
                "num_ctx",
                "temperature",
                "top_k",
                "top_p",
                "min_p",
                "typical_p",
                "repeat_penalty",
                "repeat_last_n",
                "presence_penalty",
                "frequency_penalty",
                "seed",
                "mirostat",
                "mirostat_tau",
                "mirostat_eta",
                "num_gpu",
                "num_thread",
            )
        }
        | {"stop": st.one_of(st.lists(st.text(max_size=5), max_size=20), json_values)},
    ),
    json_values,
)
messages = st.one_of(
    st.lists(
        st.fixed_dictionaries(
            {
                "role": st.one_of(
                    st.sampled_from(["user", "system", "assistant", "tool"]), json_values
                )
            },
            optional={
                "content": st.one_of(st.text(max_size=100), json_values),
                "images": st.one_of(st.lists(st.text(max_size=8), max_size=2), json_values),
                "tool_calls": st.one_of(
                    st.lists(
                        st.fixed_dictionaries(
                            {
                                "function": st.fixed_dictionaries(
                                    {
                                        "name": st.one_of(st.text(max_size=10), json_values),
                                        "arguments": json_values,
                                    }
                                )
                            }
                        ),
                        max_size=2,
                    ),
                    json_values,
                ),
                "tool_name": json_values,
            },
        ),
        max_size=3,
    ),
    json_values,
)
fields: dict[str, st.SearchStrategy[Any]] = {
    "model": st.one_of(st.just(MODEL), st.just("fuzz:latest"), st.text(max_size=300),
                       json_values),
    "name": st.one_of(st.just(MODEL), json_values),
    "messages": messages,
    "prompt": st.one_of(st.text(max_size=100), json_values),
    "suffix": st.one_of(st.text(max_size=10), json_values),
    "system": st.one_of(st.text(max_size=50), json_values),
    "template": st.one_of(st.just(""), json_values),
    "context": st.one_of(st.lists(st.integers(), max_size=3), json_values),
    "raw": st.one_of(st.booleans(), json_values),
    "images": json_values,
    "format": st.one_of(st.sampled_from(["", "json", "xml"]), schema_bombs, json_values),
    "options": options,
    "keep_alive": st.one_of(st.sampled_from(["5m", "0", "-1", "1h30m", "soon", "9" * 400, 0]),
                            odd_numbers, json_values),
    "stream": st.one_of(st.booleans(), json_values),
    "think": json_values,
    "tools": st.one_of(json_values, st.builds(
        lambda s: [{"type": "function", "function": {"name": "f", "parameters": s}}],
        st.one_of(schema_bombs, json_values))),
    "input": st.one_of(st.text(max_size=100), st.lists(st.text(max_size=20), max_size=3),
                       json_values),
    "dimensions": st.one_of(odd_numbers, json_values),
    "truncate": json_values,
    "verbose": json_values,
    "source": st.one_of(st.just(MODEL), json_values),
    "destination": st.one_of(st.text(max_size=40), json_values),
}  # fmt: skip
bodies = st.fixed_dictionaries({}, optional=fields)


ROUTES = [
    ("POST", "/api/chat"),
    ("POST", "/api/generate"),
    ("POST", "/api/embed"),
    ("POST", "/api/embeddings"),
    ("POST", "/api/show"),
    ("POST", "/api/copy"),
    ("DELETE", "/api/delete"),
]


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(route=st.sampled_from(ROUTES), body=bodies)
def test_no_hostile_body_gets_a_5xx(
    fuzz_base: str, route: tuple[str, str], body: dict[str, Any]
) -> None:
    method, path = route
    if isinstance(body.get("options"), dict):
        num_predict = body["options"].get("num_predict")
        if not isinstance(num_predict, int) or not 0 < num_predict <= 20:
            body["options"]["num_predict"] = 20  # keep valid requests short
    elif "options" not in body:
        body["options"] = {"num_predict": 20}
    with httpx.Client(base_url=fuzz_base, timeout=60) as http:
        r = http.request(
            method, path, content=json.dumps(body), headers={"content-type": "application/json"}
        )
        assert r.status_code < 500, (r.status_code, r.text[:300])
        if r.status_code >= 400:
            error = r.json()
            assert set(error) == {"error"} and isinstance(error["error"], str) and error["error"]
        else:  # a stream's lines, or one object, each JSON
            for line in r.text.splitlines():
                assert "error" not in json.loads(line), line[:300]
        assert http.get("/api/version").status_code == 200


def test_deeply_nested_bodies_are_a_400(fuzz_base: str) -> None:
    for depth in (1000, 100_000):
        for inner in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth):
            body = '{"model": "fuzz", "messages": ' + inner + "}"
            r = httpx.post(f"{fuzz_base}/api/chat", content=body, timeout=60)
            assert r.status_code == 400, r.text[:200]
            assert set(r.json()) == {"error"}
