"""The repository explains itself: docs/ARCHITECTURE.md is part of it, and nothing in it points
to design notes that live outside the repository (someone who only cloned it cannot follow
such a link)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Spelled in pieces so that this file does not mention them itself.
OUTSIDE = ("../" + "shared", "/work/" + "shared")
TEXT = {".md", ".py", ".toml", ".txt", ".json", ".xml", ".desktop", ".qss", ".spec", ".sh"}
FOLDERS = ("docs", "app", "packaging", "resources", "tests", "bench")


def _texts() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for folder in FOLDERS:
        found += (p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in TEXT)
    return [p for p in found if "__pycache__" not in p.parts]


def test_the_architecture_document_is_in_the_repository() -> None:
    doc = ROOT / "docs" / "ARCHITECTURE.md"
    assert doc.is_file()
    assert doc.read_text("utf-8").startswith("# ")
    assert "docs/ARCHITECTURE.md" in (ROOT / "README.md").read_text("utf-8")


def test_nothing_points_to_notes_outside_the_repository() -> None:
    wrong: dict[str, list[str]] = {}
    for path in _texts():
        text = path.read_text("utf-8", errors="replace")
        if found := [link for link in OUTSIDE if link in text]:
            wrong[path.relative_to(ROOT).as_posix()] = found
    assert not wrong, "say it in the repository (docs/ARCHITECTURE.md) instead"
