"""``ember rm NAME``: delete a model Ember downloaded or imported."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.cli import COMMANDS
from app.library.user_library import default_library
from app.safe_text import terminal_text


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "rm",
        help=COMMANDS["rm"],
        description="Delete a model Ember downloaded or imported. Models found in place (the "
        "Hugging Face cache, LM Studio, your folders) are never deleted by Ember.",
    )
    p.add_argument("name", metavar="NAME", help="the model's name as `ember ls` shows it")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    library = default_library()
    library.scan()
    model = library.find(args.name)
    if not args.yes and sys.stdin.isatty():
        answer = input(f"Delete {model.id} ({model.path})? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("Nothing deleted.", file=sys.stderr)
            return 1
    library.delete(model.id)
    print(f"Deleted {terminal_text(model.id)}")
    return 0
