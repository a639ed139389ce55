"""The repository explains itself: docs/ARCHITECTURE.md is part of it, and nothing in it points
to design notes that live outside the repository (someone who only cloned it cannot follow
such a link)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Spelled in pieces so that this file does not mention them itself.
OUTSIDE = ("../" + "shared", "/work/" + "shared")
TEXT = {".md", ".py", ".toml", ".txt", ".json", ".xml", ".desktop", ".qss", ".spec", ".sh"}
FOLDERS = ("docs", "app", "packaging", "resources", "tests", "bench")


def _texts() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for folder in FOLDERS:
        found += (p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in TEXT)
    return [p for p in found if "__pycache__" not in p.parts]


def test_the_architecture_document_is_in_the_repository() -> None:
    doc = ROOT / "docs" / "ARCHITECTURE.md"
    assert doc.is_file()
    assert doc.read_text("utf-8").startswith("# ")
    assert "docs/ARCHITECTURE.md" in (ROOT / "README.md").read_text("utf-8")


def test_nothing_points_to_notes_outside_the_repository() -> None:
    wrong: dict[str, list[str]] = {}
    for path in _texts():
        text = path.read_text("utf-8", errors="replace")
        if found := [link for link in OUTSIDE if link in text]:
            wrong[path.relative_to(ROOT).as_posix()] = found
    assert not wrong, "say it in the repository (docs/ARCHITECTURE.md) instead"


def _thread_names(path: Path) -> set[str]:
    """The names threads are started with in ``path``: a literal, or an f-string's literal
    start followed by ``<``; a task-runner lane ``Lane("x", ...)`` runs ``ember-x``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        called = node.func.attr if isinstance(node.func, ast.Attribute) else None
        called = called or (node.func.id if isinstance(node.func, ast.Name) else None)
        if called == "Lane" and node.args and isinstance(node.args[0], ast.Constant):
            names.add(f"ember-{node.args[0].value!s}")
        if called != "Thread" or path.name == "task_runner.py":  # its threads: the lanes
            continue
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg != "name":
                continue
            if isinstance(value, ast.Constant):
                names.add(str(value.value))
            elif isinstance(value, ast.JoinedStr) and isinstance(value.values[0], ast.Constant):
                names.add(f"{value.values[0].value!s}<")
    return names


def test_the_threads_table_names_every_thread_the_app_starts() -> None:
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text("utf-8")
    table = doc.split("## Threads", 1)[1].split("\n\n", 2)[1]
    documented = set(re.findall(r"`([^`]+)`", table))
    started = {
        name for path in sorted((ROOT / "app").rglob("*.py")) for name in _thread_names(path)
    }
    assert {"ember-engine", "ember-tools", "mcp-<", "tool-loop"} <= started
    missing = sorted(
        name
        for name in started
        if not any(
            d == name or (name.endswith("<") and d.startswith(name[:-1])) for d in documented
        )
    )
    assert not missing, "add them to the Threads table of docs/ARCHITECTURE.md"
