"""Other apps' model stores built by tests: an Ollama store (manifests naming content-addressed
blobs, as Ollama writes them), Jan's, GPT4All's and llama.cpp's folders; and the read-only
canary that proves Ember never writes to them."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

from tests.helpers.gguf_writer import gguf_bytes

MODEL = "application/vnd.ollama.image.model"
PROJECTOR = "application/vnd.ollama.image.projector"
TEMPLATE = "application/vnd.ollama.image.template"
PARAMS = "application/vnd.ollama.image.params"
SYSTEM = "application/vnd.ollama.image.system"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def ollama_blob(store: Path, content: bytes | Path) -> str:
    """Put ``content`` in ``store/blobs`` under its sha256 (a file is hard-linked where it
    can be, else copied: a symlink out of the store is what Ember refuses); the digest."""
    blobs = store / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    if isinstance(content, Path):
        hexdigest = sha256_file(content)
        target = blobs / f"sha256-{hexdigest}"
        if not target.exists():
            try:
                os.link(content, target)
            except OSError:
                shutil.copyfile(content, target)
    else:
        hexdigest = hashlib.sha256(content).hexdigest()
        target = blobs / f"sha256-{hexdigest}"
        if not target.exists():
            target.write_bytes(content)
    return f"sha256:{hexdigest}"


def ollama_model(
    store: Path,
    name: str,
    model: bytes | Path | None = None,
    *,
    projector: bytes | None = None,
    template: str | None = None,
    params: dict[str, object] | None = None,
    system: str | None = None,
) -> Path:
    """A model as ``ollama pull`` leaves it. ``name``: ``gemma3:270m`` (Ollama's library),
    ``user/model:tag`` or ``hf.co/owner/repo:Q4_K_M``. Returns the manifest's path."""
    path, tag = name.rsplit(":", 1)
    parts = path.split("/")
    if len(parts) == 1:
        parts = ["registry.ollama.ai", "library", *parts]
    elif len(parts) == 2:
        parts = ["registry.ollama.ai", *parts]
    layers = [(MODEL, model if model is not None else gguf_bytes(name=name))]
    for media, content in (
        (PROJECTOR, projector),
        (TEMPLATE, template.encode() if template is not None else None),
        (PARAMS, json.dumps(params).encode() if params is not None else None),
        (SYSTEM, system.encode() if system is not None else None),
    ):
        if content is not None:
            layers.append((media, content))
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json"},
        "layers": [
            {"mediaType": media, "digest": ollama_blob(store, content)} for media, content in layers
        ],
    }
    file = store.joinpath("manifests", *parts, tag)
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps(manifest))
    return file


def canary(root: Path) -> dict[str, tuple[str, int]]:
    """Every file and folder under ``root``: its content's sha256 (or kind) and mode."""
    seen: dict[str, tuple[str, int]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            st = path.lstat()
            if stat.S_ISREG(st.st_mode):
                kind = sha256_file(path)
            elif stat.S_ISLNK(st.st_mode):
                kind = f"link:{os.readlink(path)}"
            else:
                kind = "dir" if stat.S_ISDIR(st.st_mode) else "other"
            seen[path.relative_to(root).as_posix()] = (kind, stat.S_IMODE(st.st_mode))
    return seen


def make_read_only(root: Path) -> None:
    """chmod everything under ``root`` read-only (files 0444, folders 0555), deepest first."""
    for folder, dirs, files in os.walk(root, topdown=False):
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink() and path.is_file():
                path.chmod(0o444)
        for name in dirs:
            path = Path(folder) / name
            if not path.is_symlink():
                path.chmod(0o555)
    root.chmod(0o555)


def make_writable(root: Path) -> None:
    """Undo :func:`make_read_only` (so pytest can remove the temporary folder)."""
    root.chmod(0o755)
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            path = Path(folder) / name
            if not path.is_symlink():
                path.chmod(0o755)
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink() and path.is_file():
                path.chmod(0o644)
