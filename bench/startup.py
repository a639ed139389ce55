"""Start-up time: how long ``ember`` takes to show its window, against an empty Qt window.

* Window: from starting the process until the main window has been shown and painted (the
  event loop's first turn, reported by the app with ``EMBER_REPORT_SHOWN=1``, app/ui/app.py),
  against a process that only imports PySide6.QtWidgets and shows an empty QMainWindow, timed
  the same way. The ratio is what Ember's own imports and window cost on top of Qt's.
* CLI: ``ember --version`` against ``python -c pass`` (the interpreter's own start).

Each time is the median of ``--repeat`` runs after one unmeasured warm-up run (the OS file cache
and, for Ember, a first launch's set-up of EMBER_HOME). Ember and its baseline run in turns and
the ratio is the median of each turn's ratio: the machine's noise moves both sides alike, so
compare ratios. The app runs offscreen on a fresh EMBER_HOME with an empty Hugging Face cache
and closes itself once shown. Bytecode is cached, as in an installed app, in a temporary folder
(with PYTHONDONTWRITEBYTECODE every run would compile the app's sources again).

Run: ``.venv/bin/python bench/startup.py [--repeat N]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHOWN = "window shown at "

EMPTY_WINDOW = f"""
import sys, time
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QMainWindow
app = QApplication(sys.argv[:1])
window = QMainWindow()
window.resize(1280, 820)
window.show()
def shown():
    print("{SHOWN}" + format(time.time(), ".6f"), file=sys.stderr, flush=True)
    app.quit()
class FirstPaint(QObject):  # as app/ui/app.py: the turn after the window's first expose
    def eventFilter(self, watched, event):
        if event.type() == QEvent.Type.Expose and watched.isExposed():
            QTimer.singleShot(0, shown)
        return False
first_paint = FirstPaint()
window.windowHandle().installEventFilter(first_paint)
app.exec()
"""


def environment(home: Path) -> dict[str, str]:
    """Offscreen, on an isolated EMBER_HOME; bytecode cached (as in an installed app) under
    a temporary prefix, so the warm-up run compiles and the source tree stays untouched."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {
        "PYTHONPYCACHEPREFIX": str(home.parent / "pycache"),
        "EMBER_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hf-cache"),
        "EMBER_REPORT_SHOWN": "1",
        "EMBER_QUIT_AFTER_START": "0",
        "PYTHONPATH": str(ROOT),
    }
    if "QT_QPA_PLATFORM" not in os.environ:
        env["QT_QPA_PLATFORM"] = "offscreen"
    return env


def time_to_window(command: list[str], env: dict[str, str]) -> float:
    """Seconds from starting ``command`` until it reports its window shown."""
    started = time.time()
    r = subprocess.run(
        command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    shown = [line for line in r.stderr.splitlines() if SHOWN in line]
    if r.returncode != 0 or not shown:
        raise RuntimeError(f"{command} exited with {r.returncode}:\n{r.stderr[-2000:]}")
    return float(shown[0].split(SHOWN)[1]) - started


def time_run(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, cwd=ROOT, capture_output=True, timeout=60, check=True)
    return time.perf_counter() - started


def paired(ember: Callable[[], float], baseline: Callable[[], float], repeat: int) -> Pair:
    """Both, one warm-up run each (not counted), then ``repeat`` runs taken in turns so that the
    machine's load moves both sides alike."""
    ember()
    baseline()
    times = [(ember(), baseline()) for _ in range(repeat)]
    return Pair(
        statistics.median(e for e, _ in times),
        statistics.median(b for _, b in times),
        statistics.median(e / b for e, b in times),
    )


@dataclass
class Pair:
    ember: float
    baseline: float
    ratio: float  # the median of the runs' ratios

    def row(self, label: str, against: str) -> None:
        print(
            f"  {label:<22} {self.ember * 1000:6.0f} ms   {against:<18} "
            f"{self.baseline * 1000:5.0f} ms   ratio {self.ratio:.2f}x   "
            f"(+{(self.ember - self.baseline) * 1000:.0f} ms)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="measured runs of each (median)")
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="ember-startup-") as tmp:
        env = environment(Path(tmp) / "home")
        print(f"Start-up, median of {args.repeat} runs ({env['QT_QPA_PLATFORM']} Qt):")
        window = paired(
            lambda: time_to_window([python, "-m", "app"], env),
            lambda: time_to_window([python, "-c", EMPTY_WINDOW], env),
            args.repeat,
        )
        window.row("ember (window shown)", "empty QMainWindow")
        version = paired(
            lambda: time_run([python, "-m", "app", "--version"], env),
            lambda: time_run([python, "-c", "pass"], env),
            args.repeat,
        )
        version.row("ember --version", "python -c pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
