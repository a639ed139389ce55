"""The engine calls llama-cpp-python's low-level API as one version exposes it: pyproject.toml
pins that version and scripts/bootstrap.py builds the same one."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_pyproject_pins_the_llama_cpp_python_that_bootstrap_builds() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in deps if d.startswith("llama-cpp-python")]
    built = re.search(r'LLAMA_CPP_VERSION = "([^"]+)"', (ROOT / "scripts/bootstrap.py").read_text())
    assert built is not None
    assert pin == f"llama-cpp-python=={built.group(1)}"


def test_the_installed_llama_cpp_python_is_the_pinned_one() -> None:
    import llama_cpp

    built = re.search(r'LLAMA_CPP_VERSION = "([^"]+)"', (ROOT / "scripts/bootstrap.py").read_text())
    assert built is not None and llama_cpp.__version__ == built.group(1)
