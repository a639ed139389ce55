"""Images in chat requests: ``image_url`` content parts holding data URLs, or http(s) URLs
when the user allowed them.

Each part's data URL is checked and decoded before a model is resolved (so a bad image never
waits for a load): its length is capped before base64 is decoded, then the bytes go through
the engine's header checks (PNG or JPEG, size limits) in Python. A 400 names the part
(``messages[i].content[j].image_url``) in its message.

http(s) URLs make the server reach out to an address a client names, so they are refused
unless the server's ``image_urls`` switch is on (Settings, or ``ember serve --image-urls``).
Then :func:`fetch_image_urls` fetches them on the event loop before the body is checked: only
http and https; only public addresses unless ``image_urls_local`` is on too
(:mod:`app.server.url_guard`: the host is resolved once, every address checked, and the
connection made to a checked address with the name kept for the Host header and the TLS
certificate check); each of at most ``MAX_REDIRECTS`` redirects checked again the same way;
the body read in a stream and cut off past ``MAX_IMAGE_BYTES``; a deadline for the whole
fetch; and the bytes through the same header checks as a data URL.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from app.engine.gguf_format import human_bytes, mib_text
from app.engine.image_bounds import MAX_IMAGE_BYTES, MAX_IMAGES, ImageError, inspect_image
from app.server import schemas, url_guard
from app.server.errors import APIError

# The base64 text of the largest image the engine takes, plus room for the "data:...," head.
MAX_DATA_URL_CHARS = 4 * ((MAX_IMAGE_BYTES + 2) // 3) + 100
_MEDIA_TYPES = ("image/png", "image/jpeg", "image/jpg")
FETCH_SECONDS = 20.0  # for one image URL, redirects included
MAX_REDIRECTS = 3
_REDIRECTS = (301, 302, 303, 307, 308)

if TYPE_CHECKING:
    import httpx


def decode_images(messages: list[schemas.Message]) -> tuple[bytes, ...]:
    """Decode every image part (once; the bytes stay on the part), in message order: one
    per media marker that :meth:`schemas.Message.text` puts in the text. Raises APIError."""
    out: list[bytes] = []
    for i, message in enumerate(messages):
        if isinstance(message.content, str) or message.content is None:
            continue
        for j, part in enumerate(message.content):
            if part.type != "image_url":
                continue
            if part._image is None:
                part._image = _decode(part, f"messages[{i}].content[{j}].image_url")
            out.append(part._image)
    return tuple(out)


def _decode(part: schemas.ContentPart, where: str) -> bytes:
    """The part's image bytes; the errors name the part (``where``) in their message, and
    their ``param`` is the message's content, as for any other invalid content."""
    assert part.image_url is not None  # the schema requires it for an image_url part
    url = part.image_url.url
    param = where.rsplit("[", 1)[0]
    head = url[:16].lower()
    if head.startswith(("http://", "https://")):
        raise APIError(
            400,
            f"Invalid '{where}': image URLs (http/https) are off on this server. Send the "
            "image inline as a data URL: data:image/png;base64,... (or allow image URLs in "
            "Ember's API server settings, `ember serve --image-urls`).",
            param=param,
            code="image_url_not_allowed",
        )
    if not head.startswith("data:"):
        raise APIError(
            400,
            f"Invalid '{where}': expected a data URL (data:image/png;base64,...).",
            param=param,
            code="invalid_image_url",
        )
    if len(url) > MAX_DATA_URL_CHARS:
        raise APIError(
            400,
            f"Invalid '{where}': the data URL is {len(url):,} characters; images up to "
            f"{mib_text(MAX_IMAGE_BYTES)} ({MAX_DATA_URL_CHARS:,} characters as base64) "
            "are accepted. Send it smaller (or as JPEG).",
            param=param,
            code="image_too_large",
        )
    meta, comma, data = url.partition(",")
    fields = meta[5:].lower().split(";")
    if not comma or "base64" not in fields[1:]:
        raise APIError(
            400,
            f"Invalid '{where}': the data URL must be base64 (data:image/png;base64,...).",
            param=param,
            code="invalid_image_url",
        )
    if fields[0] and fields[0] not in _MEDIA_TYPES:
        raise APIError(
            400,
            f"Invalid '{where}': {fields[0]} is not taken; send a PNG or JPEG image.",
            param=param,
            code="invalid_image",
        )
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise APIError(
            400,
            f"Invalid '{where}': the data URL's base64 is damaged.",
            param=param,
            code="invalid_image",
        ) from None
    try:
        inspect_image(raw)
    except ImageError as e:
        message = f"Invalid '{where}': {e.message}"
        raise APIError(400, message, param=param, code="invalid_image") from None
    return raw


# ---- http(s) image URLs ---------------------------------------------------------------------


def _is_http(url: str) -> bool:
    return url[:8].lower().startswith(("http://", "https://"))


async def fetch_image_urls(
    messages: list[schemas.Message],
    allowed: bool,
    *,
    local: bool = False,
    seconds: float = FETCH_SECONDS,
) -> None:
    """Fetch every http(s) ``image_url`` part, when ``allowed`` (the server's switch), and
    keep its bytes on the part for :func:`decode_images`; when not allowed, nothing is fetched
    and :func:`decode_images` refuses the URL. Addresses on this computer or a local network
    are refused unless ``local``. Raises APIError naming the part. Async: call it on the
    server's event loop, before the body is checked."""
    if not allowed:
        return
    wanted: list[tuple[schemas.ContentPart, str]] = []
    for i, message in enumerate(messages):
        if isinstance(message.content, str) or message.content is None:
            continue
        for j, part in enumerate(message.content):
            url = part.image_url.url if part.image_url is not None else ""
            if part.type == "image_url" and part._image is None and _is_http(url):
                wanted.append((part, f"messages[{i}].content[{j}].image_url"))
    if not wanted:
        return
    if len(wanted) > MAX_IMAGES:
        raise APIError(
            400,
            f"{len(wanted)} image URLs in one request; send at most {MAX_IMAGES} images.",
            param="messages",
            code="too_many_images",
        )
    for part, where in wanted:
        assert part.image_url is not None
        part._image = await _fetch(part.image_url.url, where, seconds, local)


def _fetch_error(where: str, message: str, code: str = "image_url_fetch_failed") -> APIError:
    return APIError(400, f"Invalid '{where}': {message}", param=where.rsplit("[", 1)[0], code=code)


async def _fetch(url: str, where: str, seconds: float, local: bool) -> bytes:
    try:
        async with asyncio.timeout(seconds):
            data = await _download(url, where, local)
    except TimeoutError:
        raise _fetch_error(
            where, f"the image at {url[:200]} did not arrive within {seconds:.0f} s."
        ) from None
    except APIError:
        raise
    except Exception as e:
        # httpx.HTTPError, and what a client-named URL or a redirect makes httpx raise outside
        # it: InvalidURL ("http://[::1/"), an IDNAError ("https://xn--/"), an ExceptionGroup
        # holding an OverflowError (port 99999)
        reason = str(e) or type(e).__name__
        raise _fetch_error(where, f"cannot fetch {url[:200]}: {reason}.") from None
    try:
        await asyncio.to_thread(inspect_image, data)  # it inflates a PNG's data: off the loop
    except ImageError as e:
        raise _fetch_error(where, f"{url[:200]}: {e.message}", "invalid_image") from None
    return data


async def _download(url: str, where: str, local: bool) -> bytes:
    """The body at ``url`` after at most MAX_REDIRECTS redirects, never more than the cap;
    each hop's address checked (unless ``local``) before anything connects to it."""
    import httpx

    for _hop in range(MAX_REDIRECTS + 1):
        if not _is_http(url):
            raise _fetch_error(
                where,
                f"{url[:200]} is not an http or https URL; only those are fetched.",
                "image_url_not_allowed",
            )
        async with _get(httpx.URL(url), where, local) as response:
            location = response.headers.get("location")
            if response.status_code in _REDIRECTS and location:
                url = str(httpx.URL(url).join(location))
                continue
            if response.status_code != 200:
                raise _fetch_error(
                    where, f"{url[:200]} answered HTTP {response.status_code}, not an image."
                )
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_IMAGE_BYTES:
                raise _too_large(where, url, int(declared))
            data = bytearray()
            async for chunk in response.aiter_raw():
                data += chunk
                if len(data) > MAX_IMAGE_BYTES:
                    raise _too_large(where, url, None)
            return bytes(data)
    raise _fetch_error(
        where, f"{url[:200]} redirects more than {MAX_REDIRECTS} times; link the image itself."
    )


_HEADERS = {"Accept": "image/png, image/jpeg", "Accept-Encoding": "identity"}


@contextlib.asynccontextmanager
async def _get(url: httpx.URL, where: str, local: bool) -> AsyncIterator[httpx.Response]:
    """GET ``url`` as a stream. Unless ``local``, the host is resolved once and the request
    goes to one of its checked addresses (the next on a failed connection), with the name in
    the Host header and as the TLS server name (certificates are checked against it). A new
    client each time: a pooled connection is never reused for another name."""
    import httpx

    if local:
        targets: list[tuple[httpx.URL, dict[str, str], dict[str, str]]] = [(url, {}, {})]
    else:
        try:
            addresses = await url_guard.resolve_public(url.host)
        except url_guard.LocalAddressError:
            raise _fetch_error(
                where,
                f"{str(url)[:200]} is on this computer or its local network, which this server "
                "does not fetch from; link a public image or send it inline as a data URL (a "
                "server's owner can allow local addresses: `ember serve --image-urls-local`).",
                "image_url_not_allowed",
            ) from None
        except url_guard.UnresolvedError:
            raise _fetch_error(
                where, f"cannot fetch {str(url)[:200]}: its host name was not found."
            ) from None
        host = url.netloc.decode("ascii")
        sni = {"sni_hostname": url.host} if url.scheme == "https" else {}
        targets = [(url.copy_with(host=a), {"Host": host}, sni) for a in addresses]
    async with httpx.AsyncClient(follow_redirects=False, headers=_HEADERS) as client:
        for n, (target, headers, extensions) in enumerate(targets, 1):
            request = client.build_request("GET", target, headers=headers, extensions=extensions)
            try:
                response = await client.send(request, stream=True)
            except httpx.ConnectError:
                if n == len(targets):
                    raise
                continue
            try:
                yield response
            finally:
                await response.aclose()
            return


def _too_large(where: str, url: str, size: int | None) -> APIError:
    said = f"is {human_bytes(size)}" if size is not None else "goes on past the limit"
    return _fetch_error(
        where,
        f"the image at {url[:200]} {said}; images up to {mib_text(MAX_IMAGE_BYTES)} are "
        "accepted. Link a smaller one (or a JPEG).",
        "image_too_large",
    )
