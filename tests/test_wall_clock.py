"""Tests wait on events, never on wall-clock ceilings: a busy 2-core CI machine trips any
"it took less than N seconds" (timing targets live in bench/). An AST scan of tests/ for an
``assert`` that bounds a measured time by a constant."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLOCKS = {"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time"}
# Times the engine and the server measure themselves (Timings, RequestRecord, probes).
MEASURED = {"time_to_first_token", "elapsed", "duration", "seconds", "prompt_seconds"}


def _reads_clock(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in CLOCKS
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "time"
        for n in ast.walk(node)
    )


def _is_measured(node: ast.AST, timed: set[str]) -> bool:
    """A clock reading, a name set from clock arithmetic, or a measured time attribute."""
    return _reads_clock(node) or any(
        (isinstance(n, ast.Name) and n.id in timed)
        or (isinstance(n, ast.Attribute) and n.attr in MEASURED)
        for n in ast.walk(node)
    )


def ceilings(source: str) -> list[str]:
    """``function:line`` of every ``assert <measured time> < <number>`` (or ``<=``)."""
    found: list[str] = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        timed = {
            target.id
            for n in ast.walk(fn)
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.BinOp)
            if _reads_clock(n.value)
            for target in n.targets
            if isinstance(target, ast.Name)
        }
        for check in (n for n in ast.walk(fn) if isinstance(n, ast.Assert)):
            for compare in (n for n in ast.walk(check.test) if isinstance(n, ast.Compare)):
                sides = [compare.left, *compare.comparators]
                for i, op in enumerate(compare.ops):
                    bound = sides[i + 1]
                    if (
                        isinstance(op, ast.Lt | ast.LtE)
                        and isinstance(bound, ast.Constant)
                        and _is_measured(sides[i], timed)
                    ):
                        found.append(f"{fn.name}:{check.lineno}")
    return found


def test_no_test_asserts_a_wall_clock_ceiling() -> None:
    wrong = {
        path.relative_to(ROOT).as_posix(): found
        for path in sorted((ROOT / "tests").rglob("test_*.py"))
        if (found := ceilings(path.read_text(encoding="utf-8")))
    }
    assert not wrong, "wait on an event instead (a generous failsafe timeout is fine)"


def test_the_scan_sees_the_ceilings_it_is_for() -> None:
    caught = {
        "started = time.perf_counter()\nopen_it()\nopened = time.perf_counter() - started\n"
        "assert opened < 2.0\n",
        "assert 0 < final.timings.time_to_first_token < 30\n",
        "assert time.monotonic() - t0 <= 5\n",
    }
    for body in caught:
        source = "def test_x():\n" + "".join(f"    {line}\n" for line in body.splitlines())
        assert ceilings(source) == [f"test_x:{source.count(chr(10))}"], body
    allowed = (
        "def test_x():\n    assert 0 < probe.seconds <= took\n    assert both.wait(120)\n"
        "    assert t.time_to_first_token > 0\n    assert len(seen) < 100\n"
    )
    assert ceilings(allowed) == []
