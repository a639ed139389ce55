"""A tool's result: text for the model (bounded, and saying so when cut) and parts for people
(text, pretty JSON, image thumbnails).

A result is data for the model, never an instruction to Ember: nothing in it is acted on.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

MAX_RESULT_CHARS = 16_000  # what the model sees of one result (a small context fills fast)
MAX_IMAGES = 4
MAX_IMAGE_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ToolImage:
    mime: str
    data: bytes


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a call returned. ``text`` is what goes back to the model (at most
    :data:`MAX_RESULT_CHARS` plus a note when cut); ``structured`` is the server's JSON, if any."""

    text: str
    is_error: bool = False
    truncated: bool = False
    images: tuple[ToolImage, ...] = ()
    structured: Any = None
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """For the conversation store (images as base64, already bounded)."""
        return {
            "text": self.text,
            "is_error": self.is_error,
            "truncated": self.truncated,
            "images": [
                {"mime": i.mime, "data": base64.b64encode(i.data).decode()} for i in self.images
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolOutput:
        images = []
        for item in data.get("images") or []:
            try:
                images.append(ToolImage(str(item["mime"]), base64.b64decode(item["data"])))
            except (KeyError, TypeError, binascii.Error):
                continue
        return cls(
            text=str(data.get("text", "")),
            is_error=bool(data.get("is_error", False)),
            truncated=bool(data.get("truncated", False)),
            images=tuple(images),
        )


def error_output(message: str) -> ToolOutput:
    """A call that did not happen or failed on Ember's side, told to the model as a result."""
    return ToolOutput(text=f"Error: {message}", is_error=True)


def truncate(text: str, limit: int = MAX_RESULT_CHARS) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    note = (
        f"\n[Ember: the result was {len(text):,} characters long; only the first {limit:,} "
        "are shown.]"
    )
    return text[:limit] + note, True


def from_mcp(result: Any) -> ToolOutput:
    """An MCP ``CallToolResult`` as a :class:`ToolOutput`."""
    parts: list[str] = []
    images: list[ToolImage] = []
    notes: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(block.text))
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {block.mime_type}]")
            image = _image(block) if kind == "image" else None
            if image is not None and len(images) < MAX_IMAGES:
                images.append(image)
            elif kind == "image":
                notes.append("an image was left out (too large or too many)")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(str(text) if text is not None else f"[resource: {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource: {block.uri}]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, indent=2))
    text, cut = truncate("\n".join(parts))
    return ToolOutput(
        text=text,
        is_error=bool(getattr(result, "is_error", False)),
        truncated=cut,
        images=tuple(images),
        structured=structured,
        notes=tuple(notes),
    )


def _image(block: Any) -> ToolImage | None:
    data = str(getattr(block, "data", ""))
    if len(data) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        return None
    try:
        return ToolImage(str(block.mime_type), base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None


def pretty(text: str) -> str:
    """``text`` as indented JSON when it is JSON, else as it is (for the result under a card)."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.dumps(json.loads(stripped), ensure_ascii=False, indent=2)
        except ValueError:
            pass
    return text
