"""The issue's "done when" for GPUs, on the bundle itself: built from the run-time back-ends
build (``EMBER_LLAMA_BUILD=runtime``), unpacked, and run in a bare environment on a machine
with a Vulkan device (Mesa's lavapipe here), it offloads the test model without any flag. The
other half, "on a CPU without AVX2 it still runs", is ``test_bundle_emulated_cpu.py``: the
bundle on QEMU's emulated Nehalem, Sandy Bridge and Ivy Bridge (it replaces a copy of the
bundle without the AVX2 variants, which could not see a stray AVX2 instruction elsewhere).

Marked ``vulkan`` (deselected by default: a bundle from the portable CPU build has no
Vulkan; CI runs them on the Linux bundle, .github/workflows/build.yml). Run with
``EMBER_BUNDLE=... GGML_VK_VISIBLE_DEVICES=0 GGML_VK_DISABLE_GRAPH_OPTIMIZE=1 pytest -m vulkan
tests/packaging``. The two variables only make lavapipe usable (llama.cpp hides CPU-type Vulkan
devices, rightly for users, and Mesa 22.3's lavapipe crashes on graph optimisation); a real GPU
needs neither.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.bundle import Bundle

pytestmark = pytest.mark.vulkan


@pytest.fixture(autouse=True)
def lavapipe() -> None:
    for name in ("GGML_VK_VISIBLE_DEVICES", "GGML_VK_DISABLE_GRAPH_OPTIMIZE"):
        if name not in os.environ:
            pytest.fail(f"set {name} (see this module's docstring)")


def test_the_bundle_lists_its_cpu_variant_and_the_vulkan_device(
    bundle: Bundle, tmp_path: Path
) -> None:
    result = bundle.run_cli(tmp_path, "info", "--hardware", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["dynamic"] and report["errors"] == []
    assert Path(report["library_dir"]).resolve().is_relative_to(bundle.root.resolve())
    assert report["cpu_variant"] not in ("", "built in")
    assert report["gpus"] == ["Vulkan0"]


@pytest.mark.slow
def test_the_bundle_offloads_every_layer_without_a_flag(
    bundle: Bundle, gemma_path: Path, tmp_path: Path
) -> None:
    args = ("-v", "run", str(gemma_path), "The sky is", "-n", "2", "--raw", "--temp", "0")
    result = bundle.run_cli(tmp_path, *args, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "offloaded 19/19 layers to GPU" in result.stderr, result.stderr[-2000:]
