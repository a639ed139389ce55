"""What the chat needs to know about images beyond the attachments: whether the chat's model
can read them (``image_refusal``, the sentence the chips and Send show when it cannot), and how
they go to a remote provider (OpenAI ``image_url`` parts with data URLs, ``remote_content``).

A local model reads images when it was loaded with a vision projector (``LoadedModel.vision``).
A remote model is sent them as content parts; a provider whose model takes no images says so
in its own error, shown on the answer.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from app.engine.image_bounds import JPEG_SIGNATURE
from app.engine.media import MEDIA_MARKER
from app.engine.provider_ids import is_remote_id
from app.engine.types import LoadedModel
from app.ui.engine_session import model_name


def cannot_read_images(model: str) -> str:
    return f"{model} can't read images; load a vision model."


def image_refusal(target: str | None, loaded: LoadedModel | None) -> str:
    """Why the images attached now cannot go to ``target`` (the chat's model: a file or a
    remote id), or '' when they can (or it is not known yet: a model still to load is asked
    again when it has loaded, and its answer names what it left out)."""
    if target is None or is_remote_id(target):
        return ""
    if loaded is not None and loaded.path == target and not loaded.vision:
        return cannot_read_images(model_name(target))
    return ""


def data_url(image: bytes) -> str:
    mime = "image/jpeg" if image.startswith(JPEG_SIGNATURE) else "image/png"
    return f"data:{mime};base64,{base64.b64encode(image).decode('ascii')}"


def remote_content(text: str, images: Sequence[bytes]) -> str | list[dict[str, Any]]:
    """A message's content for a provider: its text, or its images (as ``image_url`` parts,
    in order) then its text without the local engine's markers."""
    if not images:
        return text
    marks = "\n".join([MEDIA_MARKER] * len(images)) + "\n"
    text = text[len(marks) :] if text.startswith(marks) else text
    parts: list[dict[str, Any]] = [
        {"type": "image_url", "image_url": {"url": data_url(image)}} for image in images
    ]
    return [*parts, {"type": "text", "text": text}]
