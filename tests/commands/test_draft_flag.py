"""``--draft-model``: ember run drafts with it (and counts the drafts); a folder, a missing
file, a file that is not a model or one with another vocabulary is one clear line; with
serve it belongs to the ``--model`` loaded at start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from tests.helpers.gguf_writer import write_gguf


def test_run_drafts_with_a_draft_model_and_says_how_many_were_taken(
    capsys: pytest.CaptureFixture[str], gemma_path: Path
) -> None:
    argv = ["run", str(gemma_path), "--draft-model", str(gemma_path), "-c", "512"]
    argv += ["--parallel", "1", "--temp", "0", "-n", "16", "--json"]
    assert main([*argv, "Count from 1 to 10, one number per line."]) == 0
    out, _err = capsys.readouterr()
    usage = json.loads(out.strip().splitlines()[-1])["usage"]
    assert usage["drafted_tokens"] > 0 and 0 < usage["accepted_tokens"] <= usage["drafted_tokens"]


@pytest.mark.parametrize(
    ("what", "words"),
    [
        ("folder", "is a folder; name a .gguf file"),
        ("missing", "no such file"),
        ("text", "is not a GGUF model file"),
        ("other", "cannot be the draft model"),
    ],
)
def test_a_draft_model_that_cannot_draft_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], gemma_path: Path, tmp_path: Path, what: str, words: str
) -> None:
    notes = tmp_path / "notes.gguf"
    notes.write_text("not a model")
    files = {
        "folder": tmp_path,
        "missing": tmp_path / "gone.gguf",
        "text": notes,
        "other": write_gguf(tmp_path / "other.gguf", vocab_size=64),
    }
    argv = ["run", str(gemma_path), "--draft-model", str(files[what]), "-c", "512", "-n", "2"]
    assert main([*argv, "Hi"]) == 1
    _out, err = capsys.readouterr()
    assert err.startswith("ember: error: ") and words in err and err.count("\n") == 1, err


def test_serve_takes_a_draft_model_only_for_its_model(
    capsys: pytest.CaptureFixture[str], gemma_path: Path
) -> None:
    assert main(["serve", "--draft-model", str(gemma_path)]) == 1
    _out, err = capsys.readouterr()
    assert "--draft-model drafts for the --model loaded at start" in err
