"""``prediction`` on POST /v1/responses (chat completions' field, as an extension), through the
real `openai` SDK's ``extra_body``, against the real model on real uvicorn: it drafts the answer,
usage's ``output_tokens_details`` say how many predicted tokens were accepted and rejected; and
hostile predictions (huge, wrong types, nested, too many parts) are a 400 naming the field,
refused before anything reaches the engine."""

from __future__ import annotations

from typing import Any

import httpx
import openai

from tests.helpers.served import MODEL_ID

CODE = "\n".join(f"def area_{i}(w, h):\n    return w * h + {i}\n" for i in range(6))
ASK = "Repeat this code exactly, with no comment:\n" + CODE


def create(client: openai.OpenAI, **kwargs: Any) -> Any:
    params: dict[str, Any] = {"model": MODEL_ID, "temperature": 0, "max_output_tokens": 48}
    return client.responses.create(**{**params, **kwargs})


def test_a_prediction_drafts_a_response_and_usage_counts_it(client: openai.OpenAI) -> None:
    plain = create(client, input=ASK, store=False)
    expected = plain.output_text
    assert "accepted_prediction_tokens" not in plain.usage.output_tokens_details.model_dump()
    prediction = {"type": "content", "content": expected}
    r = create(client, input=ASK, store=False, extra_body={"prediction": prediction})
    assert r.output_text[:8] == expected[:8]
    details = r.usage.output_tokens_details.model_dump()
    assert details["accepted_prediction_tokens"] >= r.usage.output_tokens // 2 > 0
    assert details["rejected_prediction_tokens"] >= 0
    parts = {"type": "content", "content": [{"type": "text", "text": expected}]}
    with client.responses.stream(
        model=MODEL_ID,
        input=ASK,
        temperature=0,
        max_output_tokens=48,
        store=False,
        extra_body={"prediction": parts},
    ) as stream:
        final = stream.get_final_response()
    assert final.usage is not None
    assert final.usage.output_tokens_details.model_dump()["accepted_prediction_tokens"] > 0


def test_hostile_predictions_are_a_400_naming_the_field(
    http: httpx.Client,
) -> None:
    cases = {
        "huge": {"type": "content", "content": "x" * 3_000_000},
        "a number": {"type": "content", "content": 12},
        "nested": {"type": "content", "content": [[[{"type": "text", "text": "x"}]]]},
        "not content": {"type": "file", "content": "x"},
        "no content": {"type": "content"},
        "too many parts": {"type": "content", "content": [{"type": "text", "text": "a"}] * 5000},
        "a list": ["content", "x"],
    }
    for name, prediction in cases.items():
        body = {"model": MODEL_ID, "input": "Hi", "max_output_tokens": 4, "prediction": prediction}
        r = http.post("/v1/responses", json=body)
        assert r.status_code == 400, (name, r.text)
        error = r.json()["error"]
        assert error["param"].startswith("prediction"), (name, error)
    assert http.get("/v1/models").status_code == 200  # the server stays up
