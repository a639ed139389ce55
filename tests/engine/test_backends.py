"""llama.cpp's back-ends through ctypes (app/engine/backends.py) with the installed build.

This venv's llama-cpp-python is bootstrap.py's static CPU build: nothing to load, the CPU
device listed all the same. The DL + Vulkan build is tested in test_backends_vulkan.py."""

from __future__ import annotations

import _ctypes
from pathlib import Path

import pytest

from app.engine import backends
from app.engine.backends import BackendError


def test_the_static_build_lists_the_cpu_device_and_what_it_was_built_for() -> None:
    hw = backends.hardware()
    assert not hw.dynamic and hw.errors == ()
    assert hw.backends == ("CPU",)
    (cpu,) = hw.devices
    assert cpu.kind == "cpu" and cpu.backend == "CPU" and not cpu.is_gpu
    assert cpu.description and 0 < cpu.memory_free <= cpu.memory_total
    assert hw.gpus == ()
    assert hw.cpu_variant == "built in"
    # bootstrap.py's portable flags, read back from the CPU back-end and from llama.cpp
    assert {"AVX", "AVX2", "FMA", "F16C"} <= set(hw.cpu_features)
    assert hw.system_info.startswith("CPU : ") and "AVX2 = 1" in hw.system_info
    assert backends.gpu_memory() == ()


def test_loading_twice_registers_nothing_twice() -> None:
    first = backends.load()
    assert backends.load() is first
    assert len(first.devices()) == len(backends.hardware().devices)


def _only(tmp_path: Path, **links: Path) -> Path:
    for name, target in links.items():
        (tmp_path / name).symlink_to(target)
    return tmp_path


def test_a_directory_without_llama_cpp_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match=r"has no libggml\.so: reinstall llama-cpp-python"):
        backends.load(tmp_path)


def test_a_library_without_the_symbols_is_one_clear_error(tmp_path: Path) -> None:
    """An older or newer libggml that lacks a function Ember calls: an error naming it."""
    lib = _only(tmp_path, **{"libggml.so": Path(_ctypes.__file__)})  # a library, not ggml
    with pytest.raises(BackendError, match="has no ggml_backend_load_all_from_path: this llama"):
        backends.load(lib)


def test_a_missing_libllama_leaves_the_rest_readable(tmp_path: Path) -> None:
    real = backends.library_dir()
    lib = _only(tmp_path, **{"libggml.so": real / "libggml.so"})
    hw = backends.hardware(lib)
    assert [d.kind for d in hw.devices] == ["cpu"]
    assert hw.system_info == ""
    assert hw.errors == (
        f"system info: {lib.resolve()} has no libllama.so: reinstall llama-cpp-python "
        "(`python3 scripts/bootstrap.py`).",
    )
