"""scripts/build_llama.py: the flags of the DL + variants + Vulkan build and its two patches
(installing the per-variant CPU modules; Vulkan headers without VK_EXT_layer_settings). The
build itself takes most of an hour here; test_backends_vulkan.py tests what it produced."""

from __future__ import annotations

import importlib.util
import platform
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]

# ggml-vulkan.cpp's instance creation as llama-cpp-python 0.3.36 vendors it (abridged around)
VULKAN_CPP = """    std::vector<const char*> extensions;
    if (layer_settings) {
        extensions.push_back("VK_EXT_layer_settings");
    }
    VkBool32 enable_best_practice = layer_settings;
    std::vector<vk::LayerSettingEXT> settings = {
        {
            "VK_LAYER_KHRONOS_validation",
            "validate_best_practices",
            vk::LayerSettingTypeEXT::eBool32,
            1,
            &enable_best_practice
        },
    };
    vk::LayerSettingsCreateInfoEXT layer_setting_info(settings);
    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, \
layers, extensions, &layer_setting_info);
#ifdef __APPLE__
"""
CMAKELISTS = """    llama_cpp_python_install_target(ggml-sycl)
    llama_cpp_python_install_target(ggml-vulkan)

    # Workaround for Windows + CUDA
"""


@pytest.fixture(scope="module")
def build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_llama", ROOT / "scripts/build_llama.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_llama"] = module
    spec.loader.exec_module(module)
    return module


def _sdist(tmp_path: Path) -> Path:
    src = tmp_path / "llama_cpp_python-0.3.36"
    cpp = src / "vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp"
    cpp.parent.mkdir(parents=True)
    cpp.write_text(VULKAN_CPP)
    (src / "CMakeLists.txt").write_text(CMAKELISTS)
    return src


def test_the_layer_settings_block_is_dropped_once(build: ModuleType, tmp_path: Path) -> None:
    src = _sdist(tmp_path)
    cpp = src / "vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp"
    assert build.patch_layer_settings(src) is True
    text = cpp.read_text()
    assert "LayerSetting" not in text and "enable_best_practice" not in text
    assert (
        "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, "
        "layers, extensions);\n#ifdef __APPLE__\n" in text
    )
    assert text.startswith(VULKAN_CPP[: VULKAN_CPP.index("    VkBool32")])  # the rest as it was
    assert build.patch_layer_settings(src) is False and cpp.read_text() == text


def test_a_llama_cpp_whose_block_changed_is_a_clear_error(
    build: ModuleType, tmp_path: Path
) -> None:
    src = _sdist(tmp_path)
    cpp = src / "vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp"
    cpp.write_text(VULKAN_CPP.replace("VkBool32 enable_best_practice", "bool enable"))
    with pytest.raises(SystemExit, match="VK_EXT_layer_settings block was not found"):
        build.patch_layer_settings(src)


def test_only_headers_without_the_extension_are_patched(build: ModuleType, tmp_path: Path) -> None:
    old = tmp_path / "old.h"
    old.write_text("#define VK_HEADER_VERSION 239\n")
    new = tmp_path / "new.h"
    new.write_text('#define VK_EXT_LAYER_SETTINGS_EXTENSION_NAME "VK_EXT_layer_settings"\n')
    assert not build.headers_have_layer_settings(old)
    assert build.headers_have_layer_settings(new)


def test_every_cpu_variant_module_is_installed(build: ModuleType, tmp_path: Path) -> None:
    src = _sdist(tmp_path)
    assert build.patch_install_variants(src) is True
    text = (src / "CMakeLists.txt").read_text()
    loop = text[text.index("# ember") : text.index("endforeach()")]
    for variant in ("x64", "sse42", "haswell", "skylakex", "zen4", "sapphirerapids", "armv8.0_1"):
        assert f" {variant}" in loop
    assert "llama_cpp_python_install_target(ggml-cpu-${ember_variant})" in loop
    assert (
        build.patch_install_variants(src) is False and (src / "CMakeLists.txt").read_text() == text
    )
    (src / "CMakeLists.txt").write_text("project(llama_cpp)\n")
    with pytest.raises(SystemExit, match="no 'llama_cpp_python_install_target"):
        build.patch_install_variants(src)


def test_the_flags(build: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    assert build.cmake_flags(True, True) == [
        "-DGGML_NATIVE=OFF",
        "-DGGML_BACKEND_DL=ON",
        "-DGGML_CPU_ALL_VARIANTS=ON",
        "-DGGML_VULKAN=ON",
    ]
    # one CPU module, bootstrap.py's portable AVX2 one, still loaded at run time
    assert build.cmake_flags(False, False) == [
        "-DGGML_NATIVE=OFF",
        "-DGGML_BACKEND_DL=ON",
        "-DGGML_AVX2=ON",
        "-DGGML_FMA=ON",
        "-DGGML_F16C=ON",
    ]
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    assert "-DGGML_CPU_ALL_VARIANTS=ON" in build.cmake_flags(True, True)


def test_build_log_lines_are_told_apart(build: ModuleType) -> None:
    cpu = "[61/763] g++ -o vendor/llama.cpp/ggml/src/CMakeFiles/ggml-cpu-haswell.dir/ops.cpp.o"
    assert build.part_of(cpu) == "cpu variant haswell"
    probe = "[9/193] g++ -o vendor/llama.cpp/ggml/src/CMakeFiles/ggml-cpu-feats.dir/cpu-feats.cpp.o"
    assert build.part_of(probe) == "cpu"
    shaders = "[300/763] cd build && vulkan-shaders-gen --glslc /usr/bin/glslc"
    assert build.part_of(shaders) == "vulkan shaders"
    vk = "[400/763] g++ -o ggml/src/ggml-vulkan/CMakeFiles/ggml-vulkan.dir/ggml-vulkan.cpp.o"
    assert build.part_of(vk) == "ggml-vulkan"


def test_each_part_gets_its_share_of_the_wall_clock(build: ModuleType) -> None:
    obj = "vendor/llama.cpp/ggml/src/CMakeFiles"
    lines = [
        (1.0, "-- Configuring done\n"),
        (5.0, f"[1/4] g++ -o {obj}/ggml-base.dir/ggml.c.o\n"),
        (9.0, f"[2/4] g++ -o {obj}/ggml-cpu-haswell.dir/ops.cpp.o\n"),
        (10.0, "In function 'x': a warning between steps\n"),
        (12.0, f"[3/4] g++ -o {obj}/ggml-cpu-zen4.dir/ops.cpp.o\n"),
        (20.0, "[4/4] cd build && vulkan-shaders-gen --glslc /usr/bin/glslc\n"),
    ]
    assert build.build_times(lines, 26.0) == {
        "setup": 5.0,
        "cpu variant haswell": 4.0,
        "cpu variants, all": 7.0,
        "cpu variant zen4": 3.0,
        "vulkan shaders": 8.0,
        "package": 6.0,
        "total": 26.0,
    }


TOKENIZER_FUNCTION = (Path(__file__).parent / "data/tokenizer_st_partition-0.3.36.cpp").read_text()


def _vocab_cpp(tmp_path: Path, function: str = TOKENIZER_FUNCTION) -> Path:
    cpp = tmp_path / "src" / "vendor/llama.cpp/src/llama-vocab.cpp"
    cpp.parent.mkdir(parents=True)
    cpp.write_text(f"// before\n{function}\n// NOTE: after\n")
    return cpp


def test_the_tokenizer_partition_keeps_the_element_before_its_fragment(
    build: ModuleType, tmp_path: Path
) -> None:
    """Every build is patched so that splitting text at N special tokens is linear in N (it
    walked the list from its head for each match, and passed over every fragment for each of
    the model's special tokens: 160 KB of "w\\n" took 50 s)."""
    cpp = _vocab_cpp(tmp_path)
    assert build.patch_tokenizer_partition(tmp_path / "src") is True
    text = cpp.read_text()
    assert text.startswith("// before\n") and text.endswith("\n// NOTE: after\n")
    assert "std::distance(buffer.begin(), it)" not in text
    assert "std::next(buffer.begin(), (source - 1))" not in text
    # and a special token the text lacks is skipped before its pass over the fragments
    assert "if (one_fragment && whole.find(text) == std::string_view::npos) {" in text
    assert text.count("buffer.erase_after(before_source);") == 2
    assert text.count("prev = it;") == 4  # left, special, right, and the outer loop
    assert "auto prev = buffer.before_begin();" in text
    assert build.patch_tokenizer_partition(tmp_path / "src") is False and cpp.read_text() == text


def test_a_changed_tokenizer_partition_is_a_clear_error(build: ModuleType, tmp_path: Path) -> None:
    _vocab_cpp(tmp_path, TOKENIZER_FUNCTION.replace("(source - 1)", "(source-1)"))
    with pytest.raises(SystemExit, match="update TOKENIZER_EDITS"):
        build.patch_tokenizer_partition(tmp_path / "src")
