"""Ollama's ``images`` (a list of base64 strings on a chat message, or on /api/generate) as the
OpenAI routes' ``image_url`` content parts, so both APIs share one path to the engine.

Each image is checked here first, with Ollama's names for where it is (``messages[0].images[1]``
or ``images[0]``): its base64 length is capped before it is decoded, then the bytes go through
the engine's header checks (PNG or JPEG, size limits). The decoded bytes ride on the parts, so
the OpenAI conversion does not decode them again; a model without a projector is refused there
(``model_not_vision``), once the model is known.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from app.engine.gguf_format import human_bytes, mib_text
from app.engine.image_bounds import MAX_IMAGE_BYTES, ImageError, inspect_image
from app.server import schemas as openai
from app.server.errors import APIError

# The base64 text of the largest image the engine takes (padding and a few newlines allowed)
MAX_BASE64_CHARS = 4 * ((MAX_IMAGE_BYTES + 2) // 3) + 100


def decode_image(text: str, where: str) -> tuple[bytes, str]:
    """One Ollama image: its bytes and a media type. Raises APIError naming ``where``."""
    if text[:5].lower() == "data:":  # some clients send a data URL: take its base64
        text = text.partition(",")[2]
    if len(text) > MAX_BASE64_CHARS:
        raise APIError(
            400,
            f"Invalid '{where}': the image is {human_bytes(len(text) * 3 // 4)}; images up to "
            f"{mib_text(MAX_IMAGE_BYTES)} are accepted. Send it smaller (or as JPEG).",
            param=where,
            code="image_too_large",
        )
    try:
        raw = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise APIError(
            400,
            f"Invalid '{where}': not base64. Send each image as base64 text of a PNG or JPEG file.",
            param=where,
            code="invalid_image",
        ) from None
    try:
        info = inspect_image(raw)
    except ImageError as e:
        message = f"Invalid '{where}': {e.message}"
        raise APIError(400, message, param=where, code="invalid_image") from None
    return raw, f"image/{info.format}"


def image_parts(
    images: list[str], text: str, where: str, decoded: list[bytes]
) -> list[dict[str, Any]]:
    """A message's content as OpenAI parts: the text, then one ``image_url`` part per image
    (its bytes appended to ``decoded``, in order, for :func:`keep_decoded`)."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for j, image in enumerate(images):
        raw, media_type = decode_image(image, f"{where}[{j}]")
        decoded.append(raw)
        url = f"data:{media_type};base64,{base64.b64encode(raw).decode('ascii')}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def keep_decoded(body: openai.ChatCompletionRequest, decoded: list[bytes]) -> None:
    """Hand the bytes decoded here to the validated body's image parts, in order, so the
    OpenAI conversion does not decode them again."""
    parts = [
        part
        for message in body.messages
        if isinstance(message.content, list)
        for part in message.content
        if part.type == "image_url"
    ]
    for part, raw in zip(parts, decoded, strict=True):
        part._image = raw
