"""``ember run --attach FILE … PROMPT`` as a user runs it: real files, real subprocesses, and
(once) the real model."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import builders
from tests.helpers.cli import ember


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ember: error: "), stderr
    return lines[0]


def test_a_file_ember_cannot_read_is_one_line_before_the_model_loads(tmp_path: Path) -> None:
    """The model named does not exist: the file's error comes first, so the files are read
    before any model is looked for or loaded."""
    garbage = tmp_path / "junk.pdf"
    garbage.write_bytes(builders.pdf_bytes_garbage())
    binary = tmp_path / "blob.txt"
    binary.write_bytes(builders.png_bytes())
    picture = tmp_path / "photo.gif"  # a .png is an image for a vision model now
    picture.write_bytes(builders.png_bytes())
    locked = builders.encrypted_pdf(tmp_path / "locked.pdf", builders.short_pdf(tmp_path / "s.pdf"))
    good = tmp_path / "good.txt"
    good.write_text("fine")
    missing_model = str(tmp_path / "no-model.gguf")
    for bad, says in (
        (garbage, "junk.pdf could not be read as a PDF"),
        (binary, "blob.txt holds binary data"),
        (picture, "Ember does not read .gif files"),
        (locked, "locked.pdf is protected by a password"),
        (tmp_path / "gone.txt", "gone.txt cannot be opened"),
    ):
        r = ember("run", missing_model, "--attach", str(good), "--attach", str(bad), "Summarize")
        assert r.returncode == 1 and r.stdout == ""
        assert says in _one_error_line(r.stderr)


def test_attach_needs_a_prompt_and_show_sources_needs_attach(tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text("fine")
    for args in (
        ("--attach", str(good)),  # interactive: no PROMPT
        ("--attach", str(good), "--raw", "Go on"),
        ("--show-sources", "Hello"),
    ):
        r = ember("run", str(tmp_path / "m.gguf"), *args)
        assert r.returncode == 1
        assert "--attach" in _one_error_line(r.stderr)


def test_the_answer_comes_after_the_sources_with_the_facts_page(
    gemma_path: Path, tmp_path: Path
) -> None:
    long = builders.long_pdf(tmp_path / "long.pdf")
    short = builders.short_pdf(tmp_path / "short.pdf")
    r = ember(
        "run",
        str(gemma_path),
        "--attach",
        str(long),
        "--attach",
        str(short),
        "--show-sources",
        builders.QUESTION,
        "-c",
        "2048",
        "-n",
        "8",
        "--temp",
        "0",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Sources:\n[1] short.pdf (whole)\n")
    cited = re.findall(r"^\[(\d+)\] (.+)$", r.stdout, re.MULTILINE)
    excerpts = [where for _, where in cited[1:]]
    assert f"long.pdf, page {builders.FACT_PAGE}" in excerpts[:3], r.stdout
    assert "    " + builders.FACT in r.stdout  # the chunk's text, indented
    assert r.stderr.strip() == (
        "(long.pdf is too long to give whole: the model gets its passages most relevant "
        "to the prompt.)"
    )
