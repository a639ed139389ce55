"""Images through the API as an editor or the app's server sends them: real uvicorn on
127.0.0.1, the real test model in a library folder beside the tiny built projector
(tests/helpers/projector.py: random weights, so the answer means nothing; what is proven is
the path), and the `openai` SDK as the client.

Proves: a library model with a projector in its folder, named by a request, is loaded just in
time *with* it (the image's positions are counted in the usage); with projectors turned off
(``ember serve --no-mmproj``) the same request is a 400 saying the model cannot read images;
an http(s) image URL is fetched by the route when the server allows it and refused (400,
nothing fetched) when it does not.
"""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import openai
import pytest

from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.library.local import Library
from app.server.catalog import LibraryCatalog
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from tests.helpers.images import data_url, image_messages, png
from tests.helpers.net import local_http
from tests.helpers.projector import IMAGE_TOKENS, model_folder
from tests.helpers.served import serving

PICTURE = png(32, 24)
fetched: list[str] = []


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *_args: Any) -> None:
        pass

    def do_GET(self) -> None:
        fetched.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(PICTURE)))
        self.end_headers()
        self.wfile.write(PICTURE)


@pytest.fixture(scope="module")
def picture_url() -> Iterator[str]:
    with local_http(Handler) as http:
        yield f"{http.url}/cat.png"


@pytest.fixture(scope="module")
def library(gemma_path: Path, tmp_path_factory: pytest.TempPathFactory) -> LibraryCatalog:
    root = tmp_path_factory.mktemp("vision-library")
    model_folder(gemma_path, root / "models" / "test" / "gemma-vision", projector=True)
    return LibraryCatalog(
        Library(
            models_dir=root / "models",
            hf_cache_dir=root / "hf",
            lmstudio_dirs=(),
            cache_path=root / "library.json",
        )
    )


def serve(library: LibraryCatalog, config: ServerConfig, projectors: bool = True) -> Iterator[str]:
    worker = EngineWorker()
    gateway = Gateway(worker, library, LoadParams(n_ctx=1024), projectors=projectors)
    with serving(gateway, config) as runner:
        assert runner.base_url is not None
        yield runner.base_url


@pytest.fixture(scope="module")
def vision_url(library: LibraryCatalog) -> Iterator[str]:
    yield from serve(library, ServerConfig(port=0, image_urls=True, image_urls_local=True))


def model_id(library: LibraryCatalog) -> str:
    [entry] = library.list_models()
    assert entry.mmproj is not None and Path(entry.mmproj).name == "mmproj-gemma-f16.gguf"
    return entry.id


def ask(base_url: str, model: str, image_url: str) -> Any:
    with openai.OpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        return client.chat.completions.create(
            model=model, messages=image_messages(image_url), max_tokens=2, temperature=0
        )


def test_a_library_model_loaded_just_in_time_takes_its_projector(
    library: LibraryCatalog, vision_url: str
) -> None:
    r = ask(vision_url, model_id(library), data_url(PICTURE))
    assert r.usage is not None and r.usage.prompt_tokens > IMAGE_TOKENS


def test_an_allowed_image_url_is_fetched_by_the_route(
    library: LibraryCatalog, vision_url: str, picture_url: str
) -> None:
    fetched.clear()
    r = ask(vision_url, model_id(library), picture_url)
    assert fetched == ["/cat.png"]
    assert r.usage is not None and r.usage.prompt_tokens > IMAGE_TOKENS


def test_image_urls_off_is_a_400_and_nothing_is_fetched(
    library: LibraryCatalog, picture_url: str
) -> None:
    fetched.clear()
    for base_url in serve(library, ServerConfig(port=0)):
        with pytest.raises(openai.BadRequestError) as caught:
            ask(base_url, model_id(library), picture_url)
        assert caught.value.code == "image_url_not_allowed"
    assert fetched == []


def test_projectors_off_loads_text_only_and_an_image_is_a_400(library: LibraryCatalog) -> None:
    for base_url in serve(library, ServerConfig(port=0), projectors=False):
        with pytest.raises(openai.BadRequestError) as caught:
            ask(base_url, model_id(library), data_url(PICTURE))
        assert caught.value.code == "model_not_vision"
        assert "image" in str(caught.value.message)


def test_an_image_request_streams_with_its_usage(library: LibraryCatalog, vision_url: str) -> None:
    with openai.OpenAI(base_url=vision_url, api_key="x", max_retries=0) as client:
        stream = client.chat.completions.create(
            model=model_id(library),
            messages=image_messages(data_url(PICTURE)),
            max_tokens=3,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-2].choices[0].finish_reason in ("length", "stop")
    usage = chunks[-1].usage
    assert usage is not None and usage.prompt_tokens > IMAGE_TOKENS
