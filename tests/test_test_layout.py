"""The tests' own layout: a test module imports from ``tests`` only ``tests.helpers`` (what
tests share: functions, fakes, builders, constants), so no test module is another's library
and a helper has one home; fixtures are shared through the nearest ``conftest.py``, which
imports from ``tests`` only ``tests.helpers`` too. The helpers import no test module and no
conftest. The benchmarks in ``bench/`` import only ``app``, ``tests.helpers`` and ``bench``
(besides the standard library and third-party packages). ``tests/ui`` mirrors ``app/ui``: a
test folder under it is a subpackage of ``app/ui`` (or the conformance suite)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (at the top or inside a function), with ``from X import Y``
    counted as ``X.Y`` too (``from tests.ui import test_x`` imports a test module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert not node.level, f"{path}: relative import"
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _project_imports(path: Path) -> set[str]:
    return {m for m in _imports(path) if _under(m, "tests") and m != "tests"}


def _outside_helpers(path: Path) -> list[str]:
    """What ``path`` imports from ``tests`` that is not ``tests.helpers``."""
    return sorted(
        m
        for m in _project_imports(path)
        # ``from tests.helpers import x`` also names ``tests.helpers.x``: both are helpers
        if not _under(m, "tests.helpers")
        # ``from tests import helpers`` is the helpers package itself
        and m != "tests.helpers"
    )


def _importing_outside_helpers(paths: Iterable[Path]) -> dict[str, list[str]]:
    """Each of ``paths`` that imports from ``tests`` what is not ``tests.helpers``, with what."""
    return {
        path.relative_to(ROOT).as_posix(): found
        for path in sorted(paths)
        if (found := _outside_helpers(path))
    }


def test_a_test_module_or_conftest_imports_only_the_helpers_from_tests() -> None:
    wrong = _importing_outside_helpers(
        path
        for path in TESTS.rglob("*.py")
        if path.name.startswith("test_") or path.name == "conftest.py"
    )
    assert not wrong, "move what they share into tests/helpers (fixtures: the nearest conftest)"


def test_the_helpers_import_no_test_module_and_no_conftest() -> None:
    assert not _importing_outside_helpers((TESTS / "helpers").rglob("*.py"))


def test_every_python_module_in_tests_is_a_test_a_conftest_or_a_helper() -> None:
    wrong = [
        path.relative_to(ROOT).as_posix()
        for path in sorted(TESTS.rglob("*.py"))
        if not path.name.startswith("test_")
        and path.name not in ("conftest.py", "__init__.py")
        and (TESTS / "helpers") not in path.parents
    ]
    assert not wrong, "helper modules belong in tests/helpers"


def test_the_benchmarks_import_only_app_the_helpers_and_each_other() -> None:
    assert not _importing_outside_helpers((ROOT / "bench").rglob("*.py"))


def test_every_test_folder_is_a_package() -> None:
    """Test files of the same name in two folders (tests/ui/chat/test_context.py and
    tests/attachments/test_context.py) need packages to be told apart."""
    missing = [
        folder.relative_to(ROOT).as_posix()
        for folder in sorted({p.parent for p in TESTS.rglob("*.py")})
        if "__pycache__" not in folder.parts and not (folder / "__init__.py").exists()
    ]
    assert not missing


def test_the_ui_tests_mirror_the_ui_packages() -> None:
    packages = {p.parent.name for p in (ROOT / "app/ui").glob("*/__init__.py")}
    folders = {p.parent.name for p in (TESTS / "ui").glob("*/__init__.py")}
    assert folders - packages <= {"conformance"}, "a folder of tests/ui names no app/ui package"
