"""``ember run MODEL [PROMPT]``: stream an answer, or chat interactively without PROMPT."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any, TextIO

from app.commands.options import add_load_flags, add_sampling_flags, load_params, sampling_params
from app.commands.resolve import resolve_model
from app.engine.types import (
    ChatMessage,
    ChatRequest,
    CompletionRequest,
    Delta,
    Failed,
    FinalEvent,
    Finished,
    LoadedModel,
    SamplingParams,
)
from app.engine.worker import EngineWorker, Job

HELP = """Commands:
  /bye      leave (or Ctrl+D)
  /clear    forget the conversation so far
  /help     this help
Ctrl+C stops the answer being written."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="chat with a model in the terminal",
        description="Stream an answer to PROMPT, or chat interactively when PROMPT is left out.",
    )
    p.add_argument("model", metavar="MODEL", help="a .gguf path or a model in the library")
    p.add_argument("prompt", metavar="PROMPT", nargs="?", help="answer this and exit")
    p.add_argument("--system", default="", help="system prompt")
    p.add_argument(
        "--raw",
        action="store_true",
        help="complete PROMPT as plain text instead of as a chat message",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="after the answer, print a JSON line with finish reason, usage and timings",
    )
    add_load_flags(p)
    add_sampling_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = resolve_model(args.model)
    sampling = sampling_params(args)
    worker = EngineWorker()
    try:
        loaded: LoadedModel = worker.load(str(path), load_params(args)).result()
        if args.prompt is not None:
            if args.raw:
                final = _stream(worker.submit(CompletionRequest(args.prompt, sampling)), sys.stdout)
            else:
                messages = _start_messages(args.system)
                messages.append({"role": "user", "content": args.prompt})
                final = _stream(worker.submit(ChatRequest(messages, sampling)), sys.stdout)
            _finish_line(final, args.json)
            return 0 if isinstance(final, Finished) else 1
        return _interactive(worker, loaded, sampling, args)
    finally:
        worker.shutdown()


def _start_messages(system: str) -> list[ChatMessage]:
    return [{"role": "system", "content": system}] if system else []


def _stream(job: Job, out: TextIO) -> FinalEvent:
    """Print deltas as they come; Ctrl+C cancels the job and still returns its final event."""
    events = job.events()
    while True:
        try:
            for event in events:
                if isinstance(event, Delta):
                    out.write(event.text)
                    out.flush()
            return job.wait()
        except KeyboardInterrupt:
            job.cancel()


def _finish_line(final: FinalEvent, as_json: bool) -> None:
    sys.stdout.write("\n")
    if isinstance(final, Failed):
        print(f"ember: error: {final.error}", file=sys.stderr)
    if as_json:
        print(json.dumps(_summary(final)))
    sys.stdout.flush()


def _summary(final: FinalEvent) -> dict[str, Any]:
    usage = final.usage
    return {
        "finish_reason": final.reason,
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
            "cached_tokens": usage.cached_tokens,
        },
        "timings": asdict(final.timings),
        **({"error": str(final.error)} if isinstance(final, Failed) else {}),
    }


def _read_line(prompt: str) -> str | None:
    """One line of input; None at end of input. Ctrl+C at the prompt only reminds."""
    interactive = sys.stdin.isatty()
    while True:
        try:
            if interactive:
                return input(prompt)
            line = sys.stdin.readline()
            return line.rstrip("\n") if line else None
        except EOFError:
            return None
        except KeyboardInterrupt:
            print("\nUse Ctrl+D or /bye to leave.", file=sys.stderr)


def _interactive(
    worker: EngineWorker, loaded: LoadedModel, sampling: SamplingParams, args: argparse.Namespace
) -> int:
    if sys.stdin.isatty():
        import readline  # noqa: F401  (line editing and history for input())
    print(
        f"Chatting with {loaded.model_id} ({loaded.n_ctx} tokens of context). "
        "Type /help for help, /bye to leave.",
        file=sys.stderr,
    )
    messages = _start_messages(args.system)
    while True:
        line = _read_line(">>> ")
        if line is None or line.strip() == "/bye":
            return 0
        text = line.strip()
        if not text:
            continue
        if text == "/help":
            print(HELP, file=sys.stderr)
            continue
        if text == "/clear":
            messages = _start_messages(args.system)
            print("Conversation cleared.", file=sys.stderr)
            continue
        messages.append({"role": "user", "content": text})
        final = _stream(worker.submit(ChatRequest(list(messages), sampling)), sys.stdout)
        answer = (
            final.result if isinstance(final, Finished) and isinstance(final.result, str) else ""
        )
        messages.append({"role": "assistant", "content": answer})
        _finish_line(final, args.json)
