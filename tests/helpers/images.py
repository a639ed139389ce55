"""Images for the tests: a real PNG built with the standard library, and the OpenAI-style
messages and data URLs that carry one."""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Any


def png(width: int, height: int, seed: int = 0) -> bytes:
    """A real RGB PNG built with the standard library (a seeded colour pattern)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    rows = b"".join(
        b"\0"
        + bytes((x * 7 + y * 3 + seed * 50 + c * 85) % 256 for x in range(width) for c in range(3))
        for y in range(height)
    )
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def image_messages(url: str, text: str = "What is in this picture?") -> list[Any]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": text},
                {"type": "image_url", "image_url": {"url": url}},
            ],
        }
    ]
