"""``ember providers add|ls|test|rm``: remote OpenAI-compatible servers to chat through.

Also home of ``ember run --provider NAME MODEL`` (and ``ember run NAME::MODEL``), which
streams from a provider instead of loading a local model.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from app.cli import COMMANDS, CliError
from app.engine.provider_ids import (
    PRESETS,
    RemoteModelId,
    format_remote_id,
    parse_remote_id,
    validate_provider_name,
)
from app.engine.providers import ProviderRegistry, make_provider


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "providers",
        help=COMMANDS["providers"],
        description="Remote OpenAI-compatible servers. Their models are named PROVIDER::MODEL "
        "(e.g. `ember run gpu-box::llama3 'Hi'`).",
    )
    p.set_defaults(func=_list)
    actions = p.add_subparsers(dest="action", metavar="ACTION")

    add = actions.add_parser(
        "add",
        help="add a provider",
        description="Add a remote server. BASE_URL may be left out when --preset is given; "
        "with or without /v1 both work.",
    )
    add.add_argument("name", metavar="NAME", help="lowercase letters, digits and dashes")
    add.add_argument("base_url", metavar="BASE_URL", nargs="?", help="e.g. http://gpu-box:8000")
    add.add_argument("--preset", choices=list(PRESETS), help="server kind (and its usual URL)")
    key = add.add_mutually_exclusive_group()
    key.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="read the API key from this environment variable at each use",
    )
    key.add_argument(
        "--api-key",
        metavar="KEY",
        help="store this API key (in the OS keyring when available); '-' reads it from stdin",
    )
    add.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an extra HTTP header to send (repeatable)",
    )
    add.add_argument("--replace", action="store_true", help="replace a provider of that name")
    add.set_defaults(func=_add)

    ls = actions.add_parser("ls", help="list providers", description="List the providers.")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=_list)

    test = actions.add_parser(
        "test",
        help="check a provider answers and list its models",
        description="Ask the provider for its models and show how long it took.",
    )
    test.add_argument("name", metavar="NAME")
    test.set_defaults(func=_test)

    rm = actions.add_parser("rm", help="remove a provider", description="Remove a provider.")
    rm.add_argument("name", metavar="NAME")
    rm.set_defaults(func=_remove)


def _add(args: argparse.Namespace) -> int:
    registry = ProviderRegistry()
    provider = make_provider(
        validate_provider_name(args.name),
        args.base_url,
        args.preset,
        api_key_env=args.api_key_env,
        headers=_headers(args.header),
    )
    api_key = args.api_key
    if api_key == "-":
        api_key = sys.stdin.readline().strip()
        if not api_key:
            raise CliError("No API key on stdin.")
    provider = registry.add(provider, api_key, replace=args.replace)
    print(f"Added {provider.name}: {provider.base_url} (key: {provider.key_source})")
    if provider.key_ref == "file":
        print(
            f"Note: no OS keyring is available, so the key is kept in "
            f"{registry.path.parent / 'secrets.json'}, readable only by you.",
            file=sys.stderr,
        )
    if provider.preset and PRESETS[provider.preset].needs_key and provider.key_ref is None:
        print(f"Note: {PRESETS[provider.preset].label} needs an API key.", file=sys.stderr)
    return 0


def _headers(items: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise CliError(f"--header needs 'NAME: VALUE', not {item!r}.")
        headers[name.strip()] = value.strip()
    return headers


def _list(args: argparse.Namespace) -> int:
    providers = ProviderRegistry().list()
    if getattr(args, "json", False):
        rows = [{"name": p.name, **p.to_json(), "key_source": p.key_source} for p in providers]
        print(json.dumps(rows, indent=2))
        return 0
    if not providers:
        print("No providers yet. Add one with `ember providers add NAME BASE_URL`.")
        return 0
    table = [("NAME", "URL", "PRESET", "KEY")] + [
        (p.name, p.base_url, p.preset or "-", p.key_source) for p in providers
    ]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _test(args: argparse.Namespace) -> int:
    engine = ProviderRegistry().engine(args.name)
    try:
        result = engine.probe()
    finally:
        engine.shutdown()
    count = len(result.models)
    print(
        f"{args.name} at {engine.base_url} answered in {result.seconds * 1000:.0f} ms; "
        f"{count} model{'s' if count != 1 else ''}:"
    )
    for model in result.models:
        print(f"  {format_remote_id(args.name, model)}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    provider = ProviderRegistry().remove(args.name)
    print(f"Removed {provider.name} ({provider.base_url}).")
    return 0


# ---- ember run --provider ------------------------------------------------------------------------


def remote_target(provider: str | None, model: str) -> RemoteModelId:
    """What ``ember run`` should talk to: ``--provider NAME MODEL`` or ``NAME::MODEL``."""
    remote = parse_remote_id(model)
    if provider is None:
        if remote is None:
            raise CliError(f"{model!r} is not a remote model (PROVIDER::MODEL).")
        return remote
    validate_provider_name(provider)
    if remote is not None and remote.provider == provider:
        return remote
    if remote is not None:
        raise CliError(f"{model!r} names provider {remote.provider}, not {provider}.")
    return RemoteModelId(provider, model)


def run_remote(args: argparse.Namespace) -> int:
    """``ember run`` against a provider: the same output, Ctrl+C and interactive mode."""
    from app.commands import run as run_cmd
    from app.commands.options import sampling_params
    from app.engine.types import ChatRequest, CompletionRequest, Finished

    target = remote_target(args.provider, args.model)
    sampling = sampling_params(args)
    engine = ProviderRegistry().engine(target.provider, default_model=target.model)
    try:
        if args.prompt is None:
            banner = (
                f"Chatting with {target.model} on {target.provider} ({engine.base_url}). "
                "Type /help for help, /bye to leave."
            )
            return run_cmd.chat_loop(engine, banner, sampling, args)
        if args.raw:
            request: ChatRequest | CompletionRequest = CompletionRequest(
                args.prompt, sampling, model=target.model
            )
        else:
            messages = run_cmd.start_messages(args.system)
            messages.append({"role": "user", "content": args.prompt})
            request = ChatRequest(messages, sampling, model=target.model)
        final = run_cmd.stream_answer(engine.submit(request), sys.stdout)
        run_cmd.finish_line(final, args.json)
        return 0 if isinstance(final, Finished) else 1
    finally:
        engine.shutdown()
