"""Images bounded before C: what an image is, read in Python before llama.cpp decodes it.

An image is sniffed first (PNG or JPEG only, by its signature; its width and height read from
its header) and refused over :data:`MAX_IMAGE_BYTES`, :data:`MAX_IMAGE_SIDE` or
:data:`MAX_IMAGE_PIXELS` before stb_image decodes it. The header's size is not the whole cost,
so two more bounds hold: a PNG's compressed pixel data is inflated (and thrown away) in Python,
and refused once it holds more than its size needs (stb_image would inflate a small
"decompression bomb" into gigabytes); a JPEG over :data:`MAX_JPEG_SCANS` scans is refused
(stb_image decodes every scan over the whole image, so a small file of repeated scans would
hold the engine thread for hours). The API, the app's attachments and ``ember run --image``
all call :func:`inspect_image`; :mod:`app.engine.vision` calls it again before the bitmap.
"""

from __future__ import annotations

import hashlib
import re
import struct
import zlib
from dataclasses import dataclass

from app.engine.gguf_format import MIB, human_bytes, mib_text
from app.engine.types import BadRequestError

MAX_IMAGE_BYTES = 20 * MIB
MAX_IMAGE_SIDE = 8192
MAX_IMAGE_PIXELS = 24_000_000  # 72 MB once decoded to RGB
MAX_IMAGES = 16  # per prompt

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_SIGNATURE = b"\xff\xd8\xff"
# JPEG start-of-frame markers (they carry the size); C4, C8 and CC are other segments
_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_JPEG_MAX_SEGMENTS = 4096
# A progressive JPEG has about 10 scans (libjpeg's script); each is decoded over the whole image
MAX_JPEG_SCANS = 64
# an entropy-coded segment ends at a marker: 0xFF followed by neither a stuffed 0 nor a restart
_JPEG_NEXT_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7]")
# PNG: channels by colour type; Adam7's passes (x, y, x step, y step)
_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
_ADAM7 = (
    (0, 0, 8, 8),
    (4, 0, 8, 8),
    (0, 4, 4, 8),
    (2, 0, 4, 4),
    (0, 2, 2, 4),
    (1, 0, 2, 2),
    (0, 1, 1, 2),
)
_PNG_SLACK = 1024 * 1024  # inflated bytes allowed past what the size needs
_PNG_MAX_CHUNKS = 65536
_INFLATE_STEP = 1024 * 1024


class ImageError(BadRequestError):
    """An image Ember will not hand to llama.cpp: not PNG/JPEG, damaged, or too large."""

    code = "bad_image"


@dataclass(frozen=True)
class ImageInfo:
    """What the header says about an image, read in Python before any C code sees it."""

    format: str  # "png" or "jpeg"
    width: int
    height: int
    sha256: str  # of the file's bytes: the image's identity for caching


# ---- images, in Python ------------------------------------------------------------------


def inspect_image(
    data: bytes,
    *,
    max_bytes: int = MAX_IMAGE_BYTES,
    max_side: int = MAX_IMAGE_SIDE,
    max_pixels: int = MAX_IMAGE_PIXELS,
) -> ImageInfo:
    """Read an image's format and size from its header; raise :class:`ImageError` if Ember
    will not decode it. Reads only headers: nothing here decodes pixels."""
    if not data:
        raise ImageError("The image is empty. Attach a PNG or JPEG file.")
    if len(data) > max_bytes:
        raise ImageError(
            f"The image is {human_bytes(len(data))}; images up to {mib_text(max_bytes)} "
            "are accepted. Save it smaller (or as JPEG) and attach it again."
        )
    if data.startswith(PNG_SIGNATURE):
        fmt, (width, height) = "png", _png_size(data)
    elif data.startswith(JPEG_SIGNATURE):
        fmt, (width, height, scans) = "jpeg", _jpeg_frame(data)
    else:
        raise ImageError(
            "This is not a PNG or JPEG image, the formats Ember sends to a vision model. "
            "Convert it to PNG or JPEG and attach it again."
        )
    if width <= 0 or height <= 0:
        raise ImageError(
            f"The {fmt.upper()} image says it is {width}x{height} pixels; it is damaged."
        )
    if width > max_side or height > max_side or width * height > max_pixels:
        raise ImageError(
            f"The image is {width}x{height} pixels; images up to {max_side} pixels a side and "
            f"{max_pixels / 1e6:.0f} megapixels are accepted. Scale it down and attach it again."
        )
    if fmt == "jpeg" and scans > MAX_JPEG_SCANS:
        raise ImageError(
            f"The JPEG image has more than {MAX_JPEG_SCANS} scans (a progressive JPEG has about "
            "10), each decoded over the whole image; it is damaged or made to stall the "
            "decoder. Save it again, or as PNG."
        )
    if fmt == "png":
        _check_png_data(data, width, height)
    return ImageInfo(fmt, width, height, hashlib.sha256(data).hexdigest())


def _png_size(data: bytes) -> tuple[int, int]:
    # The first chunk must be IHDR (13 bytes: width, height, depth, colour type, ...).
    if len(data) < 33 or data[12:16] != b"IHDR" or data[8:12] != b"\0\0\0\x0d":
        raise ImageError("The PNG image is damaged (its header is missing). Save it again.")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _jpeg_frame(data: bytes) -> tuple[int, int, int]:
    """The JPEG's width and height (from its start-of-frame) and how many scans follow, counted
    up to one past :data:`MAX_JPEG_SCANS`; bounded by the data and a count of segments."""
    size: tuple[int, int] | None = None
    scans = 0
    i = 2
    for _ in range(_JPEG_MAX_SEGMENTS):
        while i < len(data) and data[i] == 0xFF:  # fill bytes before a marker
            i += 1
        if i + 3 > len(data):
            break
        marker = data[i]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            i += 1
            continue
        (length,) = struct.unpack(">H", data[i + 1 : i + 3])
        if marker in _JPEG_SOF and size is None:
            if i + 8 > len(data):
                break
            height, width = struct.unpack(">HH", data[i + 4 : i + 8])
            size = (width, height)
        if marker == 0xD9 or length < 2:
            break
        i += 1 + length
        if marker == 0xDA:  # a scan: its entropy-coded data runs to the next marker
            scans += 1
            if scans > MAX_JPEG_SCANS:
                break
            found = _JPEG_NEXT_MARKER.search(data, i)
            if found is None:
                break
            i = found.start() + 1
    else:
        if size is not None:  # as many segments as a scan bomb could use
            raise ImageError(
                f"The JPEG image has more than {_JPEG_MAX_SEGMENTS} segments; it is damaged. "
                "Save it again."
            )
    if size is None:
        raise ImageError("The JPEG image is damaged (no image size in it). Save it again.")
    return size[0], size[1], scans


def _png_raw_bytes(width: int, height: int, depth: int, colour: int, interlaced: bool) -> int:
    """The bytes a PNG's pixel data inflates to: each row's bytes plus its filter byte, for
    the whole image or each of Adam7's seven passes (unknown types: the largest pixel)."""
    bits = depth * _PNG_CHANNELS[colour] if colour in _PNG_CHANNELS and depth <= 16 else 64
    passes = _ADAM7 if interlaced else ((0, 0, 1, 1),)
    total = 0
    for x0, y0, dx, dy in passes:
        w, h = (width - x0 + dx - 1) // dx, (height - y0 + dy - 1) // dy
        if w > 0 and h > 0:
            total += h * (1 + (w * bits + 7) // 8)
    return total


def _check_png_data(data: bytes, width: int, height: int) -> None:
    """Inflate the PNG's IDAT data in steps, keeping none of it, and refuse the image once it
    holds more than its size needs. Damaged data stops the count: the decoder refuses it."""
    depth, colour, interlace = data[24], data[25], data[28]
    limit = _png_raw_bytes(width, height, depth, colour, interlace == 1) + _PNG_SLACK
    inflater = zlib.decompressobj()
    view = memoryview(data)
    inflated = 0
    i = 8
    try:
        for _ in range(_PNG_MAX_CHUNKS):
            if i + 8 > len(data) or inflater.eof:
                return
            length, kind = struct.unpack(">I4s", data[i : i + 8])
            start = i + 8
            end = min(start + length, len(data))
            if kind == b"IEND":
                return
            if kind == b"IDAT":
                piece: bytes | memoryview = view[start:end]
                while True:
                    out = inflater.decompress(piece, _INFLATE_STEP)
                    inflated += len(out)
                    if inflated > limit:
                        raise ImageError(
                            f"The PNG image's pixel data inflates to more than the "
                            f"{human_bytes(limit)} its {width}x{height} pixels need; it is "
                            "damaged or made to exhaust memory. Save it again."
                        )
                    piece = inflater.unconsumed_tail
                    if not piece and len(out) < _INFLATE_STEP:
                        break
            i = end + 4
    except zlib.error:
        return
    raise ImageError(
        f"The PNG image is split into more than {_PNG_MAX_CHUNKS} chunks; it is damaged. "
        "Save it again."
    )
