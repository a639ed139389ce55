"""scripts/bootstrap.py's choice of llama.cpp build (EMBER_LLAMA_BUILD): the portable default,
the run-time back-ends build made by scripts/build_llama.py, each cached under its own key, and
a mistyped choice refused in one line. The builds themselves take minutes (the portable one is
what every test run uses; test_backends_vulkan.py tests the run-time one)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def bootstrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("ember_bootstrap", ROOT / "scripts/bootstrap.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "WHEEL_CACHE", tmp_path / "wheels")
    monkeypatch.setattr(module.sys, "platform", "linux")
    return module


@pytest.fixture
def commands(bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The build commands bootstrap runs; each "build" leaves a wheel in its --out folder."""
    ran: list[list[str]] = []

    def run(cmd: list[str], env: dict[str, str] | None = None) -> None:
        ran.append(cmd)
        out = Path(cmd[cmd.index("--out") + 1])
        out.mkdir(parents=True)
        (out / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl").write_bytes(b"PK")

    monkeypatch.setattr(bootstrap, "run", run)
    return ran


def test_the_default_build_is_the_portable_one(
    bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EMBER_LLAMA_BUILD", raising=False)
    assert bootstrap.llama_build() == "portable"
    monkeypatch.setenv("EMBER_LLAMA_BUILD", "runtime")
    assert bootstrap.llama_build() == "runtime"
    monkeypatch.setattr(bootstrap.sys, "platform", "darwin")
    assert bootstrap.llama_build() == "portable"  # macOS builds with Metal


def test_a_mistyped_build_is_one_line_naming_the_choices(
    bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_LLAMA_BUILD", "vulkan")
    with pytest.raises(SystemExit) as e:
        bootstrap.llama_build()
    assert str(e.value) == (
        "EMBER_LLAMA_BUILD='vulkan': choose one of portable, runtime, runtime-cpu"
    )


@pytest.mark.parametrize(("build", "vulkan"), [("runtime", True), ("runtime-cpu", False)])
def test_the_runtime_build_runs_build_llama_and_caches_its_wheel(
    bootstrap: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    commands: list[list[str]],
    build: str,
    vulkan: bool,
) -> None:
    monkeypatch.setenv("EMBER_LLAMA_BUILD", build)
    wheel = bootstrap.llama_wheel()
    [cmd] = commands
    assert cmd[:2] == [sys.executable, str(ROOT / "scripts" / "build_llama.py")]
    assert ("--no-vulkan" in cmd) is not vulkan
    assert wheel.is_file() and not wheel.parent.name.endswith(".partial")
    assert bootstrap.llama_wheel() == wheel and len(commands) == 1  # cached: not built again
    other = "runtime-cpu" if build == "runtime" else "runtime"
    monkeypatch.setenv("EMBER_LLAMA_BUILD", other)  # each build has its own cache
    assert bootstrap.llama_wheel().parent != wheel.parent and len(commands) == 2


def test_the_portable_build_is_patched_by_build_llama_with_its_flags(
    bootstrap: ModuleType, monkeypatch: pytest.MonkeyPatch, commands: list[list[str]]
) -> None:
    """The default build goes through build_llama.py too (its llama.cpp patches), as one
    static back-end with bootstrap's portable flags; a wheel from before the patches is not
    reused (their name is part of the cache key)."""
    monkeypatch.delenv("EMBER_LLAMA_BUILD", raising=False)
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    wheel = bootstrap.llama_wheel()
    [cmd] = commands
    assert cmd[:2] == [sys.executable, str(ROOT / "scripts" / "build_llama.py")]
    assert cmd[cmd.index("--cmake-args") + 1] == bootstrap.cmake_args()
    assert bootstrap.llama_wheel() == wheel and len(commands) == 1
    monkeypatch.setattr(bootstrap, "LLAMA_PATCHES", "tokenizer-partition-0")
    assert bootstrap.llama_wheel().parent != wheel.parent and len(commands) == 2
