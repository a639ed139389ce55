"""Images through the real server and the `openai` SDK: ``image_url`` parts with data URLs.

The server runs the real test model twice: once with the tiny built projector
(tests/helpers/projector.py, random weights: the answer means nothing, the path is real) and
once without. Proves: an image part answers 200 and its positions count in the usage; a model
without a projector, a garbage image, an http URL, a data URL over the cap and a damaged
base64 each answer an OpenAI-shaped 400 naming the part, and the server keeps serving.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.server import images
from app.server.catalog import StaticCatalog, entry_for_file
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from tests.helpers.images import data_url, image_messages, png
from tests.helpers.projector import IMAGE_TOKENS, write_projector
from tests.helpers.served import serving

VISION, PLAIN = "gemma-vision", "gemma-plain"
NO_END = {"1": -100, "106": -100}  # Gemma's <eos> and <end_of_turn>: answers write text


@pytest.fixture(scope="module")
def base_url(gemma_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    mmproj = write_projector(tmp_path_factory.mktemp("mmproj") / "mmproj-test.gguf")
    worker = EngineWorker()
    gateway = Gateway(worker, StaticCatalog([entry_for_file(gemma_path, PLAIN)]))
    gateway.load(str(gemma_path), PLAIN, LoadParams(n_ctx=1024, n_parallel=2)).wait(120)
    vision = LoadParams(n_ctx=1024, n_parallel=2, mmproj=str(mmproj))
    gateway.load(str(gemma_path), VISION, vision).wait(120)
    with serving(gateway, ServerConfig(port=0)) as runner:
        assert runner.base_url is not None
        yield runner.base_url


def ask(client: openai.OpenAI, model: str, messages: list[Any]) -> Any:
    return client.chat.completions.create(
        model=model,
        messages=messages,
        temperature=0,
        max_tokens=4,
        extra_body={"logit_bias": NO_END},
    )


def refused(client: openai.OpenAI, model: str, messages: list[Any]) -> dict[str, Any]:
    with pytest.raises(openai.BadRequestError) as caught:
        ask(client, model, messages)
    assert caught.value.status_code == 400
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "invalid_request_error"
    assert isinstance(body["message"], str) and body["message"]
    return body


def still_serving(client: openai.OpenAI) -> None:
    answer = ask(client, PLAIN, [{"role": "user", "content": "Hello"}])
    assert answer.usage is not None and answer.usage.completion_tokens > 0


def test_an_image_data_url_is_answered_and_counted(client: openai.OpenAI) -> None:
    text_only = ask(client, VISION, [{"role": "user", "content": "What is in this picture?"}])
    answer = ask(client, VISION, image_messages(data_url(png(64, 48))))
    assert answer.choices[0].finish_reason == "length"
    assert answer.usage is not None and text_only.usage is not None
    assert answer.usage.completion_tokens == 4
    assert answer.usage.prompt_tokens >= text_only.usage.prompt_tokens + IMAGE_TOKENS


def test_a_typed_media_marker_is_not_taken_for_an_image(client: openai.OpenAI) -> None:
    """Only image parts place images: a client's text holding llama.cpp's marker is text."""
    answer = ask(client, VISION, image_messages(data_url(png(32, 32)), "<__media__> and this?"))
    assert answer.choices[0].finish_reason == "length"
    plain = ask(client, VISION, [{"role": "user", "content": "<__media__> hi"}])
    assert plain.usage is not None and plain.usage.completion_tokens == 4


def test_a_model_without_a_projector_says_how_to_load_one(client: openai.OpenAI) -> None:
    body = refused(client, PLAIN, image_messages(data_url(png(32, 32))))
    assert body["code"] == "model_not_vision"
    assert (
        "This model takes no images; load it with a vision projector (--mmproj)"
        in (body["message"])
    )
    still_serving(client)


def test_a_garbage_image_is_a_400_naming_the_part(client: openai.OpenAI) -> None:
    body = refused(client, VISION, image_messages(data_url(b"GIF89a" + bytes(64), "image/png")))
    assert body["code"] == "invalid_image" and body["param"] == "messages[0].content"
    assert "messages[0].content[1].image_url" in body["message"]
    assert "not a PNG or JPEG" in body["message"]
    damaged = refused(client, VISION, image_messages("data:image/png;base64,***notbase64***"))
    assert "base64 is damaged" in damaged["message"]
    still_serving(client)


def test_an_http_image_url_is_refused_as_off(client: openai.OpenAI) -> None:
    body = refused(client, VISION, image_messages("https://example.com/cat.png"))
    assert body["code"] == "image_url_not_allowed"
    assert "are off" in body["message"] and "data URL" in body["message"]
    still_serving(client)


def test_an_oversized_data_url_is_refused_before_it_is_decoded(
    client: openai.OpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap (the base64 of the engine's 20 MiB image limit, about 27 MiB) is lowered here
    so the check runs with a small real request."""
    url = data_url(png(64, 64))
    monkeypatch.setattr(images, "MAX_DATA_URL_CHARS", len(url) - 1)
    body = refused(client, VISION, image_messages(url))
    assert body["code"] == "image_too_large"
    assert f"{len(url):,} characters" in body["message"]
    monkeypatch.undo()
    still_serving(client)


def test_an_image_with_a_text_only_request_on_the_raw_http_api(base_url: str) -> None:
    """The error is OpenAI-shaped on the wire too (an ``error`` object)."""
    with httpx.Client(timeout=120) as http:
        r = http.post(
            f"{base_url}/chat/completions",
            json={"model": PLAIN, "messages": image_messages(data_url(png(16, 16)))},
        )
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "model_not_vision"


# ---- the same images through Anthropic's Messages API -------------------------------------


def image_message(data: bytes) -> Any:
    source = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(data).decode()}
    text = {"type": "text", "text": "What is in this picture?"}
    return [{"role": "user", "content": [{"type": "image", "source": source}, text]}]


def test_an_image_block_is_seen_by_a_vision_model(base_url: str) -> None:
    """This module's server: the test model with a test projector, and without one."""
    with anthropic.Anthropic(
        base_url=base_url.removesuffix("/v1"), api_key="x", max_retries=0
    ) as client:
        text_only = client.messages.create(
            model=VISION, max_tokens=2, messages=[{"role": "user", "content": "Hi"}]
        )
        seen = client.messages.create(
            model=VISION, max_tokens=2, messages=image_message(png(64, 48))
        )
        with pytest.raises(anthropic.BadRequestError) as raised:
            client.messages.create(model=PLAIN, max_tokens=2, messages=image_message(png(32, 32)))

    def prompt(m: Any) -> int:
        return int(m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0))

    assert prompt(seen) >= prompt(text_only) + IMAGE_TOKENS
    assert "vision projector" in raised.value.message
