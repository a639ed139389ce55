"""The dependency direction holds: ``ui -> {engine, library, chats, server, attachments}``,
``server -> engine``, ``cli/commands -> everything``. The core never imports Qt (so ``ember
serve`` runs without a display), and nothing but the CLI imports the commands (what the app
needs from them lives in the core)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ("app/engine", "app/library", "app/chats", "app/server", "app/attachments")
# Still importing a command module; the fix is a one-line import from the core module named.
PENDING: dict[tuple[str, str], str] = {}


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def _modules(*folders: str) -> dict[str, set[str]]:
    return {
        path.relative_to(ROOT).as_posix(): _imports(path)
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*.py"))
    }


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_core_never_imports_qt_or_the_ui() -> None:
    wrong = {
        name: sorted(m for m in imports if _under(m, "PySide6") or _under(m, "app.ui"))
        for name, imports in _modules(*CORE).items()
    }
    assert not {k: v for k, v in wrong.items() if v}


def test_only_the_cli_imports_the_commands() -> None:
    wrong = {
        (name, module)
        for name, imports in _modules(*CORE, "app/ui").items()
        for module in imports
        if _under(module, "app.commands") and (name, module) not in PENDING
    }
    assert not wrong, "move what these need from app/commands into the core"


def test_what_the_app_took_from_the_commands_is_in_the_core() -> None:
    from app.commands import resolve
    from app.library import user_library

    assert resolve.default_library is user_library.default_library
    for (_name, _old), new in PENDING.items():
        assert (ROOT / (new.replace(".", "/") + ".py")).is_file()


# Ways to start a thread that the UI must not use: its background work goes through the one
# task runner (app/ui/task_runner.py: lanes, keys, cancellation, shutdown).
THREAD_MAKERS = {
    "Thread",
    "Timer",
    "QThreadPool",
    "QRunnable",
    "ThreadPoolExecutor",
    "start_new_thread",
}
TASK_RUNNER = "app/ui/task_runner.py"
# Justified exceptions, by file and name: none today.
OWN_THREADS: set[tuple[str, str]] = set()


def _thread_makers(path: Path) -> set[str]:
    """The thread-making names ``path`` uses (``threading.Thread``, an imported
    ``QThreadPool``, ...), as attributes or plain names, imported or called."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in THREAD_MAKERS:
            found.add(node.attr)
        elif isinstance(node, ast.Name) and node.id in THREAD_MAKERS:
            found.add(node.id)
        elif isinstance(node, ast.ImportFrom):
            found.update(a.name for a in node.names if a.name in THREAD_MAKERS)
    return found


def test_the_ui_runs_background_work_only_through_the_task_runner() -> None:
    wrong = {
        (path.relative_to(ROOT).as_posix(), name)
        for path in sorted((ROOT / "app/ui").rglob("*.py"))
        if path.relative_to(ROOT).as_posix() != TASK_RUNNER
        for name in _thread_makers(path)
    } - OWN_THREADS
    assert not wrong, "submit to app.ui.task_runner.tasks() (a lane of its own if need be)"


def test_the_thread_guard_sees_each_way_of_making_a_thread(tmp_path: Path) -> None:
    samples = {
        "threading.Thread(target=print).start()": "Thread",
        "from threading import Thread": "Thread",
        "from PySide6.QtCore import QThreadPool": "QThreadPool",
        "QThreadPool.globalInstance().start(job)": "QThreadPool",
        "class Job(QRunnable): pass": "QRunnable",
        "pool = concurrent.futures.ThreadPoolExecutor(2)": "ThreadPoolExecutor",
        "_thread.start_new_thread(print, ())": "start_new_thread",
    }
    for source, name in samples.items():
        path = tmp_path / "sample.py"
        path.write_text(source, encoding="utf-8")
        assert _thread_makers(path) == {name}, source
