"""One home per rule: a fact the app needs in several places is defined once and imported
(a forwarding copy drifts from the original)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# function name -> the one module that defines it
HOMES = {"available_memory": "app/engine/sizing.py"}


def test_each_rule_is_defined_in_its_one_home() -> None:
    defined: dict[str, list[str]] = {name: [] for name in HOMES}
    for path in sorted((ROOT / "app").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in defined:
                defined[node.name].append(path.relative_to(ROOT).as_posix())
    assert defined == {name: [home] for name, home in HOMES.items()}


def test_the_engine_uses_the_one_available_memory() -> None:
    from app.engine import llamacpp, sizing

    assert llamacpp.available_memory is sizing.available_memory
