"""``ember run MODEL --attach photo.png PROMPT``: image files for a vision model.

An attached file is an image when its name ends in .png/.jpg/.jpeg (its bytes are then checked to
be one); the rest are documents (:mod:`app.attachments`). Each image is read (never more than
the engine's cap) and checked with the engine's header checks before any model loads, so a bad
image is one line and exit 1 without waiting for a load.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from app.attachments.opening import open_regular
from app.cli import CliError
from app.engine.gguf_format import human_bytes, mib_text
from app.engine.image_bounds import MAX_IMAGE_BYTES, MAX_IMAGES, ImageError, inspect_image
from app.engine.media import MEDIA_MARKER

IMAGE_SUFFIXES: Final = (".png", ".jpg", ".jpeg")


def is_image_file(path: Path) -> bool:
    """An image by its name, as the document reader goes by names too."""
    return path.suffix.lower() in IMAGE_SUFFIXES


def split_attachments(names: Sequence[str]) -> tuple[list[Path], list[Path]]:
    """``--attach`` files as (documents, images), each in the order given."""
    documents: list[Path] = []
    images: list[Path] = []
    for name in names:
        path = Path(name).expanduser()
        (images if is_image_file(path) else documents).append(path)
    return documents, images


def read_images(paths: Sequence[Path]) -> tuple[bytes, ...]:
    """The images' bytes, each checked (PNG or JPEG, size limits). Raises CliError naming
    the file, with what to do."""
    if len(paths) > MAX_IMAGES:
        raise CliError(f"{len(paths)} images attached; attach at most {MAX_IMAGES} at a time.")
    out: list[bytes] = []
    for path in paths:
        try:
            with open_regular(path) as f:  # a FIFO or a device is refused before it is read
                data = f.read(MAX_IMAGE_BYTES + 1)  # past the cap is enough to refuse it
                if len(data) > MAX_IMAGE_BYTES:
                    size = os.fstat(f.fileno()).st_size
                    raise CliError(
                        f"{path}: the image is {human_bytes(size)}; images up to "
                        f"{mib_text(MAX_IMAGE_BYTES)} are accepted. Save it smaller (or as "
                        "JPEG) and attach it again."
                    )
        except FileNotFoundError:
            raise CliError(f"{path}: no such file.") from None
        except IsADirectoryError:
            raise CliError(f"{path} is a folder; attach an image file.") from None
        except OSError as e:
            raise CliError(f"Cannot read {path}: {e.strerror or e}.") from None
        try:
            inspect_image(data)
        except ImageError as e:
            raise CliError(f"{path}: {e}") from None
        out.append(data)
    return tuple(out)


def with_images(text: str, count: int) -> str:
    """The user message for ``count`` images and ``text``: the images first, one media marker
    each (a marker typed in the text is removed: the engine would take it for an image)."""
    text = text.replace(MEDIA_MARKER, "")
    return "".join(MEDIA_MARKER + "\n" for _ in range(count)) + text


def no_projector_message(model: str) -> str:
    return (
        f"{model} takes no images: it has no vision projector (mmproj*.gguf) in its folder. "
        "Load it with one: --mmproj FILE, or choose a vision model."
    )
