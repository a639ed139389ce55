"""``POST /v1/models/load`` and the fit refusal on the API: a model the estimate says does not
fit is a 400 ``model_too_large`` with the numbers and what to try, on that route and on a
request that would load it just in time; ``"force": true`` loads it anyway."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from app.engine import llamacpp
from app.engine.types import UnloadRequest
from tests.helpers.served import Served

LIBRARY_ID = "test/gemma-copy/gemma-copy.gguf"


@pytest.fixture
def little_memory(served: Served, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """100 MB free: the weights alone (about 250 MB) do not fit."""
    monkeypatch.setattr(llamacpp, "available_memory", lambda: 100_000_000)
    yield
    served.worker.submit(UnloadRequest(LIBRARY_ID)).wait(60)


def test_a_model_that_does_not_fit_is_refused_with_the_numbers(
    served: Served, http: httpx.Client, client: openai.OpenAI, little_memory: None
) -> None:
    r = http.post("/v1/models/load", json={"model": LIBRARY_ID})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "model_too_large" and error["param"] == "model"
    assert error["message"].startswith("Not enough memory for 2048 tokens of context: it needs ")
    assert "100 MB is free" in error["message"] and "smaller quantization" in error["message"]
    assert '"force": true' in error["message"]
    # a request that would load it just in time is refused the same way
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(
            model=LIBRARY_ID, messages=[{"role": "user", "content": "Hi"}], max_tokens=2
        )
    assert exc.value.code == "model_too_large"
    assert LIBRARY_ID not in {m.model_id for m in served.worker.loaded_models()}


def test_force_loads_it_anyway(
    served: Served, http: httpx.Client, client: openai.OpenAI, little_memory: None
) -> None:
    r = http.post(
        "/v1/models/load", json={"model": LIBRARY_ID, "force": True, "context_length": 1024}
    )
    assert r.status_code == 200, r.text
    model = r.json()
    assert model["id"] == LIBRARY_ID and model["state"] == "loaded"
    assert model["context_length"] == 1024
    answer = client.chat.completions.create(
        model=LIBRARY_ID, messages=[{"role": "user", "content": "Hi"}], max_tokens=2
    )
    assert answer.choices[0].finish_reason in ("stop", "length")


def test_load_requests_are_checked(http: httpx.Client) -> None:
    r = http.post("/v1/models/load", json={"model": "no/such/model.gguf"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    r = http.post("/v1/models/load", json={"model": LIBRARY_ID, "context_length": 0})
    assert r.status_code == 400 and r.json()["error"]["param"] == "context_length"
    r = http.post("/v1/models/load", json={})
    assert r.status_code == 400 and r.json()["error"]["code"] == "missing_required_parameter"
