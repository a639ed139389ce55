"""``--force``: ember run (and serve) load what the memory estimate refuses; without it the
refusal is one line that names the numbers and the override."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from app.engine import llamacpp


def test_run_refuses_a_model_that_does_not_fit_then_loads_it_with_force(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], gemma_path: Path
) -> None:
    monkeypatch.setattr(llamacpp, "available_memory", lambda: 100_000_000)
    argv = ["run", str(gemma_path), "-c", "512", "--parallel", "1", "--temp", "0", "-n", "3"]
    assert main([*argv, "Say hi"]) == 1
    _out, err = capsys.readouterr()
    assert err.startswith("ember: error: Not enough memory for 512 tokens of context: it needs ")
    assert "100 MB is free" in err and "--force" in err and err.count("\n") == 1
    assert main([*argv, "--force", "Say hi"]) == 0
    out, _err = capsys.readouterr()
    assert out.strip()  # it answered


def test_serve_takes_force_for_its_loads() -> None:
    from app.cli import build_parser
    from app.commands.options import load_params

    args = build_parser().parse_args(["serve", "--force"])
    assert load_params(args).force
    assert not load_params(build_parser().parse_args(["serve"])).force
