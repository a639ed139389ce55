"""Attached images in the core: checked as the engine checks them (one sentence naming the
file when it would refuse one), stored by hash like documents (a pasted picture too, from its
bytes), recorded in a message with their pixel size, and read back only while the stored copy
is the image the message recorded."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from app.attachments.image import (
    BadImageError,
    StoredCopyError,
    check_image,
    entry_bytes,
    image_entry,
    is_image_entry,
    is_image_name,
    read_image,
)
from app.attachments.store import attachments_dir, store, store_bytes, stored_path
from tests.helpers.images import png


def test_png_and_jpeg_names_are_images_and_others_are_not() -> None:
    assert is_image_name("a.PNG") and is_image_name("b.jpg") and is_image_name("c.jpeg")
    assert not is_image_name("d.gif") and not is_image_name("e.pdf")


def test_a_checked_image_has_its_hash_format_and_pixel_size() -> None:
    data = png(40, 30)
    image = check_image(data, "tiles.png")
    assert (image.format, image.width, image.height, image.pixels) == ("png", 40, 30, "40×30")
    assert image.sha256 == hashlib.sha256(data).hexdigest() and image.size == len(data)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "tiles.png: The image is empty."),
        (b"GIF89a" + b"\0" * 40, "tiles.png: This is not a PNG or JPEG image"),
        (b"\x89PNG\r\n\x1a\n" + b"\0" * 40, "tiles.png: The PNG image is damaged"),
    ],
)
def test_an_image_the_engine_would_refuse_is_one_sentence_naming_it(data: bytes, says: str) -> None:
    with pytest.raises(BadImageError) as caught:
        check_image(data, "tiles.png")
    assert str(caught.value).startswith(says)


def test_a_pasted_picture_is_stored_from_its_bytes_once(ember_home: Path) -> None:
    data = png(8, 8)
    first = store_bytes(data, "Pasted image 1.png")
    again = store_bytes(data, "Pasted image 2.png")
    assert first.path == again.path == stored_path(first.sha256, ".png")
    assert first.new and not again.new
    assert first.path.read_bytes() == data
    assert not list(attachments_dir().rglob(".incoming.*"))  # no temp file left


def test_a_recorded_image_is_read_back_from_its_stored_copy(
    tmp_path: Path, ember_home: Path
) -> None:
    source = tmp_path / "Harbour.PNG"
    source.write_bytes(png(16, 12))
    stored = store(source)
    image, data = read_image(stored.path, source.name)
    entry = image_entry(image, source.suffix)
    assert is_image_entry(entry)
    assert entry == {
        "name": "Harbour.PNG",
        "size": len(data),
        "sha256": stored.sha256,
        "suffix": ".png",
        "kind": "image",
        "width": 16,
        "height": 12,
    }
    assert entry_bytes(entry) == source.read_bytes()


def test_a_missing_or_changed_stored_copy_is_said_not_sent(
    tmp_path: Path, ember_home: Path
) -> None:
    stored = store_bytes(png(16, 12), "a.png")
    image, _ = read_image(stored.path, "a.png")
    entry = image_entry(image, ".png")
    stored.path.write_bytes(png(16, 12, seed=5))  # damaged since: another picture
    with pytest.raises(StoredCopyError, match=r"a\.png: its stored copy has changed; attach"):
        entry_bytes(entry)
    stored.path.unlink()
    with pytest.raises(StoredCopyError, match=r"a\.png: its stored copy is missing; attach"):
        entry_bytes(entry)
    with pytest.raises(ValueError):
        entry_bytes({**entry, "sha256": "../../etc/passwd"})
