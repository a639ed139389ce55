"""llama.cpp's back-ends through ctypes (app/engine/backends.py) with the installed build.

Both builds: bootstrap.py's static CPU build (nothing to load, the CPU device listed all the
same) and scripts/build_llama.py's DL build (the best CPU variant for this CPU is loaded);
the DL build's Vulkan device is tested in test_backends_vulkan.py."""

from __future__ import annotations

import _ctypes
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine import backends
from app.engine.backends import BackendError
from tests.helpers.cpu_variant import best_variant


def expected_variant() -> str:
    """ "built in" for bootstrap.py's static build, else the best variant for this CPU."""
    return best_variant() if backends.has_cpu_variants(backends.library_dir()) else "built in"


def test_the_cpu_device_is_listed_with_the_code_it_runs() -> None:
    hw = backends.hardware()
    assert hw.errors == ()
    assert "CPU" in hw.backends
    (cpu,) = [d for d in hw.devices if d.kind == "cpu"]
    assert cpu.backend == "CPU" and not cpu.is_gpu
    assert cpu.description and 0 < cpu.memory_free <= cpu.memory_total
    assert hw.cpu_variant == expected_variant()
    # this machine's CPU (AVX2) and both builds' CPU code, read back from the back-end
    assert {"AVX", "AVX2", "FMA", "F16C"} <= set(hw.cpu_features)
    assert hw.system_info.startswith("CPU : ") and "AVX2 = 1" in hw.system_info
    assert [g.name for g in backends.gpu_memory()] == [g.name for g in hw.gpus]
    if not hw.dynamic:  # bootstrap.py's static build: the CPU back-end only, linked in
        assert hw.backends == ("CPU",) and hw.gpus == ()


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
    ggml = {p.name: p for p in real.iterdir() if p.name.startswith("libggml")}
    lib = _only(tmp_path, **ggml)
    hw = backends.hardware(lib)
    assert "cpu" in [d.kind for d in hw.devices]
    assert hw.system_info == ""
    assert hw.errors == (
        f"system info: {lib.resolve()} has no libllama.so: reinstall llama-cpp-python "
        "(`python3 scripts/bootstrap.py`).",
    )


LOADED_GGML = """
import json, re, sys
if sys.argv[1] == "llama_cpp first":
    import llama_cpp
from app.engine import backends
backends.hardware()
import llama_cpp
maps = open("/proc/self/maps").read()
files = sorted({line.split()[-1] for line in maps.splitlines() if "/libggml" in line})
print(json.dumps(files))
"""


@pytest.mark.parametrize("order", ["llama_cpp first", "backends first"])
def test_the_process_holds_one_libggml_whichever_loads_first(order: str) -> None:
    """A wheel's libggml.so and libggml.so.0 are two copies of one file: opening the other
    copy than libllama's would make a second back-end registry, and the back-ends loaded into
    it would be invisible to llama.cpp ("no backends are loaded")."""
    out = subprocess.run(
        [sys.executable, "-c", LOADED_GGML, order], capture_output=True, text=True, check=True
    ).stdout
    files = json.loads(out)
    stems = {re.sub(r"\.so.*", ".so", Path(f).name) for f in files}
    assert len(files) == len(stems), files  # libggml.so.0 and libggml-base.so.0, once each


def _shared_library(tmp_path: Path, name: str, needs: str | None = None) -> Path:
    """A real shared library ``name`` (linked against ``needs``, which is then deleted)."""
    source = tmp_path / "module.c"
    source.write_text("int ember_module_marker(void) { return 1; }\n")
    args = ["cc", "-shared", "-fPIC", "-o", str(tmp_path / name), str(source)]
    if needs:
        dependency = _shared_library(tmp_path, f"lib{needs}.so")
        args += [f"-L{tmp_path}", "-Wl,--no-as-needed", f"-l{needs}"]
    subprocess.run(args, check=True, capture_output=True)
    if needs:
        dependency.unlink()
    return tmp_path / name


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="builds an ELF module with cc")
def test_a_gpu_module_whose_driver_library_is_missing_is_named_with_the_reason(
    tmp_path: Path,
) -> None:
    """ggml skips a back-end module that fails to open without saying why; the Hardware page
    and `ember info --hardware` say which and why (here: as when libvulkan.so.1 is absent)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    _shared_library(lib, "libggml-vulkan.so", needs="ember-missing-driver")
    _shared_library(lib, "libggml-cuda.so")  # opens, but is no back-end
    _shared_library(lib, "libggml-cpu-haswell.so")  # CPU variants not chosen stay quiet
    _shared_library(lib, "libggml-base.so")
    (lib / "libggml-rpc.so").write_bytes(b"not an ELF file" * 100)
    cuda, rpc, vulkan = backends.not_loaded(lib, ("CPU",))  # in file-name order
    assert vulkan.startswith("libggml-vulkan.so: ")
    assert "libember-missing-driver.so: cannot open shared object file" in vulkan
    assert "Install the GPU driver and the Vulkan loader (libvulkan1" in vulkan
    assert cuda == "libggml-cuda.so: it opens, but registered no back-end."
    assert rpc == "libggml-rpc.so: invalid ELF header."
    # registered back-ends are not reported, whatever the case of their names
    assert backends.not_loaded(lib, ("CPU", "Vulkan", "CUDA", "RPC")) == ()


def test_modules_that_did_not_load_are_rows_of_the_report() -> None:
    hw = backends.Hardware(
        library_dir="/x",
        dynamic=True,
        backends=("CPU",),
        devices=(),
        cpu_variant="haswell",
        cpu_features=("AVX2",),
        system_info="CPU : AVX2 = 1",
        not_loaded=("libggml-vulkan.so: libvulkan.so.1: cannot open shared object file.",),
    )
    rows = dict(backends.describe(hw))
    assert rows["Not loaded"].startswith("libggml-vulkan.so: libvulkan.so.1")
    assert rows["GPU"] == "none found: models run on the CPU"
