"""Images attached to a message, for a model with a vision projector.

An image is stored like a document (hash-named, in EMBER_HOME/attachments) and checked in
Python by the engine's own :func:`~app.engine.image_bounds.inspect_image` (PNG or JPEG, its size
from the header, within the limits the engine takes), so a chip says what is wrong before the
message is sent rather than the engine after. No pixels are decoded here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.attachments.errors import AttachmentError, UnreadableError
from app.attachments.opening import open_regular
from app.attachments.store import safe_suffix, stored_path
from app.engine.image_bounds import MAX_IMAGE_BYTES, ImageError, inspect_image

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg"})
IMAGE_KIND = "image"


class BadImageError(AttachmentError):
    """An image the engine would refuse; ``str(error)`` is its one sentence."""


class StoredCopyError(AttachmentError):
    """A recorded image whose stored copy is gone or is no longer that image."""

    def __init__(self, name: str, what: str) -> None:
        super().__init__(f"{name}: its stored copy {what}; attach the image again.")


@dataclass(frozen=True, slots=True)
class ImageFile:
    """A checked image: its display name, byte size, hash and pixel size."""

    name: str
    size: int
    sha256: str
    format: str  # "png" or "jpeg"
    width: int
    height: int

    @property
    def pixels(self) -> str:
        return f"{self.width}×{self.height}"


def is_image_name(path: Path | str) -> bool:
    """Whether a file is attached as an image (by its name: PNG or JPEG)."""
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


def is_image_entry(entry: dict[str, Any]) -> bool:
    """Whether a message's attachment entry is an image (see :func:`image_entry`)."""
    return entry.get("kind") == IMAGE_KIND


def check_image(data: bytes, name: str) -> ImageFile:
    """``data`` as an :class:`ImageFile`; raises :class:`BadImageError` with its sentence."""
    try:
        info = inspect_image(data)
    except ImageError as e:
        raise BadImageError(f"{name}: {e}") from e
    return ImageFile(name, len(data), info.sha256, info.format, info.width, info.height)


def read_image(path: Path, name: str | None = None) -> tuple[ImageFile, bytes]:
    """Read and check an image file (a stored copy, or the user's file)."""
    name = name or path.name
    try:
        with open_regular(path) as f:  # a FIFO or a device is refused before it is read
            data = f.read(MAX_IMAGE_BYTES + 1)
    except OSError as e:
        raise UnreadableError(name, e.strerror or type(e).__name__) from e
    return check_image(data, name), data


def image_entry(image: ImageFile, suffix: str) -> dict[str, Any]:
    """What a user message records of an attached image (enough to find the stored copy)."""
    return {
        "name": image.name,
        "size": image.size,
        "sha256": image.sha256,
        "suffix": safe_suffix(suffix),
        "kind": IMAGE_KIND,
        "width": image.width,
        "height": image.height,
    }


def entry_bytes(entry: dict[str, Any]) -> bytes:
    """The stored bytes of a recorded image, checked again (the file may have been damaged or
    removed since). Raises :class:`AttachmentError` or ``ValueError`` (a bad hash)."""
    path = stored_path(str(entry.get("sha256", "")), str(entry.get("suffix") or ""))
    name = str(entry.get("name") or path.name)
    if not path.exists():
        raise StoredCopyError(name, "is missing")
    image, data = read_image(path, name)
    if image.sha256 != entry.get("sha256"):
        raise StoredCopyError(name, "has changed")
    return data
