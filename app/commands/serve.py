"""``ember serve``: the OpenAI-, Anthropic- and Ollama-compatible APIs without the GUI.

Binds first (a taken port is one clear line and exit 1, before any slow model load; also the
optional Ollama port, 11434), prints the base URLs (and with ``--clients`` each coding
agent's settings: app/server/clients.py), then loads ``--model`` if given; other
library models load on first use. Ctrl+C or SIGTERM stops it cleanly: open streams are
cancelled, the model is unloaded.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.cli import COMMANDS, CliError
from app.commands.options import add_load_flags, load_params, model_load_params
from app.config import Settings, paths
from app.engine.worker import EngineWorker
from app.server.aliases import AliasError, parse_alias
from app.server.catalog import (
    CatalogError,
    CatalogModel,
    ChainCatalog,
    LibraryCatalog,
    ModelCatalog,
    StaticCatalog,
    entry_for_file,
)
from app.server.clients import KEY_VARIABLE, startup_text
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.ollama import OLLAMA_PORT
from app.server.ollama.port import start_ollama_port
from app.server.runner import ServerRunner
from app.server.security import InsecureBindError, check_bind
from app.server.status import ServerStartError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help=COMMANDS["serve"],
        description="Serve the OpenAI-compatible API (chat, completions, embeddings, models), "
        "Anthropic's Messages API and Ollama's API on one port. Models in the library load "
        "when a request names them.",
    )
    p.add_argument(
        "-m",
        "--model",
        metavar="NAME_OR_PATH",
        help="load this model at start: a .gguf path or a model in the library",
    )
    p.add_argument(
        "--host",
        default=None,
        help="address to listen on (default: 127.0.0.1, this computer only); any other "
        "address requires an API key of 16 characters or more",
    )
    p.add_argument("-p", "--port", type=int, default=None, help="port (default: 8434)")
    keys = p.add_mutually_exclusive_group()
    keys.add_argument(
        "--api-key",
        default=None,
        metavar="KEY",
        help="require `Authorization: Bearer KEY` (default: $EMBER_API_KEY or the setting); "
        "other users of this computer can read a key given here (ps): prefer EMBER_API_KEY "
        "or --api-key-file",
    )
    keys.add_argument(
        "--api-key-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="read the API key from FILE (one line)",
    )
    p.add_argument(
        "--cors-origin",
        action="append",
        default=None,
        metavar="ORIGIN",
        help="let web pages from ORIGIN (e.g. http://localhost:3000) call the API; repeatable",
    )
    p.add_argument(
        "--ollama-port",
        type=int,
        nargs="?",
        const=OLLAMA_PORT,
        default=None,
        metavar="PORT",
        help=f"also listen on PORT (default: Ollama's {OLLAMA_PORT}) for tools that only call "
        "Ollama there; the main port answers Ollama's API too (default: the "
        "server.ollama_port setting, 0 = off)",
    )
    p.add_argument(
        "--image-urls",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="fetch http(s) image URLs in chat requests, from public addresses only (default: "
        "the API server settings' switch, off)",
    )
    p.add_argument(
        "--image-urls-local",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="fetch image URLs from this computer and local networks too (loopback, private, "
        "link-local addresses: other services there become reachable by API clients); implies "
        "--image-urls (default: the settings' switch, off)",
    )
    p.add_argument(
        "--alias",
        action="append",
        default=None,
        metavar="NAME=MODEL",
        help="let clients name MODEL as NAME, e.g. claude-sonnet-4-5=qwen3-coder (Claude Code "
        "asks for Claude models); NAME may end in * (claude-*); repeatable; added to the "
        "server.model_aliases setting",
    )
    p.add_argument(
        "--clients",
        action="store_true",
        help="print how to point Claude Code, Codex, Continue, Cline, Zed, opencode and aider "
        "at this server",
    )
    p.add_argument(
        "--max-queue",
        type=int,
        default=16,
        metavar="N",
        help="requests that may wait for the engine before answering 503 (default: 16)",
    )
    p.add_argument(
        "--log-requests",
        action="store_true",
        help="append every request (prompts and answers too) to EMBER_HOME/logs/requests.jsonl, "
        "readable by you only",
    )
    p.add_argument(
        "--model-ttl",
        type=ttl_argument,
        default=None,
        metavar="DURATION",
        help="unload a model loaded for a request after it is unused this long: seconds or a "
        "duration such as 5m or 1h30m; 0 = after its answers, -1 = never (default: the "
        "server.model_ttl setting, 60 minutes, as LM Studio; Ollama's is 5m). A request's "
        "ttl or keep_alive overrides it",
    )
    add_load_flags(p)
    p.set_defaults(func=run)


def ttl_argument(text: str) -> float:
    """``--model-ttl``'s value in seconds (app/engine/durations.py's one parser)."""
    from app.engine.durations import DurationError, seconds_of

    try:
        seconds = seconds_of(text)
    except DurationError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    assert seconds is not None
    return seconds


def model_ttl(args: argparse.Namespace, settings: Settings) -> float | None:
    """Seconds a model loaded just in time stays unused (None: kept)."""
    from app.engine.residency import ttl_setting

    given = args.model_ttl if args.model_ttl is not None else settings.get("server.model_ttl")
    return ttl_setting(given)


def server_config(args: argparse.Namespace, settings: Settings) -> ServerConfig:
    overrides: dict[str, Any] = {}
    if args.host is not None:
        overrides["host"] = args.host
    if args.port is not None:
        overrides["port"] = args.port
    api_key = args.api_key
    if api_key is None and args.api_key_file is not None:
        api_key = read_key_file(args.api_key_file)
    if api_key is None:
        api_key = os.environ.get("EMBER_API_KEY")
    if api_key is not None:
        overrides["api_key"] = api_key
    if args.cors_origin is not None:
        overrides["cors_origins"] = tuple(args.cors_origin)
    if args.log_requests:
        overrides["log_file"] = paths().logs_dir / "requests.jsonl"
    if args.image_urls is not None:
        overrides["image_urls"] = args.image_urls
    if args.image_urls_local is not None:
        overrides["image_urls_local"] = args.image_urls_local
        if args.image_urls_local and args.image_urls is None:
            overrides["image_urls"] = True
    config = ServerConfig.from_settings(settings, **overrides)
    if args.alias:
        try:
            given = tuple(parse_alias(a) for a in args.alias)
        except AliasError as e:
            raise CliError(str(e)) from e
        config = replace(config, model_aliases=given + config.model_aliases)  # given first: wins
    return config


def ollama_port(args: argparse.Namespace, settings: Settings, main_port: int) -> int | None:
    """The extra port to listen on, or None."""
    port = args.ollama_port if args.ollama_port is not None else settings.get("server.ollama_port")
    if not port:
        return None
    if not 0 < int(port) < 65536:
        raise CliError(f"--ollama-port {port} is not a port; use 1 to 65535 (Ollama's: 11434).")
    if int(port) == main_port:
        return None  # the main port answers Ollama's API already
    return int(port)


def read_key_file(path: Path) -> str:
    """The API key in ``path``: its one line, without surrounding whitespace."""
    try:
        key = path.expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise CliError(f"Cannot read the API key file {path}: {reason}.") from e
    if not key:
        raise CliError(f"The API key file {path} is empty; put the key on its first line.")
    if "\n" in key:
        raise CliError(f"The API key file {path} has several lines; keep only the key in it.")
    if os.name == "posix" and path.expanduser().stat().st_mode & 0o077:
        print(
            f"ember: warning: other users can read {path}; `chmod 600 {path}` keeps the key yours",
            file=sys.stderr,
            flush=True,
        )
    return key


def _library_catalog() -> ModelCatalog:
    from app.library.user_library import default_library

    return LibraryCatalog(default_library())


def _startup_model(name: str, library: ModelCatalog) -> CatalogModel:
    path = Path(name).expanduser()
    try:
        found = library.resolve(str(path.resolve()) if path.is_file() else name)
    except CatalogError as e:
        raise CliError(str(e)) from e
    if found is not None:
        return found
    if path.is_file():
        return entry_for_file(path)
    raise CliError(
        f"No model called {name!r} in the library and no such file. `ember ls` lists models; "
        f"`ember pull` downloads them."
    )


def run(args: argparse.Namespace) -> int:
    settings = Settings()
    config = server_config(args, settings)
    try:
        check_bind(config)
    except InsecureBindError as e:
        raise CliError(str(e)) from e
    paths().ensure()  # private folders before the request log writes prompts into one
    if args.mmproj is not None and not args.model:
        raise CliError("--mmproj is the projector of the --model loaded at start; name one.")
    if args.draft_model is not None and not args.model:
        raise CliError("--draft-model drafts for the --model loaded at start; name one.")
    library = _library_catalog()
    static = StaticCatalog()
    entry = _startup_model(args.model, library) if args.model else None
    if entry is not None:
        static.add(entry)
    # --mmproj and --draft-model belong to --model: a model loaded just in time is another file
    defaults = replace(load_params(args), mmproj=None, draft_model=None)
    startup_params = None
    if entry is not None:  # a file named by a link: its projector is beside the link
        given = Path(args.model).expanduser()
        startup_params = model_load_params(args, given if given.is_file() else entry.path)
    worker = EngineWorker()
    gateway = Gateway(
        worker,
        ChainCatalog(static, library),
        defaults,
        max_waiting=max(1, args.max_queue),
        model_ttl=model_ttl(args, settings),
        projectors=not getattr(args, "no_mmproj", False),
    )
    runner = ServerRunner(gateway, config)
    extra_port = ollama_port(args, settings, config.port)
    extra: ServerRunner | None = None
    stop = threading.Event()
    try:
        try:
            status = runner.start()
            if extra_port is not None:
                extra = start_ollama_port(gateway, config, extra_port, runner.request_log)
        except ServerStartError as e:
            raise CliError(str(e)) from e
        _on_signals(stop)
        print(f"Ember API at {status.base_url}", flush=True)
        root = (status.base_url or "").removesuffix("/v1")
        ollama_url = (
            extra.status.base_url.removesuffix("/v1") if extra and extra.status.base_url else root
        )
        print(f"Ollama-compatible API at {ollama_url}", flush=True)
        print(f"Anthropic-compatible API at {root} (POST /v1/messages)", flush=True)
        if entry is not None:
            print(f"Loading {entry.id}…", file=sys.stderr, flush=True)
            handle = gateway.load(entry.path, entry.id, startup_params)
            while not stop.is_set():
                try:
                    loaded = handle.wait(0.5)
                except TimeoutError:
                    continue
                print(
                    f"Model {loaded.model_id} ready ({loaded.n_ctx} tokens of context, on "
                    f"{loaded.runs_on}).",
                    file=sys.stderr,
                    flush=True,
                )
                break
        _print_clients(args, root, entry, config)
        print("Press Ctrl+C to stop.", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            pass
        print("Stopping…", file=sys.stderr, flush=True)
        return 0
    finally:
        if extra is not None:
            extra.stop()
        runner.stop()
        worker.shutdown()


def _print_clients(
    args: argparse.Namespace, root: str, entry: CatalogModel | None, config: ServerConfig
) -> None:
    """Each client's settings (``--clients``), or where to find them. The key is shown as
    $EMBER_API_KEY: the terminal's scroll-back keeps what is printed."""
    if not args.clients:
        print(
            "Settings for Claude Code, Codex, Continue, Cline, Zed, opencode and aider: "
            "ember serve --clients",
            file=sys.stderr,
            flush=True,
        )
        return
    key = f"${KEY_VARIABLE}" if config.api_key else ""
    print(startup_text(root, entry.id if entry else None, key), flush=True)


def _on_signals(stop: threading.Event) -> None:
    def handle(_signum: int, _frame: Any) -> None:
        stop.set()

    for name in ("SIGINT", "SIGTERM", "SIGBREAK"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), handle)
