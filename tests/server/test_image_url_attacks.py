"""http(s) image URLs that are not URLs httpx can fetch, through the real server (image URLs
allowed) and the `openai` SDK: each was a 500 when `ember serve --image-urls` was attacked,
because httpx raises them outside ``httpx.HTTPError`` (InvalidURL for a broken address or a
redirect to a data: URL, an IDNAError for a bad international name, an ExceptionGroup holding
an OverflowError for port 99999). Each is a 400 naming the part now, and the server answers
the next request. The engine is the scripted model: the URL fails before any model is used.
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
from app.server.catalog import StaticCatalog, entry_for_file
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from tests.helpers.images import image_messages
from tests.helpers.net import local_http
from tests.helpers.served import serving

MODEL = "scripted"


class Redirects(BaseHTTPRequestHandler):
    """/to/ANYTHING redirects to ANYTHING, as a hostile page may."""

    def log_message(self, *_args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", self.path.removeprefix("/to/"))
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with local_http(Redirects) as http:
        yield http.url


@pytest.fixture(scope="module")
def client(gemma_path: Path) -> Iterator[openai.OpenAI]:
    from tests.helpers.scripted_model import scripted_factory

    worker = EngineWorker(model_factory=scripted_factory())
    gateway = Gateway(worker, StaticCatalog([entry_for_file(gemma_path, MODEL)]))
    gateway.load("scripted", MODEL, LoadParams(n_ctx=4096)).wait(30)
    with (
        serving(gateway, ServerConfig(port=0, image_urls=True, image_urls_local=True)) as runner,
        openai.OpenAI(base_url=runner.base_url, api_key="x", max_retries=0) as c,
    ):
        yield c


URLS = {
    "broken IPv6 address": "http://[::1/cat.png",
    "port past 65535": "http://127.0.0.1:99999/cat.png",
    "bad international name": "https://xn--/cat.png",
    "IPv4 address past 255": "http://999.999.999.999/cat.png",
    "a redirect to a data: URL": "{site}/to/data:image/png;base64,iVBORw0KGgo/AAAA",
}


@pytest.mark.parametrize("case", list(URLS))
def test_a_url_httpx_cannot_fetch_is_a_400_naming_the_part(
    client: openai.OpenAI, site: str, case: str
) -> None:
    url = URLS[case].format(site=site)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL, messages=image_messages(url), max_tokens=2)
    body = caught.value.body
    assert isinstance(body, dict) and body["code"] == "image_url_fetch_failed"
    assert (
        "messages[0].content[1].image_url" in body["message"] and "cannot fetch" in body["message"]
    )
    answer = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2
    )
    assert answer.choices[0].message is not None
