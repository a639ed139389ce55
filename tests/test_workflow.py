"""The GitHub workflow runs the README's test command on every OS before it builds bundles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped,unused-ignore]

WORKFLOW = Path(__file__).resolve().parent.parent / ".github" / "workflows" / "build.yml"


def _jobs() -> dict[str, Any]:
    jobs: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]
    return jobs


def test_every_os_runs_make_test_before_the_bundles() -> None:
    jobs = _jobs()
    test = jobs["test"]
    assert set(test["strategy"]["matrix"]["os"]) == {
        entry["os"] for entry in jobs["bundle"]["strategy"]["matrix"]["include"]
    }
    runs = [step.get("run", "") for step in test["steps"]]
    assert "make test" in runs
    # Windows runs make's own commands, the same ones the Makefile's test target lists
    makefile = (WORKFLOW.parents[2] / "Makefile").read_text(encoding="utf-8")
    target = makefile.split("\ntest: setup\n", 1)[1].split("\n\n", 1)[0]
    make_commands = [line.strip().split("-m ", 1)[1] for line in target.splitlines()]
    windows = next(r for r in runs if "Scripts/python.exe" in r)
    assert [line.split("-m ", 1)[1] for line in windows.splitlines() if "-m " in line] == (
        make_commands
    )
    assert jobs["bundle"]["needs"] == "test"
