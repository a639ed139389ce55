"""The built binary from a terminal: ``--version`` and ``run`` with the real model."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from app import __version__
from tests.helpers.bundle import Bundle


def test_version_is_the_source_version(bundle: Bundle, tmp_path: Path) -> None:
    result = bundle.run_cli(tmp_path, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"Ember {__version__}"


def test_every_command_has_help(bundle: Bundle, tmp_path: Path) -> None:
    """The commands are imported by name (app.cli): all must be in the bundle."""
    result = bundle.run_cli(tmp_path, "--help")
    assert result.returncode == 0, result.stderr
    for command in ("run", "info", "serve", "pull", "ls", "rm", "providers", "mcp"):
        assert command in result.stdout


@pytest.mark.slow
def test_run_generates_tokens_with_the_bundled_llama_cpp(
    bundle: Bundle, gemma_path: Path, tmp_path: Path
) -> None:
    """Tokens from the test model prove the native llama.cpp libraries load in the bundle."""
    args = ("run", str(gemma_path), "The sky is", "-n", "4", "--raw", "--json")
    result = bundle.run_cli(tmp_path, *args, timeout=240)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    summary = json.loads(lines[-1])
    assert summary["usage"]["completion_tokens"] == 4
    assert "".join(lines[:-1]).strip(), "no text was printed"
    assert "Traceback" not in result.stderr


def test_bundle_holds_llama_cpp_and_only_the_qt_ember_uses(bundle: Bundle) -> None:
    files = [p for p in bundle.root.rglob("*") if p.is_file()]
    names = {p.name.lower() for p in files}
    folders = {p.parent.name for p in files}
    llama = [p for p in files if p.parent.name == "lib" and p.parent.parent.name == "llama_cpp"]
    assert any("llama" in p.name for p in llama), "llama.cpp must sit where llama_cpp looks"
    assert any("qoffscreen" in n for n in names)
    if sys.platform.startswith("linux"):
        assert {"libqxcb.so", "libqwayland.so", "libqsvg.so"} <= names
    # libQt6Quick.so.6, Qt6Quick.dll, QtQuick.framework, QtQuick.abi3.so: none of them
    unused_qt = re.compile(r"^(lib)?qt6?(webengine|quick|qml|3d|pdf|designer|charts|multimedia)")
    parts = {part.lower() for p in files for part in p.relative_to(bundle.root).parts}
    assert not sorted(filter(unused_qt.match, parts))
    assert not [n for n in names if "qgtk3" in n]
    assert not folders & {"sqldrivers", "qmltooling", "translations", "designer", "tls"}
    assert not [n for n in names if n.endswith(".pyi")], "typing stubs are not needed"
    system = re.compile(r"libvulkan\.so(\.\d+)*|vulkan-1\.dll")  # the system's, with its drivers
    assert not [n for n in names if system.fullmatch(n)]


@pytest.mark.slow
def test_the_bundled_mcp_client_lists_a_real_servers_tools(bundle: Bundle, tmp_path: Path) -> None:
    """The MCP SDK (imported lazily, transports by name) works from the bundle: `ember mcp
    test` starts mcp-server-time (from the test environment's Python) and lists its tools."""
    added = bundle.run_cli(
        tmp_path, "mcp", "add", "time", "--", sys.executable, "-m", "mcp_server_time"
    )
    assert added.returncode == 0, added.stderr
    tested = bundle.run_cli(tmp_path, "mcp", "test", "time", "--yes", timeout=120)
    assert tested.returncode == 0, tested.stderr
    assert "get_current_time" in tested.stdout
    assert "Traceback" not in tested.stderr


def test_attached_documents_are_read_by_the_bundled_converters(
    bundle: Bundle, tmp_path: Path
) -> None:
    """pypdf and the standard-library .docx and HTML readers are in the bundle: a damaged PDF
    is named as one, and good files are read (the run then stops at the missing model, which
    is looked for only after every file was read)."""
    from tests.helpers import builders

    damaged = tmp_path / "damaged.pdf"
    damaged.write_bytes(builders.pdf_bytes_garbage())
    result = bundle.run_cli(tmp_path, "run", "no-model.gguf", "--attach", str(damaged), "Hi")
    assert result.returncode == 1 and "damaged.pdf could not be read as a PDF" in result.stderr
    page = tmp_path / "page.html"
    page.write_text("<h1>Title</h1><script>x()</script><p>Text.</p>", encoding="utf-8")
    good = [
        builders.short_pdf(tmp_path / "short.pdf"),
        builders.docx_with_headings(tmp_path / "notes.docx"),
        page,
    ]
    attach = [arg for path in good for arg in ("--attach", str(path))]
    result = bundle.run_cli(tmp_path, "run", "no-model.gguf", *attach, "Hi")
    assert result.returncode != 0
    assert "no-model.gguf" in result.stderr, result.stderr  # it got past the files
    assert "Traceback" not in result.stderr
    for path in good:
        assert path.name not in result.stderr, result.stderr


def test_the_bundled_back_ends_load_from_the_unpacked_bundle(
    bundle: Bundle, tmp_path: Path
) -> None:
    """`ember info --hardware` from the bundle, in a bare environment: llama.cpp's back-ends
    come from the bundle's own llama_cpp/lib (never the build's venv), the CPU is a device,
    nothing failed to load, and the CPU code in use is a file of the bundle (a run-time
    back-ends build: the variant ggml scored best for this CPU). That every module of the
    build is collected: test_bundle_config.py."""
    result = bundle.run_cli(tmp_path, "info", "--hardware", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    lib = Path(report["library_dir"]).resolve()
    assert lib.is_relative_to(bundle.root.resolve()), lib
    assert report["errors"] == []
    assert any(d["kind"] == "cpu" for d in report["devices"])
    variant = report["cpu_variant"]
    cpu_code = f"libggml-cpu-{variant}.so" if report["dynamic"] else "libggml-cpu.so"
    if sys.platform.startswith("linux"):
        assert (lib / cpu_code).is_file(), sorted(p.name for p in lib.iterdir())
