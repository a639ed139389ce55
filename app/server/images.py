"""Images in chat requests: ``image_url`` content parts holding data URLs.

Each part's data URL is checked and decoded before a model is resolved (so a bad image never
waits for a load): its length is capped before base64 is decoded, then the bytes go through
the engine's header checks (PNG or JPEG, size limits) in Python. A 400 names the part
(``messages[i].content[j].image_url``) in its message. http(s) URLs are refused: fetching
them would make the server reach out to any address a client names (a switch in Settings to
allow them is to come).
"""

from __future__ import annotations

import base64
import binascii

from app.engine.vision import MAX_IMAGE_BYTES, ImageError, inspect_image
from app.server import schemas
from app.server.errors import APIError

# The base64 text of the largest image the engine takes, plus room for the "data:...," head.
MAX_DATA_URL_CHARS = 4 * ((MAX_IMAGE_BYTES + 2) // 3) + 100
_MEDIA_TYPES = ("image/png", "image/jpeg", "image/jpg")


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
            "image inline as a data URL: data:image/png;base64,...",
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
            f"{MAX_IMAGE_BYTES / 1e6:.0f} MB ({MAX_DATA_URL_CHARS:,} characters as base64) "
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
