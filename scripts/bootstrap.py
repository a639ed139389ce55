"""Create or refresh the development environment in ``.venv``; reuse it when it is good.

* llama-cpp-python is compiled from source, portably (see docs/ARCHITECTURE.md): on x86-64 with
  ``-DGGML_NATIVE=OFF`` plus AVX2/FMA/F16C, on Apple silicon with Metal. The wheel is built once
  per (version, flags) into ``~/.cache/ember/wheels/`` and reused by every checkout, because
  pip's own wheel cache ignores CMAKE_ARGS and could hand back a native build.
* ``EMBER_LLAMA_BUILD`` chooses the llama.cpp build on Linux and Windows: ``portable`` (the
  default above: one CPU back-end, AVX2, about 6 minutes on 2 cores), ``runtime`` (back-ends
  chosen at run time: every CPU variant from SSE4.2 to AVX-512/AMX plus Vulkan, made by
  scripts/build_llama.py; about 28 minutes, what release bundles carry) or ``runtime-cpu``
  (the same without Vulkan). macOS always builds with Metal.
* A stamp file records what the environment was built from; nothing is reinstalled while the
  stamp matches.

Usage: [EMBER_LLAMA_BUILD=runtime] python3 scripts/bootstrap.py [--extras dev]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
LLAMA_CPP_VERSION = "0.3.36"
WHEEL_CACHE = Path(os.environ.get("EMBER_WHEEL_CACHE", Path.home() / ".cache" / "ember" / "wheels"))
# Shared libraries Qt needs on Linux (Debian package names); see README, Troubleshooting.
LINUX_QT_LIBS = {
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libfontconfig.so.1": "libfontconfig1",
    "libdbus-1.so.3": "libdbus-1-3",
}


def log(msg: str) -> None:
    print(f"[bootstrap] {msg}", flush=True)


def venv_python() -> Path:
    sub = "Scripts/python.exe" if os.name == "nt" else "bin/python"
    return VENV / sub


def cmake_args() -> str:
    if "CMAKE_ARGS" in os.environ:
        return os.environ["CMAKE_ARGS"]
    machine = platform.machine().lower()
    if sys.platform == "darwin" and machine in ("arm64", "aarch64"):
        return "-DGGML_METAL=ON"
    if machine in ("x86_64", "amd64"):
        return "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
    return "-DGGML_NATIVE=OFF"


LLAMA_BUILDS = ("portable", "runtime", "runtime-cpu")


def llama_build() -> str:
    """Which llama.cpp build (``EMBER_LLAMA_BUILD``); macOS keeps its Metal build."""
    build = os.environ.get("EMBER_LLAMA_BUILD", "portable").strip() or "portable"
    if build not in LLAMA_BUILDS:
        raise SystemExit(f"EMBER_LLAMA_BUILD={build!r}: choose one of {', '.join(LLAMA_BUILDS)}")
    return "portable" if sys.platform == "darwin" else build


def run(cmd: list[str], env: dict[str, str] | None = None) -> None:
    log(" ".join(cmd))
    subprocess.run(cmd, check=True, env=env)


def ensure_system_libs() -> None:
    """Qt's offscreen and xcb platforms need a few shared libraries a bare Linux may lack."""
    if not sys.platform.startswith("linux") or not shutil.which("ldconfig"):
        return
    known = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False).stdout
    missing = sorted({pkg for lib, pkg in LINUX_QT_LIBS.items() if lib not in known})
    if not missing:
        return
    if shutil.which("apt-get") and os.geteuid() == 0:
        log(f"installing system libraries for Qt: {' '.join(missing)}")
        subprocess.run(["apt-get", "update", "-qq"], check=False)
        run(["apt-get", "install", "-y", "-qq", *missing])
    else:
        log(f"warning: Qt may need these system packages: {' '.join(missing)} (see README)")


# What scripts/build_llama.py patches in llama.cpp: part of each wheel's cache key, so a wheel
# built before a patch is never reused (bump it when the patches change)
LLAMA_PATCHES = "tokenizer-partition-1"


def llama_wheel() -> Path:
    build = llama_build()
    flags = cmake_args() if build == "portable" else build
    key = hashlib.sha256(
        f"{LLAMA_CPP_VERSION} {flags} {sys.version_info[:2]} {LLAMA_PATCHES}".encode()
    ).hexdigest()[:12]
    cache = WHEEL_CACHE / f"llama-cpp-python-{LLAMA_CPP_VERSION}-{key}"
    wheels = sorted(cache.glob("llama_cpp_python-*.whl"))
    if wheels:
        return wheels[-1]
    return built_wheel(cache, build, flags)


def built_wheel(cache: Path, build: str, flags: str) -> Path:
    """The wheel scripts/build_llama.py builds (and patches) into a partial folder, moved into
    ``cache`` once it is whole: one static back-end with ``flags`` (portable), or back-ends
    chosen at run time (runtime, runtime-cpu)."""
    tmp = cache.with_name(cache.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [sys.executable, str(ROOT / "scripts" / "build_llama.py")]
    cmd += ["--python", str(venv_python()), "--out", str(tmp)]
    if build == "portable":
        log(f"building llama-cpp-python {LLAMA_CPP_VERSION} with {flags!r} (a few minutes)")
        run([*cmd, "--cmake-args", flags])
    else:
        log(
            f"building llama-cpp-python {LLAMA_CPP_VERSION} with run-time back-ends (tens of "
            "minutes)"
        )
        run(cmd if build == "runtime" else [*cmd, "--no-vulkan"])
    cache.mkdir(parents=True, exist_ok=True)
    for whl in tmp.glob("*.whl"):
        whl.replace(cache / whl.name)
    shutil.rmtree(tmp, ignore_errors=True)
    return sorted(cache.glob("llama_cpp_python-*.whl"))[-1]


def stamp_text(extras: str) -> str:
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    parts = [
        hashlib.sha256(pyproject).hexdigest(),
        LLAMA_CPP_VERSION,
        LLAMA_PATCHES,
        cmake_args(),
        llama_build(),
        extras,
        sys.version,
    ]
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extras", default="dev", help="optional dependency groups to install")
    args = parser.parse_args()
    if sys.version_info < (3, 11):  # noqa: UP036  (this script runs on any python3)
        log(f"Ember needs Python 3.11 or newer; this is {platform.python_version()}")
        return 1
    ensure_system_libs()
    stamp = VENV / ".ember-stamp"
    wanted = stamp_text(args.extras)
    if venv_python().exists() and stamp.exists() and stamp.read_text() == wanted:
        log("environment is up to date")
        return 0
    if not venv_python().exists():
        log(f"creating {VENV}")
        venv.create(VENV, with_pip=True)
    py = str(venv_python())
    run([py, "-m", "pip", "install", "-q", "--upgrade", "pip", "setuptools", "wheel"])
    run([py, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(llama_wheel())])
    # The wheel brings no dependencies (--no-deps); the project's install adds them.
    target = f"{ROOT}[{args.extras}]" if args.extras else str(ROOT)
    run([py, "-m", "pip", "install", "-q", "-e", target])
    stamp.write_text(wanted)
    log("environment ready")
    return 0


if __name__ == "__main__":
    sys.exit(main())
