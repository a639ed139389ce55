"""``ember ls``: the models on this machine."""

from __future__ import annotations

import argparse
import json
from typing import Any

from app.cli import COMMANDS
from app.engine.gguf_format import human_bytes
from app.library.user_library import default_library
from app.safe_text import terminal_text


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ls",
        help=COMMANDS["ls"],
        description="List models downloaded by Ember and those found in place (the Hugging "
        "Face cache, LM Studio's, Ollama's, llama.cpp's, Jan's and GPT4All's folders, folders "
        "you added).",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--hidden", action="store_true", help="list the files `ember rm` hid instead")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    library = default_library()
    if args.hidden:
        hidden = library.hidden_paths()
        if args.json:
            print(json.dumps(hidden, indent=2))
        for path in [] if args.json else hidden:
            print(terminal_text(path))
        return 0
    models = library.scan()
    if args.json:
        rows = [
            {
                "id": m.id,
                "name": m.name,
                "path": str(m.path),
                "size": m.size,
                "source": m.source,
                "quant": m.quant,
                "context_length": m.info.context_length if m.info else None,
                "error": m.error,
                "locations": [str(p) for p in m.locations],
            }
            for m in models
        ]
        print(json.dumps(rows, indent=2))
        return 0
    if not models:
        print("No models yet. Download one with `ember pull OWNER/REPO`, e.g.")
        print("  ember pull bartowski/Qwen2.5-0.5B-Instruct-GGUF")
        return 0
    table = [("NAME", "QUANT", "SIZE", "CONTEXT", "LOCATION")]
    for m in models:
        ctx = str(m.info.context_length) if m.info and m.info.context_length else "-"
        where = m.source if m.owned else f"{m.source}: {m.path}"
        if m.error:
            where += f"  (unusable: {m.error})"
        name, where = terminal_text(m.id), terminal_text(where)  # names come from files
        table.append((name, m.quant or "-", human_bytes(m.size), ctx, where))
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for row in table:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
    return 0
