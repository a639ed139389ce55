"""`ember run --mmproj FILE` loads the model with a vision projector: real subprocesses on the
real test model and the tiny built projector (tests/helpers/projector.py)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.cli import ember
from tests.helpers.projector import write_projector


def test_run_loads_the_model_with_its_projector(gemma_path: Path, tmp_path: Path) -> None:
    mmproj = write_projector(tmp_path / "mmproj-test.gguf")
    r = ember("run", str(gemma_path), "Hello", "--raw", "--temp", "0", "-n", "3", "-c", "1024",
              "--mmproj", str(mmproj))  # fmt: skip
    assert r.returncode == 0, r.stderr


def test_run_with_a_file_that_is_no_projector_is_one_clear_error(
    gemma_path: Path, tmp_path: Path
) -> None:
    r = ember("run", str(gemma_path), "Hello", "--raw", "-n", "3", "-c", "1024",
              "--mmproj", str(gemma_path))  # fmt: skip
    assert r.returncode != 0
    assert "not a vision projector" in r.stderr
    assert "Traceback" not in r.stderr
    missing = ember("run", str(gemma_path), "Hello", "--raw", "-n", "3", "-c", "1024",
                    "--mmproj", str(tmp_path / "absent.gguf"))  # fmt: skip
    assert missing.returncode != 0 and "No projector file" in missing.stderr
