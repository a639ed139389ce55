"""Images whose header is small but whose decoding is not, through the real server, the real
test model with the tiny built projector (tests/helpers/projector.py), and the `openai` SDK.

Found by attacking `ember serve`: a 32x32 PNG whose pixel data is a zlib "bomb" (6 MB that
inflate to 6 GB) made stb_image allocate 3.8 GB in the app's process before it gave up, and a
1 MB one answered 200 after a 1 GB allocation; a progressive JPEG whose last scan is repeated
is decoded once per scan over the whole image (18 ms a scan at 16 MP: a 20 MB file held the
engine thread for hours, with no way to cancel it).

Proves: both are a 400 in OpenAI's shape naming the part (``invalid_image``), on /api/chat in
Ollama's shape too, before any C code sees them, and the server answers the next request; real
images of the kinds the new checks read (interlaced, 16-bit, palette PNGs; progressive JPEGs)
still answer 200; images are checked off the server's event loop.
"""

from __future__ import annotations

import base64
import io
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from PIL import Image

from app.engine import image_bounds
from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.server import images
from app.server.catalog import StaticCatalog, entry_for_file
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.ollama import images as ollama_images
from tests.helpers.images import data_url, image_messages, png
from tests.helpers.projector import write_projector
from tests.helpers.served import serving

VISION = "gemma-vision"


@pytest.fixture(scope="module")
def base_url(gemma_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    mmproj = write_projector(tmp_path_factory.mktemp("mmproj") / "mmproj-test.gguf")
    worker = EngineWorker()
    gateway = Gateway(worker, StaticCatalog([entry_for_file(gemma_path, VISION)]))
    params = LoadParams(n_ctx=1024, n_parallel=2, mmproj=str(mmproj))
    gateway.load(str(gemma_path), VISION, params).wait(120)
    with serving(gateway, ServerConfig(port=0)) as runner:
        assert runner.base_url is not None
        yield runner.base_url


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_bomb(inflated_mb: int) -> bytes:
    """A 32x32 RGB PNG (3,104 bytes of pixel data) whose IDAT inflates to ``inflated_mb``."""
    ihdr = struct.pack(">IIBBBBB", 32, 32, 8, 2, 0, 0, 0)
    idat = zlib.compress(bytes(inflated_mb * 1024 * 1024), 9)
    chunks = _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")
    return image_bounds.PNG_SIGNATURE + chunks


def jpeg(size: tuple[int, int], progressive: bool) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (120, 30, 200)).save(out, "JPEG", progressive=progressive)
    return out.getvalue()


def scan_bomb(scans: int) -> bytes:
    """A progressive JPEG whose last scan (an AC refinement of a few bytes) comes ``scans``
    more times: stb_image decodes each one over the whole image."""
    data = jpeg((256, 256), progressive=True)
    last = data.rindex(b"\xff\xda")
    return data[:-2] + data[last:-2] * scans + b"\xff\xd9"


def png_of(mode: str, interlace: int) -> bytes:
    out = io.BytesIO()
    Image.new(mode, (45, 31)).save(out, "PNG", interlace=interlace)
    return out.getvalue()


def ask(client: openai.OpenAI, url: str) -> Any:
    return client.chat.completions.create(
        model=VISION, messages=image_messages(url), max_tokens=2, temperature=0
    )


def still_answers(client: openai.OpenAI) -> None:
    assert ask(client, data_url(png(32, 24))).choices[0].message is not None


@pytest.mark.parametrize(
    ("image", "media_type", "words"),
    [
        (png_bomb(64), "image/png", "inflates to more than"),
        (scan_bomb(200), "image/jpeg", "more than 64 scans"),
    ],
    ids=["png-zlib-bomb", "jpeg-scan-bomb"],
)
def test_a_decoding_bomb_is_a_400_naming_the_part(
    client: openai.OpenAI, image: bytes, media_type: str, words: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        ask(client, data_url(image, media_type))
    error = caught.value.body
    assert isinstance(error, dict) and error["code"] == "invalid_image"
    assert "messages[0].content[1].image_url" in error["message"] and words in error["message"]
    assert error["param"] == "messages[0].content"
    still_answers(client)


def test_a_png_bomb_on_ollamas_chat_is_a_400_in_its_shape(base_url: str) -> None:
    root = base_url.removesuffix("/v1")
    image = base64.b64encode(png_bomb(64)).decode()
    body: dict[str, Any] = {
        "model": VISION,
        "stream": False,
        "messages": [{"role": "user", "content": "What is it?", "images": [image]}],
        "options": {"num_predict": 2},
    }
    r = httpx.post(f"{root}/api/chat", json=body, timeout=120)
    assert r.status_code == 400, r.text
    assert "messages[0].images[0]" in r.json()["error"] and "inflates" in r.json()["error"]
    body["messages"][0]["images"] = [base64.b64encode(png(32, 24)).decode()]
    assert httpx.post(f"{root}/api/chat", json=body, timeout=120).status_code == 200


@pytest.mark.parametrize(
    "image",
    [
        png_of("RGBA", 1),  # Adam7: seven passes of rows
        png_of("I;16", 0),  # 16-bit grey
        png_of("P", 1),  # palette, interlaced
        png_of("1", 0),  # 1 bit a pixel
        jpeg((300, 200), progressive=True),
    ],
    ids=["png-interlaced-rgba", "png-16-bit", "png-palette-interlaced", "png-1-bit", "jpeg-prog"],
)
def test_real_images_the_checks_read_still_answer(client: openai.OpenAI, image: bytes) -> None:
    media_type = "image/png" if image.startswith(image_bounds.PNG_SIGNATURE) else "image/jpeg"
    assert ask(client, data_url(image, media_type)).usage is not None


def test_images_are_checked_off_the_event_loop(
    client: openai.OpenAI, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []

    def recording(data: bytes) -> image_bounds.ImageInfo:
        threads.append(threading.current_thread().name)
        return image_bounds.inspect_image(data)

    monkeypatch.setattr(images, "inspect_image", recording)
    monkeypatch.setattr(ollama_images, "inspect_image", recording)
    ask(client, data_url(png(32, 24)))
    image = base64.b64encode(png(8, 8)).decode()
    common = {"model": VISION, "stream": False, "options": {"num_predict": 1}}
    message = {"role": "user", "content": "Hi", "images": [image]}
    root = base_url.removesuffix("/v1")
    chat = httpx.post(f"{root}/api/chat", json={**common, "messages": [message]}, timeout=120)
    assert chat.status_code == 200
    generate = {**common, "prompt": "Hi", "images": [image]}
    assert httpx.post(f"{root}/api/generate", json=generate, timeout=120).status_code == 200
    assert len(threads) == 3 and "ember-server" not in threads, threads
