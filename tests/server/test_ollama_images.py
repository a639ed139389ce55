"""Ollama's ``images`` through the official `ollama` client against real uvicorn.

The server runs the real test model twice: with the tiny built projector
(tests/helpers/projector.py: random weights, so the answer means nothing; the path
image -> projector -> embeddings -> decode is real) and without one. Proves: /api/chat messages'
``images`` and /api/generate's ``images`` reach the model (their positions count in
``prompt_eval_count``), and a bad image, an image for a model without a projector, or images
with a raw prompt are Ollama-shaped 400s while the server keeps answering.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import ollama
import pytest

from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.server.catalog import StaticCatalog, entry_for_file
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from tests.helpers.images import png
from tests.helpers.projector import IMAGE_TOKENS, write_projector
from tests.helpers.served import serving

VISION, PLAIN = "gemma-vision", "gemma-plain"
OPTIONS: dict[str, Any] = {"num_predict": 3, "temperature": 0}


@pytest.fixture(scope="module")
def root(gemma_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    mmproj = write_projector(tmp_path_factory.mktemp("mmproj") / "mmproj-test.gguf")
    worker = EngineWorker()
    catalog = StaticCatalog([entry_for_file(gemma_path, m) for m in (PLAIN, VISION)])
    gateway = Gateway(worker, catalog)
    gateway.load(str(gemma_path), PLAIN, LoadParams(n_ctx=1024)).wait(120)
    vision = LoadParams(n_ctx=1024, mmproj=str(mmproj))
    gateway.load(str(gemma_path), VISION, vision).wait(120)
    with serving(gateway, ServerConfig(port=0)) as runner:
        assert runner.base_url is not None
        yield runner.base_url.removesuffix("/v1")


@pytest.fixture
def oc(root: str) -> Iterator[ollama.Client]:
    with ollama.Client(host=root) as c:
        yield c


def refused(call: Any) -> str:
    with pytest.raises(ollama.ResponseError) as caught:
        call()
    assert caught.value.status_code == 400
    return caught.value.error


def still_serving(oc: ollama.Client) -> None:
    answer = oc.chat(PLAIN, [{"role": "user", "content": "Hello"}], options=OPTIONS)
    assert answer.eval_count


def test_chat_images_reach_the_model(oc: ollama.Client, tmp_path: Path) -> None:
    photo = tmp_path / "photo.png"  # the client reads a path and sends it as base64
    photo.write_bytes(png(64, 48))
    question = "What is in this picture?"
    text_only = oc.chat(VISION, [{"role": "user", "content": question}], options=OPTIONS)
    answer = oc.chat(
        VISION, [{"role": "user", "content": question, "images": [photo]}], options=OPTIONS
    )
    assert answer.prompt_eval_count is not None and text_only.prompt_eval_count is not None
    assert answer.prompt_eval_count >= text_only.prompt_eval_count + IMAGE_TOKENS
    two = oc.chat(
        VISION,
        [{"role": "user", "content": question, "images": [png(32, 32), png(32, 32, seed=1)]}],
        options=OPTIONS,
    )
    assert two.prompt_eval_count is not None
    assert two.prompt_eval_count >= text_only.prompt_eval_count + 2 * IMAGE_TOKENS


def test_generate_images_reach_the_model(oc: ollama.Client) -> None:
    text_only = oc.generate(VISION, "Describe it.", options=OPTIONS)
    answer = oc.generate(VISION, "Describe it.", images=[png(32, 32)], options=OPTIONS)
    assert answer.prompt_eval_count is not None and text_only.prompt_eval_count is not None
    assert answer.prompt_eval_count >= text_only.prompt_eval_count + IMAGE_TOKENS
    streamed = list(
        oc.generate(VISION, "Describe it.", images=[png(32, 32)], options=OPTIONS, stream=True)
    )
    assert streamed[-1].done and streamed[-1].prompt_eval_count == answer.prompt_eval_count


def test_a_model_without_a_projector_is_an_ollama_400(oc: ollama.Client) -> None:
    message = refused(
        lambda: oc.chat(
            PLAIN, [{"role": "user", "content": "Hi", "images": [png(32, 32)]}], options=OPTIONS
        )
    )
    assert "takes no images; load it with a vision projector" in message
    message = refused(lambda: oc.generate(PLAIN, "Hi", images=[png(32, 32)], options=OPTIONS))
    assert "takes no images" in message
    still_serving(oc)


def test_bad_images_are_ollama_400s_naming_the_image(oc: ollama.Client, root: str) -> None:
    gif = base64.b64encode(b"GIF89a" + bytes(64)).decode("ascii")
    message = refused(
        lambda: oc.chat(
            VISION,
            [
                {"role": "user", "content": "Hi"},
                {"role": "user", "content": "And this?", "images": [png(32, 32), gif]},
            ],
        )
    )
    assert message.startswith("Invalid 'messages[1].images[1]': This is not a PNG or JPEG")
    message = refused(lambda: oc.generate(VISION, "Hi", images=[gif]))
    assert message.startswith("Invalid 'images[0]'")
    # raw JSON: what the client would never send (damaged base64, images with raw)
    with httpx.Client(base_url=root, timeout=60) as http:
        damaged = http.post(
            "/api/generate",
            json={"model": VISION, "prompt": "Hi", "images": ["***"], "stream": False},
        )
        assert damaged.status_code == 400
        assert damaged.json() == {
            "error": "Invalid 'images[0]': not base64. Send each image as base64 text of a "
            "PNG or JPEG file."
        }
        raw = http.post(
            "/api/generate",
            json={"model": VISION, "prompt": "Hi", "raw": True, "images": [gif], "stream": False},
        )
        assert raw.status_code == 400 and "'images' go with a templated prompt" in raw.text
    still_serving(oc)
