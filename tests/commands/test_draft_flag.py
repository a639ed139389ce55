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


REPEATING = "1 2 3 4 5 1 2 3 4 5 1 2 3 4 5 1 2 3 4 5 1 2 3 4 5"


@pytest.mark.parametrize(("flags", "drafts"), [([], True), (["--draft-max", "0"], False)])
def test_draft_max_zero_turns_speculative_decoding_off(
    capsys: pytest.CaptureFixture[str], gemma_path: Path, flags: list[str], drafts: bool
) -> None:
    argv = ["run", str(gemma_path), *flags, "-c", "512", "--parallel", "1", "--temp", "0"]
    assert main([*argv, "-n", "24", "--json", REPEATING]) == 0
    out, _err = capsys.readouterr()
    usage = json.loads(out.strip().splitlines()[-1])["usage"]
    assert (usage["drafted_tokens"] > 0) is drafts, usage


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("-1", "-1: give 0 (off) to 32 tokens"),
        ("33", "33: give 0 (off) to 32 tokens"),
        ("many", "'many' is not a number of tokens"),
        ("1e3", "'1e3' is not a number of tokens"),
        ("9" * 5000, "'99999999999999999999…' is not a number of tokens"),
    ],
)
def test_a_draft_max_out_of_range_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], gemma_path: Path, value: str, words: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", str(gemma_path), "--draft-max", value, "Hi"])
    assert exited.value.code == 2
    _out, err = capsys.readouterr()
    last = err.strip().splitlines()[-1]  # argparse's usage, then its one line
    assert "--draft-max" in last and words in last and len(last) < 200, err
