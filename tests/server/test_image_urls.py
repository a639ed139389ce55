"""http(s) image URLs, fetched when the user allowed them: a real HTTP server on 127.0.0.1
serves a PNG, 21 MB of bytes (with and without a Content-Length), redirects, an error page and
a page that never finishes; the real request schema and the real async client fetch them.

Proves: off by default (nothing is fetched, the URL is refused); on, an image is fetched and
handed to the request like a data URL's; each failure is a 400 naming the part: too large
(by the header, or cut off in the stream), more than 3 redirects, a redirect to another
scheme, an HTTP error, not an image, and a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from app.config import Settings
from app.engine.image_bounds import MAX_IMAGE_BYTES
from app.server import schemas
from app.server.config import ServerConfig, allow_image_urls
from app.server.errors import APIError
from app.server.images import decode_images, fetch_image_urls
from tests.helpers.images import png
from tests.helpers.net import LocalHttp

PICTURE = png(32, 24)
BIG = 21 * 1024 * 1024  # past the 20 MiB cap
release = threading.Event()  # lets the stalled page finish once its test is over


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *_args: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = self.path
        if path == "/cat.png":
            self._send(200, PICTURE, "image/png")
        elif path.startswith("/hop/"):  # /hop/N redirects N more times, then to the picture
            n = int(path.rsplit("/", 1)[1])
            self.send_response(302)
            self.send_header("Location", f"/hop/{n - 1}" if n > 1 else "/cat.png")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/to-ftp":
            self.send_response(301)
            self.send_header("Location", "ftp://127.0.0.1/cat.png")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/big-declared.png":
            self._send(200, bytes(BIG), "image/png")
        elif path == "/big-streamed.png":  # no Content-Length: only counting finds the size
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Connection", "close")
            self.end_headers()
            block = b"\x89PNG\r\n\x1a\n" + bytes(1024 * 1024 - 8)
            try:
                for _ in range(BIG // len(block)):
                    self.wfile.write(block)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped reading past the cap, as it should
        elif path == "/page.html":
            self._send(200, b"<html>not a picture</html>", "text/html")
        elif path == "/stall.png":  # headers, then nothing until the test is over
            self.send_response(200)
            self.send_header("Content-Length", str(len(PICTURE)))
            self.end_headers()
            self.wfile.flush()
            release.wait(30)
        else:
            self._send(404, b"not found", "text/plain")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)  # one refused by its Content-Length: the client hangs up


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    http = LocalHttp(Handler)
    try:
        yield http.url
    finally:
        release.set()
        http.close()


def body(*urls: str) -> list[schemas.Message]:
    content: list[dict[str, Any]] = [{"type": "text", "text": "What is it?"}]
    content += [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    request = schemas.ChatCompletionRequest.model_validate(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "Hi"}, {"role": "user", "content": content}],
        }
    )
    return request.messages


def refused(messages: list[schemas.Message], **kwargs: Any) -> APIError:
    with pytest.raises(APIError) as caught:
        asyncio.run(fetch_image_urls(messages, True, local=True, **kwargs))
    error = caught.value
    assert error.status == 400 and error.param == "messages[1].content"
    return error


def test_off_by_default_nothing_is_fetched_and_the_url_is_refused(site: str) -> None:
    assert ServerConfig().image_urls is False
    settings = Settings()
    assert ServerConfig.from_settings(settings).image_urls is False
    messages = body(f"{site}/cat.png")
    asyncio.run(fetch_image_urls(messages, ServerConfig.from_settings(settings).image_urls))
    with pytest.raises(APIError) as caught:
        decode_images(messages)
    assert caught.value.code == "image_url_not_allowed"
    assert "allow image URLs in Ember's API server settings" in caught.value.message
    allow_image_urls(settings, True)
    assert ServerConfig.from_settings(Settings(settings.path)).image_urls is True


def test_an_allowed_url_is_fetched_like_a_data_url(site: str) -> None:
    messages = body(f"{site}/cat.png", f"{site}/hop/3")  # three redirects are followed
    asyncio.run(fetch_image_urls(messages, True, local=True))  # the site is on 127.0.0.1
    assert decode_images(messages) == (PICTURE, PICTURE)


def test_each_failure_is_a_400_naming_the_part(site: str) -> None:
    error = refused(body(f"{site}/big-declared.png"))
    assert error.code == "image_too_large"
    assert "messages[1].content[1].image_url" in error.message and "22.0 MB" in error.message
    error = refused(body(f"{site}/big-streamed.png"))
    assert error.code == "image_too_large" and "goes on past the limit" in error.message
    error = refused(body(f"{site}/hop/4"))
    assert "redirects more than 3 times" in error.message
    error = refused(body(f"{site}/to-ftp"))
    assert error.code == "image_url_not_allowed" and "ftp://127.0.0.1/cat.png" in error.message
    error = refused(body(f"{site}/cat.png", f"{site}/missing.png"))
    assert "content[2]" in error.message and "answered HTTP 404" in error.message
    error = refused(body(f"{site}/page.html"))
    assert error.code == "invalid_image" and "not a PNG or JPEG" in error.message
    error = refused(body(f"{site}/stall.png"), seconds=0.5)
    assert "did not arrive within" in error.message
    error = refused(body("http://127.0.0.1:1/cat.png"))  # nothing listens on port 1
    assert error.code == "image_url_fetch_failed" and "cannot fetch" in error.message
    assert MAX_IMAGE_BYTES < BIG


def test_ember_serve_image_urls_overrides_the_setting() -> None:
    from app.cli import build_parser
    from app.commands.serve import server_config

    settings = Settings()
    parser = build_parser("serve")
    assert server_config(parser.parse_args(["serve"]), settings).image_urls is False
    assert server_config(parser.parse_args(["serve", "--image-urls"]), settings).image_urls
    allow_image_urls(settings, True)
    assert server_config(parser.parse_args(["serve"]), settings).image_urls
    off = parser.parse_args(["serve", "--no-image-urls"])
    assert server_config(off, settings).image_urls is False
    assert not server_config(parser.parse_args(["serve"]), settings).image_urls_local
    local = server_config(parser.parse_args(["serve", "--image-urls-local"]), Settings())
    assert local.image_urls and local.image_urls_local  # the opt-in implies --image-urls
    settings.set("server.image_urls_local", True)
    assert ServerConfig.from_settings(settings).image_urls_local
    no = parser.parse_args(["serve", "--no-image-urls-local"])
    assert not server_config(no, settings).image_urls_local
