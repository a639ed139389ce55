"""Build the llama-cpp-python wheel with back-ends chosen at run time (issue 15).

The wheel bootstrap.py builds today is one static CPU back-end for AVX2 machines. This script
builds the same llama-cpp-python version with

* ``GGML_BACKEND_DL=ON``: every back-end is a module that libggml loads at run time
  (app/engine/backends.py calls ``ggml_backend_load_all_from_path`` on the package's lib dir);
* ``GGML_CPU_ALL_VARIANTS=ON`` on x86-64 and aarch64 Linux: one CPU module per instruction set
  (x64 and SSE4.2 up to AVX-512 and AMX); ggml scores them on the running CPU and keeps the best;
* ``GGML_VULKAN=ON`` on Linux and Windows (``--no-vulkan`` to leave it out): NVIDIA, AMD and
  Intel GPUs through their ordinary drivers; lavapipe is the software device tests use.

Patches are applied to the unpacked sdist, each idempotent:

0. Every build (also bootstrap.py's default one, built through ``--cmake-args``): llama.cpp's
   tokenizer split text at special and user-defined tokens with ``std::distance`` and
   ``std::next`` from the fragment list's head for each match, so its time grew with the
   square of the matches: 160 KB of ``"w\n"`` held the engine thread for 50 s on Gemma 3, and
   2 MB would take over an hour, with no way to cancel. :func:`patch_tokenizer_partition` keeps
   the element before the fragment instead (same fragments, same tokens, linear time).

1. llama-cpp-python's CMakeLists.txt installs ``ggml-cpu`` but not the per-variant modules
   (``ggml-cpu-haswell`` ...): without them the DL wheel has no CPU back-end at all.
2. ggml-vulkan.cpp fills a ``VkLayerSettingsCreateInfoEXT`` (VK_EXT_layer_settings, Vulkan
   headers 1.3.261+) only to turn on the validation layer's best-practice checks in a
   GGML_VULKAN_VALIDATE debug build. Debian 12's headers (1.3.239) lack the type, so when the
   headers in use lack it, the block is dropped: instance creation is otherwise unchanged,
   and newer headers build the source as is. Patching beats fetching other headers: the
   build keeps the system's loader and headers, which match each other.

Each part's share of the build's wall-clock time (see :func:`build_times`) is printed at the
end and written next to the wheel as build-times.json.

Usage: python3 scripts/build_llama.py --python VENV/bin/python --out DIR [--no-vulkan]
                                      [--no-variants] [--sdist FILE] [--work DIR]
                                      [--cmake-args FLAGS]  (one static build with FLAGS)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

LLAMA_CPP_VERSION = "0.3.36"
# Every variant name ggml defines (ggml/src/CMakeLists.txt); a name the build lacks is skipped.
CPU_VARIANTS = (
    *("x64", "sse42", "sandybridge", "ivybridge", "piledriver", "haswell", "skylakex"),
    *("cannonlake", "cascadelake", "icelake", "cooperlake", "zen4", "alderlake", "sapphirerapids"),
    *("armv8.0_1", "armv8.2_1", "armv8.2_2", "armv8.2_3", "armv8.6_1", "armv8.6_2"),
    *("armv9.2_1", "armv9.2_2"),
)
INSTALL_ANCHOR = "    llama_cpp_python_install_target(ggml-vulkan)\n"
INSTALL_MARK = "# ember: install the per-variant CPU modules"
LAYER_SETTINGS_BLOCK = re.compile(
    r"    VkBool32 enable_best_practice = layer_settings;\n.*?&layer_setting_info\);\n",
    re.DOTALL,
)
LAYER_SETTINGS_REPLACEMENT = (
    "    // ember: these Vulkan headers lack VK_EXT_layer_settings (validation best-practice\n"
    "    // settings for GGML_VULKAN_VALIDATE builds only); see scripts/build_llama.py.\n"
    "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, "
    "layers, extensions);\n"
)


def log(msg: str) -> None:
    print(f"[build_llama] {msg}", flush=True)


def cmake_flags(vulkan: bool, variants: bool) -> list[str]:
    machine = platform.machine().lower()
    flags = ["-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=ON"]
    if variants and machine in ("x86_64", "amd64", "aarch64", "arm64"):
        flags.append("-DGGML_CPU_ALL_VARIANTS=ON")
    elif machine in ("x86_64", "amd64"):
        # One CPU module only: the portable AVX2 build bootstrap.py makes today.
        flags += ["-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"]
    if vulkan:
        flags.append("-DGGML_VULKAN=ON")
    return flags


def vulkan_header() -> Path | None:
    """The vulkan_core.h CMake's FindVulkan would pick (the SDK's first, then the system's)."""
    roots = [Path(os.environ["VULKAN_SDK"]) / "include"] if "VULKAN_SDK" in os.environ else []
    roots += [Path("/usr/include"), Path("/usr/local/include")]
    for root in roots:
        header = root / "vulkan" / "vulkan_core.h"
        if header.is_file():
            return header
    return None


def headers_have_layer_settings(header: Path) -> bool:
    return "VK_EXT_layer_settings" in header.read_text(errors="replace")


def patch_install_variants(src: Path) -> bool:
    """Make llama-cpp-python install each CPU variant module next to libggml."""
    cmakelists = src / "CMakeLists.txt"
    text = cmakelists.read_text()
    if INSTALL_MARK in text:
        return False
    if INSTALL_ANCHOR not in text:
        raise SystemExit(f"{cmakelists}: no '{INSTALL_ANCHOR.strip()}' line to patch after")
    loop = (
        f"    {INSTALL_MARK}\n"
        f"    foreach(ember_variant {' '.join(CPU_VARIANTS)})\n"
        "        llama_cpp_python_install_target(ggml-cpu-${ember_variant})\n"
        "    endforeach()\n"
    )
    cmakelists.write_text(text.replace(INSTALL_ANCHOR, INSTALL_ANCHOR + loop, 1))
    return True


def patch_layer_settings(src: Path) -> bool:
    """Drop the VK_EXT_layer_settings block ggml-vulkan.cpp cannot compile without it."""
    cpp = src / "vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp"
    text = cpp.read_text()
    if "ember: these Vulkan headers lack" in text:
        return False
    new, count = LAYER_SETTINGS_BLOCK.subn(LAYER_SETTINGS_REPLACEMENT, text)
    if count != 1:
        raise SystemExit(
            f"{cpp}: the VK_EXT_layer_settings block was not found ({count} matches); "
            "update LAYER_SETTINGS_BLOCK in scripts/build_llama.py for this llama.cpp"
        )
    cpp.write_text(new)
    return True


TOKENIZER_CPP = "vendor/llama.cpp/src/llama-vocab.cpp"
TOKENIZER_MARK = "ember: std::distance/std::next from the list's head"
# (old, new, how many times old occurs) in llama_vocab::impl::tokenizer_st_partition
TOKENIZER_EDITS: tuple[tuple[str, str, int], ...] = (
    (
        "    // for each special token\n"
        "    for (const llama_token special_id : cache_special_tokens) {\n",
        "    // ember: tokenize() passes one raw fragment; a special token absent from it cannot\n"
        "    // split any part of it, so its pass over the fragments is skipped (a model has\n"
        "    // thousands of special tokens, and one pass each cost tokens x fragments)\n"
        "    std::string_view whole;\n"
        "    const bool one_fragment = !buffer.empty()\n"
        "        && std::next(buffer.begin()) == buffer.end()\n"
        "        && buffer.front().type == FRAGMENT_BUFFER_VARIANT_TYPE_RAW_TEXT;\n"
        "    if (one_fragment) {\n"
        "        const auto & first = buffer.front();\n"
        "        whole = std::string_view(first.raw_text.data() + first.offset, first.length);\n"
        "    }\n"
        "    // for each special token\n"
        "    for (const llama_token special_id : cache_special_tokens) {\n",
        1,
    ),
    (
        "stablelm, etc.)\n        }\n",
        "stablelm, etc.)\n        }\n"
        "        if (one_fragment && whole.find(text) == std::string_view::npos) {\n"
        "            continue;\n"
        "        }\n",
        1,
    ),
    (
        "        // for each text fragment\n"
        "        std::forward_list<fragment_buffer_variant>::iterator it = buffer.begin();\n",
        "        // for each text fragment; `prev` is the element before `it`, so the\n"
        f"        // fragment being split is erased in O(1) ({TOKENIZER_MARK}\n"
        "        // made this quadratic in the number of matches; see Ember's build_llama.py)\n"
        "        auto prev = buffer.before_begin();\n"
        "        std::forward_list<fragment_buffer_variant>::iterator it = buffer.begin();\n",
        1,
    ),
    (
        "                    auto source = std::distance(buffer.begin(), it);\n",
        "                    const auto source = it;          // the fragment being split\n"
        "                    const auto before_source = prev; // and the element before it\n",
        1,
    ),
    (
        "raw_text, left_reminder_offset, left_reminder_length);\n"
        "                            it++;\n",
        "raw_text, left_reminder_offset, left_reminder_length);\n"
        "                            prev = it;\n"
        "                            it++;\n",
        1,
    ),
    (
        "                    buffer.emplace_after(it, special_id);\n                    it++;\n",
        "                    buffer.emplace_after(it, special_id);\n"
        "                    prev = it;\n"
        "                    it++;\n",
        1,
    ),
    (
        "raw_text, right_reminder_offset, right_reminder_length);\n"
        "                            it++;\n",
        "raw_text, right_reminder_offset, right_reminder_length);\n"
        "                            prev = it;\n"
        "                            it++;\n",
        1,
    ),
    (
        "                        if (source == 0) {\n"
        "                            buffer.erase_after(buffer.before_begin());\n"
        "                        } else {\n"
        "                            buffer.erase_after(std::next(buffer.begin(), (source - 1)));\n"
        "                        }\n",
        "                        if (prev == source) {\n"
        "                            prev = before_source;\n"
        "                        }\n"
        "                        buffer.erase_after(before_source);\n",
        2,
    ),
    (
        "            }\n            it++;\n        }\n    }\n}\n",
        "            }\n            prev = it;\n            it++;\n        }\n    }\n}\n",
        1,
    ),
)
TOKENIZER_FUNCTION = re.compile(
    r"void llama_vocab::impl::tokenizer_st_partition\(.*?\n}\n", re.DOTALL
)


def patch_tokenizer_partition(src: Path) -> bool:
    """Make llama.cpp's split of text at special tokens linear in the number of matches."""
    cpp = src / TOKENIZER_CPP
    text = cpp.read_text()
    if TOKENIZER_MARK in text:
        return False
    match = TOKENIZER_FUNCTION.search(text)
    if match is None:
        raise SystemExit(f"{cpp}: no tokenizer_st_partition to patch")
    function = match.group(0)
    for old, new, count in TOKENIZER_EDITS:
        if function.count(old) != count:
            raise SystemExit(
                f"{cpp}: tokenizer_st_partition is not the one scripts/build_llama.py patches "
                f"({function.count(old)} of {count} expected matches of {old.strip()[:60]!r}); "
                "update TOKENIZER_EDITS for this llama.cpp"
            )
        function = function.replace(old, new)
    cpp.write_text(text[: match.start()] + function + text[match.end() :])
    return True


def fetch_sdist(python: str, dest: Path) -> Path:
    found = sorted(dest.glob(f"llama_cpp_python-{LLAMA_CPP_VERSION}.tar.gz"))
    if found:
        return found[0]
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "download",
            "--no-binary",
            ":all:",
            "--no-deps",
            "-d",
            str(dest),
            f"llama-cpp-python=={LLAMA_CPP_VERSION}",
        ],
        check=True,
    )
    return sorted(dest.glob(f"llama_cpp_python-{LLAMA_CPP_VERSION}.tar.gz"))[0]


def part_of(line: str) -> str | None:
    """Which part of the build a make/ninja progress line belongs to."""
    if "vulkan-shaders" in line or ".comp" in line or "spv" in line:
        return "vulkan shaders"
    match = re.search(r"ggml-cpu-([\w.]+)\.dir|ggml-cpu/CMakeFiles/ggml-cpu-([\w.]+)", line)
    variant = match and (match.group(1) or match.group(2))
    if variant and variant != "feats":  # ggml-cpu-feats: the CPU feature probe, not a variant
        return f"cpu variant {variant}"
    if "ggml-vulkan" in line:
        return "ggml-vulkan"
    if "ggml-cpu" in line:
        return "cpu"
    if "tools/mtmd" in line or "mtmd" in line:
        return "mtmd"
    if "/src/CMakeFiles/llama.dir" in line or "llama.dir/" in line:
        return "libllama"
    if "common/" in line:
        return "common"
    if "ggml-base" in line or "ggml.dir" in line:
        return "ggml core"
    return None


def build(src: Path, python: str, out: Path, flags: list[str], log_path: Path) -> dict[str, float]:
    env = {**os.environ, "CMAKE_ARGS": " ".join(flags)}
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    cmd = [
        python,
        "-m",
        "pip",
        "wheel",
        "--no-cache-dir",
        "--no-deps",
        "-v",
        str(src),
        "-w",
        str(out),
    ]
    log(f"CMAKE_ARGS={env['CMAKE_ARGS']!r}; log in {log_path}")
    start = time.monotonic()
    stamped: list[tuple[float, str]] = []
    with log_path.open("w") as sink:
        proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            now = time.monotonic() - start
            sink.write(f"{now:8.1f} {line}")
            stamped.append((now, line))
        code = proc.wait()
    if code:
        raise SystemExit(f"pip wheel failed ({code}); see {log_path}")
    return build_times(stamped, time.monotonic() - start)


def build_times(lines: list[tuple[float, str]], total: float) -> dict[str, float]:
    """Seconds of the build's wall-clock time each part took, from its timestamped log.

    Ninja prints a step's ``[n/N]`` line when the step ends (its output is a pipe here), so
    the time since the previous step's line goes to this step's part: with two jobs at once
    that is each part's share of the wall clock, and the shares add up to the total.
    "setup" is pip's build environment and CMake's configure (up to the first step);
    "package" is what follows the last step (install, the wheel's zip).
    """
    times: dict[str, float] = {}
    previous: float | None = None
    for now, line in lines:
        if not re.match(r"\s*\[\d+/\d+\]", line):
            continue
        if previous is None:
            times["setup"] = now
        else:
            part = part_of(line) or "other"
            times[part] = times.get(part, 0.0) + now - previous
            if part.startswith("cpu variant "):
                times["cpu variants, all"] = times.get("cpu variants, all", 0.0) + now - previous
        previous = now
    times["package"] = total - (previous or 0.0)
    times["total"] = total
    return {part: round(seconds, 1) for part, seconds in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python", default=sys.executable, help="python whose pip builds the wheel"
    )
    parser.add_argument("--out", type=Path, required=True, help="directory for the wheel")
    parser.add_argument("--work", type=Path, help="where the sdist is unpacked (default: OUT/src)")
    parser.add_argument("--sdist", type=Path, help="llama-cpp-python sdist (default: pip download)")
    parser.add_argument("--no-vulkan", dest="vulkan", action="store_false")
    parser.add_argument("--no-variants", dest="variants", action="store_false")
    parser.add_argument(
        "--cmake-args",
        help="build one static llama.cpp with these CMake flags (bootstrap.py's default build), "
        "patched like the others; --no-vulkan and --no-variants are implied",
    )
    args = parser.parse_args()
    if args.cmake_args is not None:
        args.vulkan = args.variants = False
    elif sys.platform == "darwin":
        log("macOS keeps bootstrap.py's Metal build; nothing to do here")
        return 1
    out: Path = args.out.resolve()
    work: Path = (args.work or out / "src").resolve()
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    sdist = args.sdist.resolve() if args.sdist else fetch_sdist(args.python, out)
    src = work / f"llama_cpp_python-{LLAMA_CPP_VERSION}"
    started = time.monotonic()
    if not src.is_dir():
        with tarfile.open(sdist) as tar:
            if hasattr(tarfile, "data_filter"):  # Python 3.11.4+ (and Debian's 3.11.2)
                tar.extractall(work, filter="data")
            else:  # pip's own sdist, fetched just now
                tar.extractall(work)
    if args.vulkan:
        header = vulkan_header()
        if header is None:
            raise SystemExit(
                "no Vulkan headers found: install libvulkan-dev glslc spirv-headers "
                "(Debian/Ubuntu) or the LunarG SDK, or build with --no-vulkan"
            )
        if not shutil.which("glslc"):
            raise SystemExit("glslc not found: install glslc (Debian/Ubuntu) or the LunarG SDK")
        if not headers_have_layer_settings(header):
            log(f"{header} lacks VK_EXT_layer_settings: patching ggml-vulkan.cpp")
            patch_layer_settings(src)
    if args.variants:
        patch_install_variants(src)
    patch_tokenizer_partition(src)
    prepared = round(time.monotonic() - started, 1)
    if args.cmake_args is not None:
        flags = args.cmake_args.split()
    else:
        flags = cmake_flags(args.vulkan, args.variants)
    times = {"unpack and patch": prepared, **build(src, args.python, out, flags, out / "build.log")}
    wheels = sorted(out.glob(f"llama_cpp_python-{LLAMA_CPP_VERSION}-*.whl"))
    size = wheels[-1].stat().st_size if wheels else 0
    name = wheels[-1].name if wheels else None
    record = {"flags": flags, "seconds": times, "wheel": name, "wheel_bytes": size}
    (out / "build-times.json").write_text(json.dumps(record, indent=2) + "\n")
    for part, seconds in times.items():
        log(f"{part:>24}: {seconds:7.1f} s")
    log(f"wheel: {name} ({size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
