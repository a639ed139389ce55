"""What the chat repaints while an answer streams: paint events counted per widget, by where
the widget is (inside the streaming message, inside another message on screen, elsewhere).

An answer streams from the fake engine into the open conversation of ``--messages`` messages
(the window 1280x820, as the app opens); an application-wide event filter counts every
``QEvent.Paint`` during the answer. The finished messages above it do not change, so every
paint they get is the cost of something else moving (a layout pass, a scroll that repaints the
viewport); the composer and the rest of the window likewise. Ratios per streamed update.
``--scrolled-up``: the reader scrolls back to the first messages as the answer starts.

Measured (offscreen, 40 messages, 200 tok/s, ~130 updates): following the answer, the viewport
is painted 1.5 times per update, whole when the answer grows (everything on screen moves up:
inherent to following it). Scrolled up, it was painted whole on 62 of 101 updates, the
messages being read 13 paint events per update, for nothing that changed: the canvas and the
column grew at the bottom, and Qt repaints a widget that grows wholly. With
``WA_StaticContents`` on both (chat_view.py): 0.2 viewport paints per update, mostly the
scroll bar's slider; the messages being read are not repainted
(tests/ui/chat/test_stream_repaint.py).

Run: ``.venv/bin/python bench/gui_repaint.py [--messages 40] [--rate 200] [--seconds 4]
[--scrolled-up]``
(offscreen unless QT_QPA_PLATFORM or DISPLAY says otherwise; offscreen paints what is visible,
as a screen does).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if "QT_QPA_PLATFORM" not in os.environ and not os.environ.get("DISPLAY"):
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ.setdefault("EMBER_HOME", tempfile.mkdtemp(prefix="ember-bench-"))

from PySide6.QtCore import QEvent, QObject  # noqa: E402
from PySide6.QtGui import QPaintEvent  # noqa: E402
from PySide6.QtWidgets import QWidget  # noqa: E402

import app.ui  # noqa: E402,F401  (applies the PySide6 compatibility fix first)
from app.engine.types import LoadParams  # noqa: E402
from app.ui.app import create_application  # noqa: E402
from app.ui.chat.message_widget import MessageWidget  # noqa: E402
from app.ui.engine_session import api_model_id  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from app.ui.services import create_services  # noqa: E402
from app.ui.theme import ThemeManager  # noqa: E402
from bench.gui_stream import fill_conversation, set_max_tokens, wait, wait_for  # noqa: E402
from tests.helpers.parallel_fake import ParallelFakeWorker  # noqa: E402


class PaintCounter(QObject):
    """Counts paint events by where their widget is (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.streaming_id: str | None = None
        self.counts: collections.Counter[str] = collections.Counter()
        self.by_class: collections.Counter[str] = collections.Counter()
        self.messages_painted: set[str] = set()
        self.viewport: QWidget | None = None  # the chat view's
        self.viewport_share: list[float] = []  # of its area, each time it is painted

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.Paint and isinstance(watched, QWidget):
            if watched is self.viewport:
                assert isinstance(event, QPaintEvent)
                rect = event.region().boundingRect()
                area = rect.width() * rect.height()
                full = watched.width() * watched.height()
                self.viewport_share.append(area / full if full else 0.0)
            owner: QWidget | None = watched
            while owner is not None and not isinstance(owner, MessageWidget):
                owner = owner.parentWidget()
            if owner is None:
                where = "elsewhere"
            elif owner.message.id == self.streaming_id:
                where = "streaming message"
            else:
                where = "other messages"
                self.messages_painted.add(owner.message.id)
            self.counts[where] += 1
            self.by_class[f"{where}: {type(watched).__name__}"] += 1
        return False


def run(args: argparse.Namespace) -> int:
    app = create_application([])
    ThemeManager(app, "light").apply()
    worker = ParallelFakeWorker()
    path = str(Path(os.environ["EMBER_HOME"]) / "fake-model.gguf")
    Path(path).write_bytes(b"GGUF fake")
    worker.load(path, LoadParams(n_ctx=1 << 20), api_model_id(path)).result(10)
    worker.tokens_per_second = args.rate or None
    services = create_services(worker=worker)
    conversation_id = fill_conversation(services.store, args.messages)
    services.settings.set("ui.last_conversation", conversation_id)
    window = MainWindow(services)
    window.resize(1280, 820)
    window.show()
    wait(0.5)
    controller = window.controller
    controller.open_conversation(conversation_id)
    set_max_tokens(window, round(args.rate * args.seconds) if args.rate else 400)
    wait(0.5)

    counter = PaintCounter()
    counter.viewport = window.chat.view.viewport()
    updates = 0

    def count(message_id: str, _text: str) -> None:
        nonlocal updates
        updates += 1
        counter.streaming_id = message_id

    finished: list[object] = []
    controller.answer_finished.connect(finished.append)
    controller.stream_text.connect(count)
    app.installEventFilter(counter)
    started = time.perf_counter()
    controller.send("Stream a long answer, please.")
    if args.scrolled_up:
        wait(0.3)
        window.chat.view.verticalScrollBar().setValue(0)
    answer = controller.answer
    counter.streaming_id = answer.message_id if answer is not None else None
    ok = wait_for(lambda: bool(finished), 120)
    seconds = time.perf_counter() - started
    app.removeEventFilter(counter)
    on_screen = sum(1 for w in window.chat.view.widgets() if w.visibleRegion().isEmpty() is False)

    where = ", scrolled up" if args.scrolled_up else ""
    rate = args.rate or "unthrottled"
    print(
        f"{args.messages}-message chat{where}, {rate} tok/s: {updates} streamed "
        f"updates in {seconds:.1f} s{'' if ok else ' (did not finish!)'}; "
        f"{on_screen} messages on screen at the end"
    )
    for where in ("streaming message", "other messages", "elsewhere"):
        n = counter.counts[where]
        print(f"  {where:>18}: {n:6} paint events, {n / max(updates, 1):6.2f} per update")
    print(f"  other messages painted at least once: {len(counter.messages_painted)}")
    shares = counter.viewport_share
    whole = sum(1 for share in shares if share > 0.95)
    print(
        f"  chat viewport: painted {len(shares)} times ({len(shares) / max(updates, 1):.2f} per "
        f"update), {whole} of them whole; mean share of its area "
        f"{sum(shares) / max(len(shares), 1):.0%}"
    )
    print("  most painted (where: class):")
    for name, n in counter.by_class.most_common(args.top):
        print(f"    {n:6}  {name}")
    window.close()
    services.close()
    worker.shutdown()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=40)
    parser.add_argument("--rate", type=float, default=200, help="tokens/s (0: unthrottled)")
    parser.add_argument("--seconds", type=float, default=4)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--scrolled-up", action="store_true", help="the reader scrolls up")
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
