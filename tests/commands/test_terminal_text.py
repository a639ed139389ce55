"""What `ember` prints of names it did not choose (issue 26): a file's name, a model file's
metadata, a pipe given as a file. Control characters (CR, ``ESC [2K``) are shown escaped, so no
printed line can rewrite another; a pipe is one line, never a wait."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import builders
from tests.helpers.cli import ember

HOSTILE = "notes\r\x1b[2Kinnocent"


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_an_error_naming_a_hostile_file_is_escaped(tmp_path: Path) -> None:
    bad = tmp_path / f"{HOSTILE}.pdf"
    bad.write_bytes(builders.pdf_bytes_garbage())
    r = ember("run", str(tmp_path / "no-model.gguf"), "--attach", str(bad), "Summarize")
    assert r.returncode == 1
    line = one_line(r.stderr)
    assert "\x1b" not in r.stderr and "\r" not in r.stderr
    assert "notes\\r\\x1b[2Kinnocent.pdf could not be read as a PDF" in line


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_pipe_given_as_a_file_is_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "notes.txt"
    os.mkfifo(fifo)
    r = ember("run", str(tmp_path / "no-model.gguf"), "--attach", str(fifo), "Summarize")
    assert r.returncode == 1
    assert "not a regular file" in one_line(r.stderr)


def test_show_sources_escapes_file_names(gemma_path: Path, tmp_path: Path) -> None:
    note = tmp_path / f"{HOSTILE}.txt"
    note.write_text("The harbour opens at dawn.\x1b]0;title\x07", encoding="utf-8")
    r = ember(
        "run", str(gemma_path), "--attach", str(note), "--show-sources", "When?",
        "-c", "1024", "-n", "1", "--temp", "0",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    sources = r.stdout.split("\n\n", 1)[0]
    assert sources == "Sources:\n[1] notes\\r\\x1b[2Kinnocent.txt (whole)"
