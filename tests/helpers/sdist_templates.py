"""llama.cpp's real chat templates (``models/templates/*.jinja``), read at test time from the
llama-cpp-python sdist the build uses. They are never copied into the repository.

The sdist is looked for where the build leaves it (scripts/build_llama.py downloads it into
its output folder, ``~/.cache/ember/wheels/llama-cpp-python-<version>-*`` or its
``.partial`` while building), then in this helper's own cache
(``$EMBER_SDIST_CACHE``, default ``~/.cache/ember/sdist``); else it is downloaded there with
``pip download`` (CI reaches PyPI). The templates are unpacked once beside it.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _version() -> str:
    text = (ROOT / "scripts" / "bootstrap.py").read_text(encoding="utf-8")
    found = re.search(r'^LLAMA_CPP_VERSION = "([^"]+)"', text, re.M)
    assert found, "scripts/bootstrap.py names no LLAMA_CPP_VERSION"
    return found.group(1)


VERSION = _version()
SDIST = f"llama_cpp_python-{VERSION}.tar.gz"
CACHE = Path(os.environ.get("EMBER_SDIST_CACHE", Path.home() / ".cache" / "ember" / "sdist"))
WHEELS = Path(os.environ.get("EMBER_WHEEL_CACHE", Path.home() / ".cache" / "ember" / "wheels"))


def find_sdist() -> Path:
    for folder in sorted(WHEELS.glob(f"llama-cpp-python-{VERSION}-*")):
        found = sorted(folder.glob(SDIST))
        if found:
            return found[0]
    if (CACHE / SDIST).is_file():
        return CACHE / SDIST
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"),
            *("-d", str(CACHE), f"llama-cpp-python=={VERSION}"),
        ],
        check=True,
        capture_output=True,
    )
    return CACHE / SDIST


@functools.cache
def templates_dir() -> Path:
    """The folder of the sdist's ``models/templates/*.jinja`` (unpacked once)."""
    out = CACHE / f"templates-{VERSION}"
    if any(out.glob("*.jinja")):
        return out
    sdist = find_sdist()
    tmp = out.with_name(out.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if member.isfile() and parts[-3:-1] == ("models", "templates"):
                data = tar.extractfile(member)
                assert data is not None
                (tmp / parts[-1]).write_bytes(data.read())
    if not out.exists():
        tmp.replace(out)
    return out


def template(name: str) -> str:
    """The source of ``models/templates/<name>`` (``.jinja`` may be left out)."""
    file = name if name.endswith(".jinja") else f"{name}.jinja"
    return (templates_dir() / file).read_text(encoding="utf-8")


def names() -> list[str]:
    return sorted(p.name for p in templates_dir().glob("*.jinja"))
