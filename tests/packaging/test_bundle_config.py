"""The packaging decisions in packaging/bundle_config.py and icons.py, for every OS's file names
(only Linux builds here; these guard the macOS and Windows rules too)."""

from __future__ import annotations

import importlib.util
import os
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers.bundle import ROOT


def _load(name: str) -> ModuleType:
    """packaging/ is not a package (it must not shadow PyPI's ``packaging``): load by path."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "packaging" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


cfg = _load("bundle_config")
icons = _load("icons")


@pytest.mark.parametrize(
    ("dest", "kept"),
    [
        ("PySide6/Qt/plugins/platforms/libqxcb.so", True),
        ("PySide6/Qt/plugins/platforms/libqwayland.so", True),
        ("PySide6/Qt/plugins/platforms/libqoffscreen.so", True),
        ("PySide6/Qt/plugins/platforms/libqcocoa.dylib", True),
        ("PySide6\\Qt\\plugins\\platforms\\qwindows.dll", True),
        ("PySide6/Qt/plugins/platforms/libqeglfs.so", False),
        ("PySide6/Qt/plugins/platforms/libqvnc.so", False),
        ("PySide6/Qt/plugins/platformthemes/libqgtk3.so", False),
        ("PySide6/Qt/plugins/platformthemes/libqxdgdesktopportal.so", True),
        ("PySide6/Qt/plugins/imageformats/libqsvg.so", True),
        ("PySide6\\Qt\\plugins\\imageformats\\qsvg.dll", True),
        ("PySide6/Qt/plugins/imageformats/libqjpeg.so", False),
        ("PySide6/Qt/plugins/sqldrivers/libqsqlite.so", False),
        ("PySide6/Qt/plugins/styles/libqmacstyle.dylib", True),
        ("PySide6/Qt/plugins/wayland-shell-integration/libxdg-shell.so", True),
        ("PySide6/Qt/plugins/wayland-shell-integration/libivi-shell.so", False),
        ("PySide6/Qt/translations/qtbase_de.qm", False),
        ("PySide6/Qt/lib/libQt6Core.so.6", True),
        ("llama_cpp/lib/libllama.so", True),
        ("llama_cpp/lib/libggml-vulkan.so", True),
        ("llama_cpp\\lib\\ggml-vulkan.dll", True),
        ("libvulkan.so.1", False),  # the system's Vulkan loader, found with its drivers
        ("vulkan-1.dll", False),
    ],
)
def test_what_stays_in_the_bundle(dest: str, kept: bool) -> None:
    assert cfg.keep_in_bundle(dest) is kept


RUNTIME_MODULES = ["libggml-cpu-x64.so", "libggml-cpu-haswell.so", "libggml-vulkan.so"]


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (  # Linux wheel: three copies of each; the fully versioned one is never opened
            ["libllama.so", "libllama.so.0", "libllama.so.0.5.0", "libggml.so.0.25.3"],
            ["libllama.so", "libllama.so.0"],
        ),
        (
            ["libllama.dylib", "libllama.0.dylib", "libllama.0.5.0.dylib", "default.metallib"],
            ["default.metallib", "libllama.0.dylib", "libllama.dylib"],
        ),
        (["llama.dll", "ggml.dll", "llama.lib", "README.txt"], ["ggml.dll", "llama.dll"]),
        (  # the run-time back-ends build: every CPU variant and Vulkan are modules (no sonames)
            [*RUNTIME_MODULES, "libllama.so", "libllama.so.0", "libggml-base.so.0.25.3"],
            sorted([*RUNTIME_MODULES, "libllama.so", "libllama.so.0"]),
        ),
        (["llama.dll", "ggml-cpu-haswell.dll", "ggml-vulkan.dll"], None),
    ],
)
def test_llama_libraries_go_where_llama_cpp_looks(
    tmp_path: Path, files: list[str], expected: list[str] | None
) -> None:
    for name in files:
        (tmp_path / name).write_bytes(b"x")
    expected = sorted(files) if expected is None else expected
    found = cfg.llama_binaries(tmp_path)
    assert sorted(Path(src).name for src, _ in found) == expected
    assert {dest for _, dest in found} == {"llama_cpp/lib"}


def test_no_llama_library_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "libggml.so").write_bytes(b"x")
    with pytest.raises(RuntimeError, match="no llama library"):
        cfg.llama_binaries(tmp_path)


class _Wheel:
    def __init__(self, tags: str) -> None:
        self.tags = tags

    def read_text(self, name: str) -> str:
        return self.tags


def test_macos_minimum_is_the_highest_among_native_wheels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.metadata

    wheels = {
        "PySide6-Essentials": "Tag: cp310-abi3-macosx_13_0_universal2\n",
        "shiboken6": "Tag: cp310-abi3-macosx_13_0_universal2\n",
        "llama_cpp_python": "Tag: cp311-cp311-macosx_14_0_arm64\n",
        "numpy": "Tag: cp311-cp311-macosx_10_9_x86_64\nTag: cp311-cp311-macosx_11_0_arm64\n",
    }
    monkeypatch.setattr(cfg, "arch_tag", lambda: "arm64")
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: _Wheel(wheels[name]))
    assert cfg.macos_min_version() == "14.0"
    wheels["llama_cpp_python"] = "Tag: py3-none-any\n"
    assert cfg.macos_min_version() == "13.0"


def test_info_plist_and_windows_version() -> None:
    plist = cfg.info_plist()
    assert plist["CFBundleIdentifier"] == cfg.BUNDLE_ID
    assert plist["NSHighResolutionCapable"] is True
    assert plist["CFBundleShortVersionString"] == cfg.version()
    text = cfg.windows_version_info()
    numbers = [int(n) for n in cfg.version().split(".")[:3]]
    assert f"filevers={(*numbers, *[0] * (4 - len(numbers)))}" in text
    assert f"StringStruct('ProductVersion', '{cfg.version()}')" in text
    assert "StringStruct('ProductName', 'Ember')" in text


def test_ico_and_icns_hold_every_size() -> None:
    sizes = (16, 32, 64, 128, 256, 512, 1024)
    pngs = {size: b"\x89PNG" + bytes([size % 256]) * 8 for size in sizes}
    ico = icons.ico({s: pngs[s] for s in (16, 32, 256)})
    reserved, kind, count = struct.unpack_from("<HHH", ico)
    assert (reserved, kind, count) == (0, 1, 3)
    widths = [ico[6 + 16 * i] for i in range(count)]
    assert widths == [16, 32, 0]  # 0 means 256
    icns = icons.icns(pngs)
    assert icns[:4] == b"icns"
    assert struct.unpack_from(">I", icns, 4)[0] == len(icns)
    assert b"ic10" in icns and b"icp4" in icns


def test_nothing_the_app_imports_is_excluded() -> None:
    """Every app module and every hidden import loads without a module the bundle leaves out
    (an excluded sse_starlette broke `import mcp` in the bundle: MCP servers never started)."""
    code = (
        "import importlib, pkgutil, sys, app\n"
        "names = [m.name for m in pkgutil.walk_packages(app.__path__, 'app.')\n"
        "         if not m.name.endswith('__main__')]\n"
        f"names += {cfg._HIDDEN_IMPORTS!r}\n"
        "for name in names:\n"
        "    try: importlib.import_module(name)\n"
        "    except ImportError as e: print('!', name, e)\n"
        "print('\\n'.join(sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    ).stdout.split("\n")
    failed = [line for line in out if line.startswith("! ") and "win32" not in line]
    assert not failed
    excluded = set(cfg.EXCLUDES)
    loaded = {m for m in out if m and not m.startswith("! ")}
    assert sorted(m for m in loaded if m in excluded or m.split(".")[0] in excluded) == []
