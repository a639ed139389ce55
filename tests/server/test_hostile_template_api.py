"""A model whose chat template is hostile (two nested ``range(99999)`` loops, 10^10 steps),
served through the real server with the real model: each chat request is a 400 that names the
template, on a connection that stays usable, and the server goes on answering."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.server.catalog import StaticCatalog, entry_for_file
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from tests.helpers.served import serving

MODEL_ID = "hostile"
HOSTILE = "{% for i in range(99999) %}{% for j in range(99999) %}x{% endfor %}{% endfor %}"
CHAT = {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
TIMEOUT = 120.0  # a failsafe for a busy machine, never a timing assertion


@pytest.fixture(scope="module")
def base_url(gemma_path: Path) -> Iterator[str]:
    worker = EngineWorker()
    gateway = Gateway(worker, StaticCatalog([entry_for_file(gemma_path, MODEL_ID)]))
    # The template travels as the GGUF's own would: the load's chat_template override.
    params = LoadParams(n_ctx=512, chat_template=HOSTILE)
    gateway.load(str(gemma_path), MODEL_ID, params).wait(TIMEOUT)
    with serving(gateway, ServerConfig(port=0)) as runner:
        yield f"http://127.0.0.1:{runner.port}"


def test_a_hostile_template_is_a_400_naming_it_and_the_next_request_is_answered(
    base_url: str, gemma_path: Path
) -> None:
    with httpx.Client(base_url=base_url, timeout=TIMEOUT) as http:
        for stream in (False, True):
            r = http.post("/v1/chat/completions", json={**CHAT, "stream": stream})
            assert r.status_code == 400, r.text
            error = r.json()["error"]
            assert error["type"] == "invalid_request_error"
            assert error["message"].startswith(f"The chat template of {gemma_path.name} ")
            assert "did too much work" in error["message"]
            assert "use another GGUF of this model" in error["message"]
        health = http.get("/health")
        assert health.status_code == 200
        answer = http.post(
            "/v1/completions",
            json={"model": MODEL_ID, "prompt": "The capital of France is", "max_tokens": 3},
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["usage"]["completion_tokens"] > 0


def test_the_openai_sdk_sees_a_bad_request_and_the_server_still_answers(base_url: str) -> None:
    with openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0) as client:
        with pytest.raises(openai.BadRequestError, match="did too much work"):
            client.chat.completions.create(
                model=MODEL_ID, messages=[{"role": "user", "content": "hi"}], max_tokens=4
            )
        answer = client.completions.create(model=MODEL_ID, prompt="Hello", max_tokens=2)
        assert answer.usage is not None and answer.usage.completion_tokens > 0
