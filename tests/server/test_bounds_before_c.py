"""The requests that used to crash or hold the process (issue: grammar parser stack overflow,
schema bombs) are a 400 in OpenAI's shape through the real server and the real model, and the
server keeps answering on the same connection."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers.served import MODEL_ID

MESSAGES = [{"role": "user", "content": "hi"}]


def chat(schema: Any) -> dict[str, Any]:
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    return {"messages": MESSAGES, "response_format": fmt}


HOSTILE: dict[str, tuple[str, dict[str, Any], str]] = {
    "maxLength 20000": (
        "/v1/chat/completions",
        chat({"type": "string", "maxLength": 20000}),
        "maxLength",
    ),
    "minLength 1e8": (
        "/v1/chat/completions",
        chat({"type": "string", "minLength": 10**8}),
        "minLength",
    ),
    "enum of 20000": (
        "/v1/chat/completions",
        chat({"enum": list(range(20000))}),
        "too large",
    ),
    "properties as a list": (
        "/v1/chat/completions",
        chat({"type": "object", "properties": [1, 2]}),
        "properties",
    ),
    "tool parameter maxLength 20000": (
        "/v1/chat/completions",
        {
            "messages": MESSAGES,
            "tool_choice": "required",
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {
                "type": "object", "properties": {"a": {"type": "string", "maxLength": 20000}}}}}],
        },
        "maxLength",
    ),
    "50,000 nested parentheses": (
        "/v1/completions",
        {"prompt": "x", "grammar": "root ::= " + "(" * 50000 + '"a"' + ")" * 50000},
        "nests groups",
    ),
    "50,000 parentheses after a comment that ends in CR": (
        "/v1/completions",
        {"prompt": "x", "grammar": "root ::= ( # c\r" + "(" * 50000 + '"a"' + ")" * 50001},
        "nests groups",
    ),
    "{5,2}, counted down from 2**64": (
        "/v1/completions",
        {"prompt": "x", "grammar": 'root ::= "a"{5,2}'},
        "fewer times",
    ),
    "16 rules that each begin with the next, two ways": (
        "/v1/completions",
        {"prompt": "x", "grammar": "root ::= r0\n" + "".join(
            f'r{i} ::= r{i + 1} "a" | r{i + 1} "b"\n' for i in range(16)) + 'r16 ::= "c"'},
        "branches too much",
    ),
    "a pattern repeated 1e9 times": (
        "/v1/chat/completions",
        chat({"type": "string", "pattern": "^a{1000000000}$"}),
        "pattern",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_constraint_is_a_400_and_the_server_goes_on(
    http: httpx.Client, case: str
) -> None:
    path, body, words = HOSTILE[case]
    r = http.post(path, json={"model": MODEL_ID, "max_tokens": 4, **body})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert words in error["message"] and error["type"] == "invalid_request_error"
    ok = http.post(
        "/v1/completions",
        json={"model": MODEL_ID, "prompt": "Hello", "max_tokens": 2, "temperature": 0},
    )
    assert ok.status_code == 200
