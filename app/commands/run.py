"""``ember run MODEL [PROMPT]``: stream an answer, or chat interactively without PROMPT."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from app.cli import COMMANDS, CliError
from app.commands.options import (
    add_load_flags,
    add_sampling_flags,
    model_load_params,
    sampling_params,
)
from app.commands.resolve import looks_like_hub_spec, resolve_model
from app.commands.run_images import (
    no_projector_message,
    read_images,
    split_attachments,
    with_images,
)
from app.engine.fitting import (
    PER_MESSAGE_OVERHEAD,
    PROMPT_OVERHEAD,
    ContextPlan,
    answer_room,
    fit_messages,
)
from app.engine.types import (
    ChatMessage,
    ChatRequest,
    CompletionRequest,
    Delta,
    Failed,
    FinalEvent,
    Finished,
    LoadedModel,
    Request,
    SamplingParams,
    TokenizeRequest,
)
from app.engine.worker import EngineWorker, Job, Sink
from app.library.local_model import NoMatchingModelError
from app.safe_text import terminal_text
from app.tools.choices import TOOL_CHOICES

if TYPE_CHECKING:
    from app.attachments.context import Source
    from app.attachments.document import Document

HELP = """Commands:
  /bye      leave (or Ctrl+D)
  /clear    forget the conversation so far
  /help     this help
Ctrl+C stops the answer being written."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help=COMMANDS["run"],
        description="Stream an answer to PROMPT, or chat interactively when PROMPT is left out.",
    )
    p.__class__ = _IntermixedParser  # PROMPT may come after the options too
    p.add_argument(
        "model",
        metavar="MODEL",
        help="a .gguf path, a model in the library, a Hub repo (OWNER/REPO[:QUANT], pulled "
        "if missing), or PROVIDER::MODEL on a remote server",
    )
    p.add_argument("prompt", metavar="PROMPT", nargs="?", help="answer this and exit")
    p.add_argument(
        "--provider",
        metavar="NAME",
        help="run MODEL on this remote server (see `ember providers`) instead of locally",
    )
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
    files = p.add_argument_group("attached files")
    files.add_argument(
        "--attach",
        metavar="FILE",
        action="append",
        help="ask PROMPT about this file (text, Markdown, code, PDF, .docx, HTML, or a PNG/JPEG "
        "image for a vision model); repeat for more files. A long file gives its passages "
        "most relevant to PROMPT",
    )
    files.add_argument(
        "--show-sources",
        action="store_true",
        help="print the passages of the attached files given to the model (file and page or "
        "section) before the answer",
    )
    files.add_argument(
        "--vectors",
        action="store_true",
        help="choose a long file's passages by their meaning too (the model's embeddings) and "
        "not by their words alone; embedding costs about a prompt read of the whole file",
    )
    tools = p.add_argument_group("tools (MCP servers, see `ember mcp`)")
    tools.add_argument(
        "--mcp",
        metavar="NAME[,NAME…]",
        help="let the model call these servers' tools (each call is asked about first)",
    )
    tools.add_argument(
        "--tool-choice",
        choices=TOOL_CHOICES,
        default="auto",
        help="auto: the model decides; required: it must call a tool first; none: no tools",
    )
    tools.add_argument(
        "-y", "--yes", action="store_true", help="run tool calls without asking each time"
    )
    add_load_flags(p)
    add_sampling_flags(p)
    p.set_defaults(func=run)


class _IntermixedParser(argparse.ArgumentParser):
    """Reads positionals wherever they are (``ember run MODEL --mcp time PROMPT``): plain
    argparse takes MODEL and PROMPT together and leaves a PROMPT after an option unmatched."""

    _inside = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._inside:  # parse_known_intermixed_args calls back in here
            return super().parse_known_args(args, namespace)
        self._inside = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._inside = False


class _Engine(Protocol):
    """What the chat loop needs: the local worker or a RemoteEngine."""

    def submit(self, request: Request, sink: Sink | None = None) -> Job: ...


def run(args: argparse.Namespace) -> int:
    if args.mcp is not None and args.raw:
        raise CliError("--mcp works in a chat, not with --raw.")
    remote = args.provider is not None or _is_remote(args.model)
    documents, images = _attached(args, remote)  # before the model loads: a bad file fails fast
    if remote:
        if args.mcp is not None:
            raise CliError("--mcp works with local models; a remote server runs its own tools.")
        from app.commands.providers import run_remote

        return run_remote(args)
    path = _local_model(args.model)
    params = model_load_params(args, path)
    if images and params.mmproj is None:  # said before a load that could not help
        raise CliError(no_projector_message(args.model))
    sampling = sampling_params(args)
    worker = EngineWorker()
    try:
        loaded: LoadedModel = worker.load(str(path), params).result()
        if loaded.notice:  # the GPU failed and the CPU took over: said, never silent
            print(f"ember: {loaded.notice}", file=sys.stderr, flush=True)
        if args.prompt is not None:
            if args.raw:
                final = stream_answer(
                    worker.submit(CompletionRequest(args.prompt, sampling)), sys.stdout
                )
            else:
                messages = start_messages(args.system)
                content = args.prompt
                if documents:
                    content = _with_attachments(worker, loaded, documents, args, sampling)
                if images:
                    content = with_images(content, len(images))
                messages.append({"role": "user", "content": content})
                if args.mcp is not None:
                    from app.commands.mcp import run_with_tools

                    final = run_with_tools(worker, loaded, messages, sampling, args)
                else:
                    request = ChatRequest(messages, sampling, images=images)
                    final = stream_answer(worker.submit(request), sys.stdout)
            finish_line(final, args.json)
            return 0 if isinstance(final, Finished) else 1
        banner = (
            f"Chatting with {loaded.model_id} ({loaded.n_ctx} tokens of context, on "
            f"{loaded.runs_on}). "
            "Type /help for help, /bye to leave."
        )
        if args.mcp is None:
            return chat_loop(worker, banner, sampling, args, ContextFitter(worker, loaded))
        from app.commands.mcp import TerminalTools

        tools = TerminalTools(worker, loaded, sampling, args)
        try:
            return chat_loop(
                worker, banner, sampling, args, ContextFitter(worker, loaded), tools=tools
            )
        finally:
            tools.close()
    finally:
        worker.shutdown()


def _attached(args: argparse.Namespace, remote: bool) -> tuple[list[Document], tuple[bytes, ...]]:
    """The attached documents' text and images' bytes; a file Ember cannot read is the
    command's one-line error."""
    if not args.attach:
        if args.show_sources:
            raise CliError("--show-sources shows the passages of files given with --attach.")
        return [], ()
    if args.prompt is None or args.raw:
        raise CliError("--attach needs a PROMPT to answer about the files (and no --raw).")
    if remote:
        raise CliError("--attach works with local models; a remote model gets text only.")
    paths, image_paths = split_attachments(args.attach)
    if image_paths and args.mcp is not None:
        raise CliError("--mcp works with text and documents; attach images without it.")
    images = read_images(image_paths)
    from app.attachments.errors import AttachmentError
    from app.attachments.extract import extract

    try:
        return [extract(path) for path in paths], images
    except AttachmentError as e:
        raise CliError(str(e)) from e


def _with_attachments(
    worker: EngineWorker,
    loaded: LoadedModel,
    documents: list[Document],
    args: argparse.Namespace,
    sampling: SamplingParams,
) -> str:
    """PROMPT after the attached files (whole, or their passages most relevant to it) in the
    room the context leaves; the passages printed first with --show-sources."""
    import uuid

    from app.attachments.context import build_context
    from app.attachments.embedder import EngineEmbedder
    from app.attachments.index import drop_index

    fitter = ContextFitter(worker, loaded)
    used = fitter.count(args.system) + fitter.count(args.prompt)
    used += PROMPT_OVERHEAD + 2 * PER_MESSAGE_OVERHEAD
    room = loaded.n_ctx - answer_room(loaded.n_ctx, sampling.max_tokens) - used
    conversation = f"run-{uuid.uuid4().hex}"  # a fresh index, deleted when done
    try:
        embedder = EngineEmbedder(worker, loaded) if args.vectors else None
        context = build_context(
            documents, args.prompt, room, fitter.count, conversation, embedder=embedder
        )
    finally:
        drop_index(conversation)
    if not any(not s.whole for s in context.sources) and context.retrieved:
        raise CliError(
            f"The attached files do not fit in {loaded.n_ctx:,} tokens of context with this "
            "prompt; load the model with a longer context (--ctx) or attach less."
        )
    for name in context.retrieved:
        print(
            f"({terminal_text(name)} is too long to give whole: the model gets its passages most "
            "relevant to the prompt.)",
            file=sys.stderr,
        )
    if args.show_sources:
        _print_sources(context.sources)
    return context.prompt(args.prompt)


def _print_sources(sources: Sequence[Source]) -> None:
    print("Sources:")
    for number, source in enumerate(sources, start=1):
        print(f"[{number}] {terminal_text(source.where)}")  # a file's name may be anything
        if not source.whole:
            print(textwrap.indent(terminal_text(source.text, lines=True), "    "))
    print()
    sys.stdout.flush()


def _local_model(name: str) -> Path:
    """A file or library model; a Hub repo that is not here yet is pulled first, so one
    command goes from nothing to chatting."""
    try:
        return resolve_model(name)
    except NoMatchingModelError:
        if not looks_like_hub_spec(name):
            raise
        from app.commands.pull import pull

        return pull(name)


def _is_remote(model: str) -> bool:
    """PROVIDER::MODEL (and not an existing file that happens to contain ``::``)."""
    if "::" not in model or Path(model).exists():
        return False
    from app.engine.provider_ids import is_remote_id

    return is_remote_id(model)


def start_messages(system: str) -> list[ChatMessage]:
    return [{"role": "system", "content": system}] if system else []


def stream_answer(job: Job, out: TextIO) -> FinalEvent:
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


def finish_line(final: FinalEvent, as_json: bool) -> None:
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
            "drafted_tokens": usage.drafted_tokens,
            "accepted_tokens": usage.accepted_tokens,
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


class ContextFitter:
    """The core context-fitting rule (``app.engine.fitting``) with exact token counts from
    the loaded model, cached by text so each turn only tokenizes its new messages."""

    def __init__(self, worker: EngineWorker, loaded: LoadedModel) -> None:
        self._worker = worker
        self._model = loaded.model_id
        self.n_ctx = loaded.n_ctx
        self._counts: dict[str, int] = {}

    def count(self, text: str) -> int:
        if not text:
            return 0
        if text not in self._counts:
            request = TokenizeRequest(text, model=self._model, add_special=False)
            self._counts[text] = len(self._worker.submit(request).result())
        return self._counts[text]

    def plan(self, messages: list[ChatMessage], max_tokens: int | None) -> ContextPlan:
        return fit_messages(messages, self.count, self.n_ctx, max_tokens)

    def too_long(self, plan: ContextPlan, max_tokens: int | None) -> str:
        room = answer_room(self.n_ctx, max_tokens)
        return (
            f"Your message is too long for this model's context (about {plan.prompt_tokens:,} "
            f"tokens, with {self.n_ctx:,} available and {room:,} kept for the answer). "
            "Shorten it, or load the model with a longer context (--ctx)."
        )


def _fitted(
    fitter: ContextFitter | None, messages: list[ChatMessage], sampling: SamplingParams
) -> list[ChatMessage] | None:
    """What to send of the conversation: all of it, or without the oldest turns when the
    context is full (said on stderr). None when the newest message alone is too long."""
    if fitter is None:  # a remote model: only its server knows its context
        return list(messages)
    plan = fitter.plan(messages, sampling.max_tokens)
    if not plan.fits:
        print(f"ember: error: {fitter.too_long(plan, sampling.max_tokens)}", file=sys.stderr)
        return None
    if plan.dropped:
        print(
            f"({plan.dropped} earlier messages no longer fit in the {fitter.n_ctx:,}-token "
            "context and were left out; the system prompt was kept.)",
            file=sys.stderr,
        )
    return plan.messages


def chat_loop(
    worker: _Engine,
    banner: str,
    sampling: SamplingParams,
    args: argparse.Namespace,
    fitter: ContextFitter | None = None,
    *,
    tools: Any = None,
) -> int:
    if sys.stdin.isatty():
        import readline  # noqa: F401  (line editing and history for input())
    print(banner, file=sys.stderr)
    messages = start_messages(args.system)
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
            messages = start_messages(args.system)
            print("Conversation cleared.", file=sys.stderr)
            continue
        messages.append({"role": "user", "content": text})
        sent = _fitted(fitter, messages, sampling)
        if sent is None:
            messages.pop()  # never sent: the conversation goes on without it
            continue
        if tools is not None:  # the model may call tools: their messages stay in the chat
            result = tools.answer(sent)
            messages += result.messages
            finish_line(result.final, args.json)
            continue
        final = stream_answer(worker.submit(ChatRequest(sent, sampling)), sys.stdout)
        answer = (
            final.result if isinstance(final, Finished) and isinstance(final.result, str) else ""
        )
        messages.append({"role": "assistant", "content": answer})
        finish_line(final, args.json)
