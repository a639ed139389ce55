"""llama.cpp's real chat templates (``models/templates/*.jinja``), read at test time from the
llama-cpp-python sdist the build uses, never copied into the repository.

The sdist is looked for under ``~/.cache/ember`` (``EMBER_LLAMA_SDIST`` names one), else
fetched once with ``pip download`` into ``~/.cache/ember/sdist``; the templates are unpacked
beside it. Tests that need them skip when none can be had (no network, no cache).
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

LLAMA_CPP_VERSION = importlib.metadata.version("llama-cpp-python")  # the installed one
CACHE = Path.home() / ".cache" / "ember"
SDIST_NAME = f"llama_cpp_python-{LLAMA_CPP_VERSION}.tar.gz"


def _sdist() -> Path | None:
    named = os.environ.get("EMBER_LLAMA_SDIST")
    if named and Path(named).is_file():
        return Path(named)
    found = sorted(CACHE.glob(f"**/{SDIST_NAME}"))
    if found:
        return found[0]
    dest = CACHE / "sdist"
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
    cmd += ["-d", str(dest), f"llama-cpp-python=={LLAMA_CPP_VERSION}"]
    subprocess.run(cmd, capture_output=True, check=False, timeout=600)
    path = dest / SDIST_NAME
    return path if path.is_file() else None


@functools.cache
def templates_dir() -> Path | None:
    """The folder of unpacked ``*.jinja`` templates, or None when no sdist can be had."""
    out = CACHE / "sdist" / f"templates-{LLAMA_CPP_VERSION}"
    if any(out.glob("*.jinja")):
        return out
    sdist = _sdist()
    if sdist is None:
        return None
    partial = out.with_name(out.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as tar:
        for member in tar:
            parts = member.name.split("/")
            if member.isfile() and parts[-2:-1] == ["templates"] and parts[-1].endswith(".jinja"):
                data = tar.extractfile(member)
                if data is not None and "models" in parts:
                    (partial / parts[-1]).write_bytes(data.read())
    if not out.exists():
        partial.replace(out)
    return out if any(out.glob("*.jinja")) else None


def template(name: str) -> str:
    """The source of ``models/templates/<name>.jinja``; skips the test without the sdist."""
    folder = templates_dir()
    if folder is None:
        pytest.skip(f"the llama-cpp-python {LLAMA_CPP_VERSION} sdist is not available")
    return (folder / f"{name}.jinja").read_text(encoding="utf-8")
