"""app/attachments is core code: no Qt, no UI, no commands (the GUI runs it on a worker
thread and ``ember serve`` may use it without a display), and its modules stay small."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "app" / "attachments"
FORBIDDEN = ("PySide6", "app.ui", "app.commands", "app.cli")


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def test_the_package_imports_no_qt_ui_or_commands() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) > 5
    wrong = {
        path.name: sorted(
            m for m in _imports(path) for f in FORBIDDEN if m == f or m.startswith(f + ".")
        )
        for path in modules
    }
    assert not {k: v for k, v in wrong.items() if v}


def test_each_module_is_under_400_lines() -> None:
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in PACKAGE.glob("*.py")}
    assert max(sizes.values()) < 400, sizes
