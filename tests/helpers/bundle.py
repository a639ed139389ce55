"""Find the executables in a built Ember bundle and run them the way a user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Bundle:
    """A built bundle: ``root`` is ``Ember/`` (or ``Ember.app``); ``cli`` is what a terminal
    runs (``ember``, ``ember.com``); ``gui`` is what a double-click starts."""

    root: Path
    cli: Path
    gui: Path

    def env(self, home: Path, **extra: str) -> dict[str, str]:
        """The environment of a user's shell: no virtualenv, no PYTHONPATH, no source tree on
        PATH, a private EMBER_HOME, no display (offscreen Qt), no network to the Hub."""
        venv_bin = str(Path(sys.prefix) / ("Scripts" if os.name == "nt" else "bin"))
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PYTHON", "VIRTUAL_ENV", "LLAMA_CPP", "QT_", "EMBER_"))
        }
        env["PATH"] = os.pathsep.join(
            p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin
        )
        env.update(
            EMBER_HOME=str(home),
            HF_HUB_OFFLINE="1",
            HF_HUB_DISABLE_TELEMETRY="1",
            QT_QPA_PLATFORM="offscreen",
        )
        env.update(extra)
        return env

    def run_cli(
        self, home: Path, *args: str, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """``ember ARGS`` from the bundle, in ``home`` (its EMBER_HOME and working folder)."""
        return subprocess.run(
            [str(self.cli), *args],
            capture_output=True,
            text=True,
            env=self.env(home),
            cwd=home,
            timeout=timeout,
            check=False,
        )


def open_bundle(location: Path, scratch: Path) -> Bundle:
    """``location`` is a bundle folder, ``dist/`` holding one, or an archive (extracted into
    ``scratch``)."""
    location = location.resolve()
    if location.is_file():
        location = _extract(location, scratch)
    for candidate in (location, location / "Ember", location / "Ember.app"):
        found = _executables(candidate)
        if found is not None:
            return found
    raise FileNotFoundError(f"no Ember bundle in {location}")


def _executables(root: Path) -> Bundle | None:
    if sys.platform == "darwin":
        app = root / "Contents" / "MacOS" / "Ember"
        return Bundle(root, app, app) if app.is_file() else None
    if sys.platform == "win32":
        cli, gui = root / "ember.com", root / "Ember.exe"
        return Bundle(root, cli, gui) if cli.is_file() and gui.is_file() else None
    exe = root / "ember"
    return Bundle(root, exe, exe) if exe.is_file() and (root / "_internal").is_dir() else None


def _extract(archive: Path, scratch: Path) -> Path:
    if archive.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(archive) as tar:
            tar.extractall(scratch, filter="data")
    elif sys.platform == "darwin" and shutil.which("ditto"):
        # zipfile drops the symlinks and permissions a .app needs; ditto keeps them
        subprocess.run(["ditto", "-x", "-k", str(archive), str(scratch)], check=True)
    else:
        with zipfile.ZipFile(archive) as z:
            z.extractall(scratch)
    return scratch


def mapped_files(pid: int) -> set[Path]:
    """The files a running process has mapped (Linux: /proc/<pid>/maps)."""
    found: set[Path] = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith("/"):
            found.add(Path(parts[5]))
    return found


def assert_self_contained(pid: int, bundle: Bundle) -> None:
    """The process runs llama.cpp from the bundle, and maps nothing from the source tree or
    the virtualenv the tests run in."""
    mapped = mapped_files(pid)
    root = bundle.root.resolve()
    llama = [p for p in mapped if p.name.startswith("libllama")]
    assert llama, "libllama is not loaded"
    assert all(p.resolve().is_relative_to(root) for p in llama), llama
    venv = Path(sys.prefix).resolve()
    outside = [p for p in mapped if p.resolve().is_relative_to(venv)]
    outside += [p for p in mapped if p.resolve().is_relative_to(ROOT / "app")]
    assert not outside, outside


class VirtualDisplay:
    """A private Xvfb display (Linux, Debian's xvfb and xdotool): ``with VirtualDisplay() as
    name: ...`` where ``name`` is like ``:3``."""

    TOOLS = ("Xvfb", "xdotool")

    @classmethod
    def available(cls) -> bool:
        return sys.platform.startswith("linux") and all(shutil.which(t) for t in cls.TOOLS)

    def __enter__(self) -> str:
        read, write = os.pipe()
        self._server = subprocess.Popen(
            ["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
            pass_fds=(write,),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(write)
        with os.fdopen(read) as pipe:
            name = ":" + pipe.readline().strip()
        # Wait until it takes connections. Xvfb was seen refusing about 1 in 10 connections
        # made back to back (none with 50 ms between them): callers space theirs out too.
        env = {**os.environ, "DISPLAY": name}
        deadline = time.monotonic() + 15
        while (
            name == ":"
            or subprocess.run(
                ["xdotool", "getmouselocation"], env=env, capture_output=True, check=False
            ).returncode
        ):
            if time.monotonic() > deadline or self._server.poll() is not None:
                self.__exit__()
                raise RuntimeError(f"Xvfb did not start on {name!r}")
            time.sleep(0.05)
        return name

    def __exit__(self, *_exc: object) -> None:
        self._server.terminate()
        self._server.wait(timeout=10)
