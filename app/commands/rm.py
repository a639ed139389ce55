"""``ember rm NAME``: delete a model Ember downloaded or imported; hide any other."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.cli import COMMANDS, CliError
from app.library.hidden import hidden_note
from app.library.user_library import default_library
from app.safe_text import terminal_text


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "rm",
        help=COMMANDS["rm"],
        description="Delete a model Ember downloaded or imported. A model found in place (the "
        "Hugging Face cache, LM Studio, Ollama, llama.cpp, Jan, GPT4All, your folders) is "
        "hidden instead: Ember never deletes another app's files. `--unhide PATH` lists a "
        "hidden model again (`ember ls --hidden` shows them).",
    )
    p.add_argument("name", metavar="NAME", help="the model's name as `ember ls` shows it")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument(
        "--unhide", action="store_true", help="NAME is a hidden file's path: list it again"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    library = default_library()
    if args.unhide:
        if not library.unhide(args.name):
            shown = terminal_text(args.name)
            raise CliError(f"{shown} is not hidden; `ember ls --hidden` lists those that are.")
        print(f"Listed again: {terminal_text(args.name)}")
        return 0
    library.scan()
    model = library.find(args.name)
    if model.owned and not args.yes and sys.stdin.isatty():
        answer = input(f"Delete {model.id} ({model.path})? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("Nothing deleted.", file=sys.stderr)
            return 1
    if library.delete(model.id) == "hidden":
        print(terminal_text(hidden_note(model.name, model.path)))
        return 0
    print(f"Deleted {terminal_text(model.id)}")
    return 0
