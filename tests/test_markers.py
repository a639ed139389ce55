"""``pytest -m "not slow"`` is the quick loop: it leaves out every test that uses the real model,
whether it asks for the model file, a loaded worker, a window or a served API."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each test runs pytest in a subprocess

ROOT = Path(__file__).resolve().parent.parent
FILES = (
    "tests/engine/test_gguf.py",  # header tests of the real file, and synthetic ones
    "tests/engine/test_sizing.py",  # the real file through a module-scoped header fixture
    "tests/engine/test_remote.py",  # a llama.cpp server running the real model
    "tests/test_resources.py",  # builds a wheel and a venv in one test
    "tests/test_markers.py",  # this file: runs pytest in subprocesses
)


def _collected(*args: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout
    return {line.split("[")[0] for line in out.splitlines() if "::" in line}


def test_the_quick_loop_leaves_out_every_model_test() -> None:
    quick = _collected("-m", "not slow", *FILES)
    slow = _collected("-m", "slow", *FILES)
    assert quick and slow and not quick & slow
    for name in (
        "tests/engine/test_gguf.py::test_gemma_metadata_matches_the_known_values",
        "tests/engine/test_sizing.py::test_loader_info_and_fit_check_agree_on_the_real_model",
        "tests/engine/test_remote.py::test_chat_streams_deltas_then_one_final",
        "tests/test_resources.py::test_an_installed_wheel_finds_every_resource",
        "tests/test_markers.py::test_the_quick_loop_leaves_out_every_model_test",
    ):
        assert name in slow, name
    for name in (
        "tests/engine/test_gguf.py::test_human_bytes",
        "tests/engine/test_sizing.py::test_loader_info_and_fit_check_agree_on_a_big_model",
        "tests/test_resources.py::test_the_checkout_finds_every_resource",
    ):
        assert name in quick, name
