"""``ember ps``: the models a running Ember (``ember serve`` or the app's API server) has
loaded, the memory each holds, its context and until when it stays loaded (read from the
server's ``GET /v1/models``, whose loaded entries say it)."""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from app.cli import COMMANDS, CliError
from app.config import Settings
from app.engine.gguf_format import human_bytes
from app.safe_text import terminal_text

MAX_BODY = 4 * 1024 * 1024  # a model list larger than this is no Ember's


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ps",
        help=COMMANDS["ps"],
        description="List the models a running Ember server has loaded: the memory each "
        "holds, its context and when it is unloaded if unused (its time-to-live).",
    )
    p.add_argument(
        "--url",
        default=None,
        help="the server (default: http://127.0.0.1 and the server.port setting, 8434)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def _base_url(args: argparse.Namespace) -> str:
    if args.url:
        url = str(args.url).rstrip("/")
        if not url.startswith(("http://", "https://")) or len(url) > 2048:
            raise CliError(f"--url {url[:80]!r} is no http(s) URL; e.g. http://127.0.0.1:8434")
        return url.removesuffix("/v1")
    return f"http://127.0.0.1:{Settings().get('server.port')}"


def _loaded(base: str) -> list[dict[str, Any]]:
    import httpx

    key = os.environ.get("EMBER_API_KEY") or Settings().get("server.api_key")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        r = httpx.get(f"{base}/v1/models", headers=headers, timeout=10)
    except httpx.HTTPError as e:
        raise CliError(
            f"No Ember server answers at {base} ({e.__class__.__name__}). Start one with "
            "`ember serve`, or turn on the API server in the app."
        ) from None
    if r.status_code == 401:
        raise CliError(f"{base} wants an API key: set EMBER_API_KEY.")
    if r.status_code != 200 or len(r.content) > MAX_BODY:
        raise CliError(f"{base}/v1/models answered {r.status_code}; is it an Ember server?")
    try:
        data = r.json()["data"]
    except (ValueError, KeyError, TypeError):
        raise CliError(f"{base}/v1/models did not answer a model list.") from None
    return [m for m in data if isinstance(m, dict) and m.get("state") == "loaded"]


def _until(expires_at: Any, now: float) -> str:
    if not isinstance(expires_at, int | float):
        return "kept loaded"
    left = max(0, int(expires_at - now))
    when = time.strftime("%H:%M", time.localtime(expires_at))
    minutes = (left + 59) // 60
    return f"{when} (in {minutes} min)" if left >= 60 else f"{when} (in {left} s)"


def run(args: argparse.Namespace) -> int:
    models = _loaded(_base_url(args))
    if args.json:
        keys = ("id", "memory_bytes", "context_length", "ttl", "expires_at")
        print(json.dumps([{k: m.get(k) for k in keys} for m in models], indent=2))
        return 0
    if not models:
        print("No model is loaded.")
        return 0
    now = time.time()
    table = [("MODEL", "MEMORY", "CONTEXT", "UNTIL")]
    for m in models:
        memory = m.get("memory_bytes")
        table.append(
            (
                terminal_text(str(m.get("id", "?"))),
                human_bytes(memory) if isinstance(memory, int) else "-",
                str(m.get("context_length") or "-"),
                _until(m.get("expires_at"), now),
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    for row in table:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3])
    return 0
