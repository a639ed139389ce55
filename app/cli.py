"""Command line: ``ember`` opens the app (``ember FILE.gguf`` opens it with that model);
subcommands run headless.

Every command exits 0 on success and, on failure, prints one line (``ember: error: …``) to
stderr and exits non-zero. Each subcommand lives in ``app/commands/<name>.py`` and provides
``add_parser(subparsers)`` and ``run(args) -> int``.

Start-up is lazy: only the module of the command being run is imported (the others appear in
``--help`` through their one-line summary here), so ``ember --version`` or a second launch that
hands a file to the running app never pays for the engine, the server or Qt.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app import __version__

# Each command and its one-line summary (the command's module uses it as its ``help``).
COMMANDS = {
    "run": "chat with a model in the terminal",
    "info": "show a model's metadata and memory needs",
    "serve": "serve the OpenAI-compatible API",
    "pull": "download a model from the Hugging Face Hub",
    "ls": "list local models",
    "rm": "delete a downloaded model (others are hidden, never deleted)",
    "ps": "list the models a running server has loaded, and until when",
    "providers": "manage remote servers (vLLM, Ollama, OpenAI, …) to chat through",
    "mcp": "manage MCP servers whose tools models may call",
}


class CliError(Exception):
    """A failure to report as one line and exit code 1."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``command``, only that command's module is imported (the others are
    listed by name and summary, which is all ``--help`` shows of them)."""
    parser = argparse.ArgumentParser(
        prog="ember",
        description="Run language models on your own machine. Without a command, opens the app; "
        "`ember FILE.gguf` opens it and loads that model.",
    )
    parser.add_argument("--version", action="version", version=f"Ember {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, summary in COMMANDS.items():
        module = _command_module(name) if command in (name, None) else None
        if module is not None:
            module.add_parser(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The command named on the command line (the first word that is not an option)."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def _files_to_open(argv: Sequence[str]) -> list[str] | None:
    """``ember [-v] FILE.gguf…``: the files to open in the app; None if argv is not that."""
    words = [w for w in argv if w not in ("-v", "--verbose")]
    if words and all(w.lower().endswith(".gguf") and not w.startswith("-") for w in words):
        return words
    return None


def _command_module(name: str) -> Any:
    try:
        return importlib.import_module(f"app.commands.{name}")
    except ModuleNotFoundError as e:
        if e.name == f"app.commands.{name}":
            return None  # not built yet
        raise


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    files = _files_to_open(words)
    if files is not None:
        _setup_logging(verbose=any(w in ("-v", "--verbose") for w in words))
        missing = [f for f in files if not Path(f).expanduser().is_file()]
        if missing:
            return _fail(f"{missing[0]}: no such file. Give the path of a .gguf model file.")
        from app.ui.app import run_gui

        return run_gui(files)
    parser = build_parser(_command_of(words) or "")
    args = parser.parse_args(words)
    _setup_logging(args.verbose)
    try:
        if args.command is None:
            from app.ui.app import run_gui

            return run_gui()
        func = getattr(args, "func", None)
        if func is None:  # only when a command module failed to register: never expected
            return _fail(f"the {args.command} command is not available in this build")
        return int(func(args))
    except CliError as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except Exception as e:  # errors a user can act on: one clear line
        if isinstance(e, _user_errors()):
            return _fail(str(e))
        raise


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


def _user_errors() -> tuple[type[Exception], ...]:
    from app.engine.types import EngineError
    from app.library.download_state import DownloadError
    from app.library.hub_errors import HubError
    from app.library.local_model import LibraryError

    return (EngineError, HubError, LibraryError, DownloadError, OSError, ValueError, LookupError)


def _fail(message: str) -> int:
    from app.safe_text import terminal_text  # a message may quote a file, a config, a server

    print(f"ember: error: {terminal_text(message)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
