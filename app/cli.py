"""Command line: ``ember`` opens the app; subcommands run headless.

Every command exits 0 on success and, on failure, prints one line (``ember: error: …``) to
stderr and exits non-zero. Each subcommand lives in ``app/commands/<name>.py`` and provides
``add_parser(subparsers)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Any

from app import __version__

COMMANDS = ("run", "info", "serve", "pull", "ls", "rm", "providers")


class CliError(Exception):
    """A failure to report as one line and exit code 1."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ember",
        description="Run language models on your own machine. Without a command, opens the app.",
    )
    parser.add_argument("--version", action="version", version=f"Ember {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = _command_module(name)
        if module is not None:
            module.add_parser(sub)
    return parser


def _command_module(name: str) -> Any:
    try:
        return importlib.import_module(f"app.commands.{name}")
    except ModuleNotFoundError as e:
        if e.name == f"app.commands.{name}":
            return None  # not built yet
        raise


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command is None:
            from app.ui.app import run_gui

            return run_gui()
        return int(args.func(args))
    except CliError as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except Exception as e:  # errors a user can act on: one clear line
        if isinstance(e, _user_errors()):
            return _fail(str(e))
        raise


def _user_errors() -> tuple[type[Exception], ...]:
    from app.engine.types import EngineError
    from app.library.downloads import DownloadError
    from app.library.hub import HubError
    from app.library.local import LibraryError

    return (EngineError, HubError, LibraryError, DownloadError, OSError, ValueError, LookupError)


def _fail(message: str) -> int:
    print(f"ember: error: {message}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
