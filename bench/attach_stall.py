"""GUI responsiveness while a 50 MB text file is attached, read and indexed.

The issue's measure for attachments: a heartbeat timer on the GUI thread (bench/gui_stream.py's
``Heartbeat``, 5 ms) times the longest stall in three phases, each against an idle baseline
measured in the same run:

1. *reading*: the file is dropped on the chat and its text extracted on a worker thread, the
   chip showing "Reading… N%";
2. *indexing*: a question is sent; the file is too long to go whole (the fake engine's context
   is 1M tokens, the file about 12M), so it is split into chunks and indexed in SQLite FTS5 on
   a worker thread before the answer starts;
3. the answer streams from the fake engine (as bench/gui_stream.py).

Target: the longest stall of each phase under 50 ms (the same target as streaming).

Run: ``.venv/bin/python bench/attach_stall.py [--megabytes 50]`` (offscreen unless
QT_QPA_PLATFORM or DISPLAY says otherwise).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if "QT_QPA_PLATFORM" not in os.environ and not os.environ.get("DISPLAY"):
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ.setdefault("EMBER_HOME", tempfile.mkdtemp(prefix="ember-bench-"))

from app.engine.types import LoadParams  # noqa: E402
from app.ui.app import create_application  # noqa: E402
from app.ui.engine_session import api_model_id  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from app.ui.services import create_services  # noqa: E402
from app.ui.theme import ThemeManager  # noqa: E402
from bench.gui_stream import TARGET_MS, Heartbeat, wait, wait_for  # noqa: E402
from tests.helpers import builders  # noqa: E402
from tests.helpers.attaching import drop_files  # noqa: E402
from tests.helpers.parallel_fake import ParallelFakeWorker  # noqa: E402


def big_text(path: Path, megabytes: int) -> Path:
    line = builders.filler(random.Random(1), 400) + "\n"
    with path.open("w") as f:
        while f.tell() < megabytes * 1024 * 1024:
            f.write(line)
        f.write(builders.FACT + "\n")
    return path


def run(args: argparse.Namespace) -> int:
    app = create_application([])
    ThemeManager(app, "light").apply()
    home = Path(os.environ["EMBER_HOME"])
    worker = ParallelFakeWorker()
    model = str(home / "fake-model.gguf")
    Path(model).write_bytes(b"GGUF fake")
    worker.load(model, LoadParams(n_ctx=1 << 20), api_model_id(model)).result(10)
    worker.tokens_per_second = 200
    services = create_services(worker=worker)
    window = MainWindow(services)
    window.resize(1280, 820)
    window.show()
    wait(0.5)
    path = big_text(home / "big.txt", args.megabytes)
    print(f"file: {path.stat().st_size / 1e6:.1f} MB of text")

    beat = Heartbeat()
    beat.start()
    wait(args.idle)
    beat.stop()
    idle = beat.stall_ms()
    print(f"idle baseline: longest stall {idle:.1f} ms over {args.idle:.0f} s")

    controller = window.controller
    tray = controller.attachments
    beat.start()
    started = time.perf_counter()
    drop_files(window.chat, [path])
    read = wait_for(lambda: not tray.reading, args.timeout)
    results = [("reading", time.perf_counter() - started, beat.stall_ms(), beat.busy_ms(), read)]
    beat.stop()

    finished: list[object] = []
    controller.answer_finished.connect(finished.append)
    window.panel.form.set_values({**window.panel.form.values(), "max_tokens": 200})
    window.panel.save()
    beat.start()
    started = time.perf_counter()
    controller.send(builders.QUESTION)
    answer = controller.answers.get(controller.conversation.id if controller.conversation else None)
    assert answer is not None, "the question did not start an answer"
    indexed = wait_for(lambda: answer.attached is not None or bool(finished), args.timeout)
    results.append(
        ("indexing", time.perf_counter() - started, beat.stall_ms(), beat.busy_ms(), indexed)
    )
    beat.stop()
    beat.start()
    started = time.perf_counter()
    answered = wait_for(lambda: bool(finished), args.timeout)
    results.append(
        ("answering", time.perf_counter() - started, beat.stall_ms(), beat.busy_ms(), answered)
    )
    beat.stop()

    worst = 0.0
    for phase, seconds, stall, busy, ok in results:
        ratio = stall / idle if idle > 0 else float("inf")
        print(
            f"{phase:>10}: {seconds:6.1f} s, longest stall {stall:5.1f} ms (GUI thread busy "
            f"{busy:.1f} ms of it), {ratio:.1f}x idle{'' if ok else '  (did not finish!)'}"
        )
        worst = max(worst, stall if ok else float("inf"))
    sources = getattr(finished[0], "metadata", {}).get("sources", []) if finished else []
    print(f"sources of the answer: {[s.get('where') for s in sources][:3]}")
    window.close()
    services.close()
    worker.shutdown()
    print(f"load average during the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    verdict = "PASS" if worst < TARGET_MS else "FAIL"
    print(f"{verdict}: longest GUI-thread stall {worst:.1f} ms (target < {TARGET_MS:.0f} ms)")
    return 0 if worst < TARGET_MS else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=50)
    parser.add_argument("--idle", type=float, default=2.0, help="seconds of idle baseline")
    parser.add_argument("--timeout", type=float, default=900.0)
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
