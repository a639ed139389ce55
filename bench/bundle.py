"""The bundle against running from source: its size, and start-up times, as ratios.

* Size: the bundle folder and its archive, against the virtualenv's site-packages that running
  from source needs (plus the interpreter's standard library).
* ``--version``: a CLI start (imports the commands, not Qt's window).
* Time to a shown window: from starting the process until X11 reports the main window mapped
  (under Xvfb, watched by ``xev``; Linux), so both sides are timed alike, from outside.

Each time is the median of ``--repeat`` runs after one unmeasured warm-up run (the OS file cache
warm on both sides). Needs a built bundle (``make bundle``): without one it says so and exits 0
(``make bench`` runs every bench and must not build).

Run: .venv/bin/python bench/bundle.py [--bundle dist/Ember] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.helpers.bundle import Bundle, VirtualDisplay, open_bundle  # noqa: E402

SOURCE = [sys.executable, "-m", "app"]


def folder_size(folder: Path) -> int:
    """Bytes on disk, counting a symlink as its link, not its target."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() or p.is_symlink())


def source_size() -> int:
    """What running from source needs: site-packages, the standard library, the app."""
    site = Path(sysconfig.get_paths()["purelib"])
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    stdlib_only = sum(
        p.lstat().st_size
        for p in stdlib.rglob("*")
        if p.is_file() and "site-packages" not in p.parts
    )
    return folder_size(site) + stdlib_only + folder_size(ROOT / "app")


def median_time(run: Callable[[], float], repeat: int) -> float:
    run()  # warm-up, not measured
    return statistics.median(run() for _ in range(repeat))


def time_version(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([*command, "--version"], env=env, check=True, capture_output=True)
    return time.perf_counter() - started


class MapWatcher:
    """Watches the X11 root window with ``xev`` (one connection) for the first normal, not
    override-redirect, top-level window to be mapped; ``mapped_at`` is its perf_counter time.

    Polling with a new X client each time is coarse, and on Xvfb rapid reconnections fail
    now and then; one watching client avoids both."""

    def __init__(self, env: dict[str, str]) -> None:
        self.mapped_at: float | None = None
        self._mapped = threading.Event()
        self._xev = subprocess.Popen(
            ["stdbuf", "-oL", "xev", "-root", "-event", "substructure"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def wait(self, timeout: float) -> bool:
        return self._mapped.wait(timeout)

    def close(self) -> None:
        self._xev.terminate()
        self._xev.wait(timeout=10)

    def _read(self) -> None:
        assert self._xev.stdout is not None
        seen: float | None = None
        for line in self._xev.stdout:  # "MapNotify event, …" then "…, override NO"
            if line.startswith("MapNotify"):
                seen = time.perf_counter()
            elif seen is not None and "override" in line:
                if "override NO" in line:
                    self.mapped_at = seen
                    self._mapped.set()
                    return
                seen = None


def time_window(command: list[str], env: dict[str, str]) -> float:
    """Seconds from starting ``command`` until X11 maps its main window."""
    with tempfile.TemporaryDirectory(prefix="ember-bench-home-") as home:
        run_env = {**env, "EMBER_HOME": home}
        watcher = MapWatcher(run_env)
        time.sleep(0.3)  # xev is listening; also spaces out connections to Xvfb
        errors = Path(home) / "stderr.txt"
        started = time.perf_counter()
        with errors.open("wb") as stderr:
            app = subprocess.Popen(command, env=run_env, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            while not watcher.wait(0.05):
                if app.poll() is not None:
                    tail = errors.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"{command} exited with {app.returncode}:\n{tail}")
                if time.perf_counter() - started > 120:
                    raise TimeoutError(f"no window from {command}")
            assert watcher.mapped_at is not None
            return watcher.mapped_at - started
        finally:
            app.terminate()
            app.wait(timeout=30)
            watcher.close()
            time.sleep(0.3)  # let Xvfb finish with both clients before the next run


def row(label: str, bundle: float, source: float, unit: str) -> None:
    print(f"  {label:<26} {bundle:9.2f} {unit:<3} {source:9.2f} {unit:<3} {bundle / source:7.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bundle",
        type=Path,
        default=Path(os.environ.get("EMBER_BUNDLE", ROOT / "dist")),
        help="the bundle folder, dist/, or the archive (default: $EMBER_BUNDLE or dist/)",
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ember-bench-") as scratch:
        try:
            bundle = open_bundle(args.bundle, Path(scratch))
        except FileNotFoundError:
            print(f"bench/bundle.py: no built bundle in {args.bundle}; run `make bundle` first")
            return 0
        return measure(bundle, args.repeat)


def measure(bundle: Bundle, repeat: int) -> int:
    archives = sorted((ROOT / "dist").glob("Ember-*.*"))
    print(f"Ember bundle vs source ({bundle.root}; median of {repeat} runs)")
    print(f"  {'':<26} {'bundle':>13} {'source':>13} {'ratio':>8}")
    bundle_bytes = folder_size(bundle.root)
    row("size on disk", bundle_bytes / 1e6, source_size() / 1e6, "MB")
    for archive in archives:
        print(f"  {archive.name:<40} {archive.stat().st_size / 1e6:9.2f} MB (archive)")

    with tempfile.TemporaryDirectory(prefix="ember-bench-home-") as home:
        bundle_env = bundle.env(Path(home))
        source_env = {**bundle_env, "PYTHONPATH": str(ROOT)}
        row(
            "--version",
            median_time(lambda: time_version([str(bundle.cli)], bundle_env), repeat),
            median_time(lambda: time_version(SOURCE, source_env), repeat),
            "s",
        )
        if not (VirtualDisplay.available() and shutil.which("xev") and shutil.which("stdbuf")):
            print("  window shown: needs Linux, Xvfb, xdotool, xev (apt: xvfb xdotool x11-utils)")
            return 0
        with VirtualDisplay() as display:
            bundle_env.update(QT_QPA_PLATFORM="xcb", DISPLAY=display)
            source_env.update(QT_QPA_PLATFORM="xcb", DISPLAY=display)
            row(
                "start to window shown",
                median_time(lambda: time_window([str(bundle.gui)], bundle_env), repeat),
                median_time(lambda: time_window(SOURCE, source_env), repeat),
                "s",
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
