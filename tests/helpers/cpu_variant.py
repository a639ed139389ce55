"""The llama.cpp CPU variant this machine's CPU runs best (from /proc/cpuinfo's flags), as ggml's
loader picks it."""

from __future__ import annotations

from pathlib import Path

# ggml's x86 CPU variants and the /proc/cpuinfo flags each needs (ggml/src/CMakeLists.txt,
# ggml_add_cpu_backend_variant: SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VBMI AVX512_VNNI
# AVX512_BF16 AMX_TILE AMX_INT8 AVX_VNNI); every one, or a CPU with more gets the wrong answer
HASWELL = {"sse4_2", "avx", "f16c", "fma", "avx2", "bmi2"}


SKYLAKEX = {*HASWELL, "avx512f"}


VARIANTS: dict[str, set[str]] = {
    "x64": set(),
    "sse42": {"sse4_2"},
    "sandybridge": {"sse4_2", "avx"},
    "ivybridge": {"sse4_2", "avx", "f16c"},
    "piledriver": {"sse4_2", "avx", "f16c", "fma"},
    "haswell": HASWELL,
    "skylakex": SKYLAKEX,
    "cannonlake": {*SKYLAKEX, "avx512vbmi"},
    "cascadelake": {*SKYLAKEX, "avx512_vnni"},
    "icelake": {*SKYLAKEX, "avx512vbmi", "avx512_vnni"},
    "cooperlake": {*SKYLAKEX, "avx512_vnni", "avx512_bf16"},
    "zen4": {*SKYLAKEX, "avx512vbmi", "avx512_vnni", "avx512_bf16"},
    "alderlake": {*HASWELL, "avx_vnni"},
    "sapphirerapids": {
        *SKYLAKEX,
        *("avx512vbmi", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8"),
    },
}


def best_variant() -> str:
    """The variant with the most features this CPU has all of (ggml scores them likewise)."""
    flags: set[str] = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    usable = [name for name, needs in VARIANTS.items() if needs <= flags]
    return max(usable, key=lambda name: len(VARIANTS[name]))
