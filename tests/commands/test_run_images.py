"""``ember run MODEL --attach photo.png PROMPT`` and the projector a model loads with.

Real subprocesses and, where an answer is needed, the real test model with the tiny built
projector (tests/helpers/projector.py: random weights, so the answer means nothing; what is
proved is that the image goes image -> projector -> embeddings -> decode and counts in the
usage). The model file is linked into a folder of the test's own, as the library keeps a model
and its mmproj*.gguf side by side.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from app.cli import CliError
from app.commands.options import add_load_flags, model_load_params
from tests.helpers.cli import ember
from tests.helpers.images import png
from tests.helpers.projector import IMAGE_TOKENS, model_folder


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ember: error: "), stderr
    return lines[0]


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_load_flags(parser)
    return parser.parse_args(list(argv))


def test_a_model_loads_with_the_projector_in_its_folder_unless_told_otherwise(
    tmp_path: Path,
) -> None:
    model = tmp_path / "m" / "model-Q4_K_M.gguf"
    model.parent.mkdir()
    model.write_bytes(b"GGUF")
    assert model_load_params(_args(), model).mmproj is None  # no projector: text only
    for name in ("mmproj-model-Q8_0.gguf", "mmproj-model-f16.gguf"):
        (model.parent / name).write_bytes(b"GGUF")
    assert model_load_params(_args(), model).mmproj == str(model.parent / "mmproj-model-f16.gguf")
    other = tmp_path / "mine.gguf"
    assert model_load_params(_args("--mmproj", str(other)), model).mmproj == str(other)
    assert model_load_params(_args("--no-mmproj"), model).mmproj is None
    with pytest.raises(CliError, match="contradict"):
        model_load_params(_args("--no-mmproj", "--mmproj", str(other)), model)


def test_a_bad_image_is_one_line_before_any_model_is_looked_for(tmp_path: Path) -> None:
    fake = tmp_path / "photo.png"
    fake.write_bytes(b"not a picture at all")
    huge = tmp_path / "huge.jpg"
    huge.write_bytes(b"\xff\xd8\xff" + bytes(21 * 1024 * 1024))
    missing_model = str(tmp_path / "no-model.gguf")
    for bad, says in (
        (fake, "photo.png: This is not a PNG or JPEG image"),
        (huge, "huge.jpg: the image is 22.0 MB; images up to 20 MiB are accepted"),
        (tmp_path / "gone.png", "gone.png: no such file"),
    ):
        r = ember("run", missing_model, "--attach", str(bad), "What is it?")
        assert r.returncode == 1 and r.stdout == ""
        assert says in _one_error_line(r.stderr)


def test_an_image_for_a_model_without_a_projector_says_so_before_loading(
    gemma_path: Path, tmp_path: Path
) -> None:
    picture = tmp_path / "photo.png"
    picture.write_bytes(png(32, 32))
    plain = model_folder(gemma_path, tmp_path / "plain", projector=False)
    vision = model_folder(gemma_path, tmp_path / "vision", projector=True)
    for model, flags in ((plain, ()), (vision, ("--no-mmproj",))):
        r = ember("run", str(model), *flags, "--attach", str(picture), "What is it?")
        assert r.returncode == 1 and r.stdout == ""
        line = _one_error_line(r.stderr)
        assert "takes no images" in line and "--mmproj FILE" in line


def test_an_attached_image_reaches_a_model_with_a_projector_in_its_folder(
    gemma_path: Path, tmp_path: Path
) -> None:
    picture = tmp_path / "photo.png"
    picture.write_bytes(png(32, 32))
    notes = tmp_path / "notes.txt"
    notes.write_text("The cat in the photo is called Pixel.")
    model = model_folder(gemma_path, tmp_path / "vision", projector=True)
    r = ember(
        "run",
        str(model),
        "--attach",
        str(picture),
        "--attach",
        str(notes),  # a document keeps working beside an image
        "What is in this picture?",
        "-c",
        "1024",
        "-n",
        "3",
        "--temp",
        "0",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["finish_reason"] in ("stop", "length")
    # the image's positions are in the prompt: more than the words alone could make
    assert summary["usage"]["prompt_tokens"] > IMAGE_TOKENS + 10
