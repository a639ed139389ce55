"""Ollama's model store, read in place: ``manifests/<registry>/<namespace>/<model>/<tag>``
(JSON naming content-addressed layers) and ``blobs/sha256-<hex>``. The layer of media type
``application/vnd.ollama.image.model`` is the GGUF Ember loads where it lies; ``…projector``
is its vision projector; ``…template``, ``…params`` and ``…system`` are Ollama's own prompt
template, parameters and system prompt, shown on the model's details but never used (Ember
runs the GGUF's own template).

The store belongs to another program and may hold anything, so every manifest is treated as
hostile: bounded in size, depth and count; a digest must be ``sha256:`` and 64 hex digits (no
path can be built from anything else); a manifest or blob that is a symlink out of the store,
a FIFO, a directory or unreadable is skipped with a logged reason. Nothing is ever written
here. No Qt.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from app.library.gguf_folders import Found

log = logging.getLogger(__name__)

MODEL: Final = "application/vnd.ollama.image.model"
PROJECTOR: Final = "application/vnd.ollama.image.projector"
DETAILS: Final = (
    ("application/vnd.ollama.image.template", "Ollama's template"),
    ("application/vnd.ollama.image.params", "Ollama's parameters"),
    ("application/vnd.ollama.image.system", "Ollama's system prompt"),
)
DEFAULT_REGISTRY: Final = "registry.ollama.ai"
MAX_MANIFEST_BYTES: Final = 256 * 1024  # real manifests are under 2 KB
MAX_DETAIL_BYTES: Final = 64 * 1024  # a template or parameters blob shown on the details
MAX_MANIFESTS: Final = 10_000
MAX_LAYERS: Final = 64
_DIGEST_RE: Final = re.compile(r"^sha256:([0-9a-f]{64})$")
_PART_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def find_ollama(root: Path) -> Iterator[Found]:
    """Every model in the Ollama store at ``root`` (nothing if it is not one)."""
    try:
        store = root.resolve(strict=True)
    except (OSError, RuntimeError):
        return
    manifests = store / "manifests"
    count = 0
    for path, rel in _manifest_files(manifests):
        count += 1
        if count > MAX_MANIFESTS:
            log.warning("Ollama store %s: more than %d manifests; the rest skipped", root, count)
            return
        try:
            found = _read_model(store, path, rel)
        except _SkipError as e:
            log.info("Ollama store: skipped %s: %s", path, e)
            continue
        if found is not None:
            yield found


def projector_for_blob(blob: Path) -> Path | None:
    """The vision projector Ollama's manifests pair with the model blob ``blob`` (for a
    load that names only the file: ``ember run``, the app), or None."""
    if blob.parent.name != "blobs" or not blob.name.startswith("sha256-"):
        return None
    try:
        real = blob.resolve()
    except (OSError, RuntimeError):
        return None
    for found in find_ollama(blob.parent.parent):
        if found.projectors and found.parts[0].resolve() == real:
            return found.projectors[0]
    return None


class _SkipError(Exception):
    """A manifest Ember will not use; the message says why."""


def _manifest_files(manifests: Path) -> Iterator[tuple[Path, tuple[str, ...]]]:
    """(file, (registry, namespace, model, tag)) for each manifest, four levels deep exactly;
    symlinked folders are not followed (``os.walk`` default)."""
    for folder, dirs, files in os.walk(manifests, onerror=lambda e: log.debug("scan: %s", e)):
        rel = Path(folder).relative_to(manifests).parts
        if len(rel) >= 3:
            dirs[:] = []  # tags are files at the fourth level; nothing deeper is a manifest
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if len(rel) != 3:
            continue
        for name in sorted(files):
            if not name.startswith("."):
                yield Path(folder) / name, (*rel, name)


def model_name(rel: tuple[str, ...]) -> str:
    """Ollama's name for a manifest: ``gemma3:270m``, ``user/model:tag``, or with its
    registry (``hf.co/owner/repo:Q4_K_M``) when it is not Ollama's own."""
    registry, namespace, model, tag = rel
    if registry == DEFAULT_REGISTRY:
        return f"{model}:{tag}" if namespace == "library" else f"{namespace}/{model}:{tag}"
    return f"{registry}/{namespace}/{model}:{tag}"


def _read_model(store: Path, path: Path, rel: tuple[str, ...]) -> Found | None:
    if not all(_PART_RE.match(part) for part in rel):
        raise _SkipError("not a name Ollama writes")
    _regular_inside(store, path, "manifest")
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_MANIFEST_BYTES + 1)
    except OSError as e:
        raise _SkipError(f"unreadable ({e.strerror or e})") from None
    if len(raw) > MAX_MANIFEST_BYTES:
        raise _SkipError(f"larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise _SkipError(f"not JSON ({type(e).__name__})") from None
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, list) or len(layers) > MAX_LAYERS:
        raise _SkipError("no list of layers")
    by_type: dict[str, Path] = {}
    for layer in layers:
        if not isinstance(layer, dict):
            continue
        media, digest = layer.get("mediaType"), layer.get("digest")
        if not isinstance(media, str) or not isinstance(digest, str):
            continue
        if media not in by_type:
            by_type[media] = _blob(store, digest)
    if MODEL not in by_type:
        return None  # not a GGUF model (an adapter, a safetensors import)
    model = by_type[MODEL]
    _regular_inside(store, model, "model blob")
    projectors = []
    if PROJECTOR in by_type:
        try:
            _regular_inside(store, by_type[PROJECTOR], "projector blob")
            projectors.append(by_type[PROJECTOR])
        except _SkipError as e:
            log.info("Ollama store: %s without its projector: %s", path, e)
    name = model_name(rel)
    details = tuple(
        (title, text)
        for media, title in DETAILS
        if media in by_type and (text := _detail(store, by_type[media]))
    )
    return Found("ollama", store, [model], projectors, None, name, None, name, details)


def _blob(store: Path, digest: str) -> Path:
    match = _DIGEST_RE.match(digest)
    if match is None:
        raise _SkipError(f"a layer's digest is not sha256:<64 hex digits> ({digest[:80]!r})")
    return store / "blobs" / f"sha256-{match.group(1)}"


def _regular_inside(store: Path, path: Path, what: str) -> None:
    """Raise _SkipError unless ``path`` is a regular file whose real path is inside ``store``
    (checked before anything opens it: opening a FIFO would block the scan)."""
    try:
        real = path.resolve(strict=True)
        mode = os.stat(real).st_mode
    except (OSError, RuntimeError) as e:
        raise _SkipError(f"{what} missing or unreadable ({e})") from None
    if not real.is_relative_to(store):
        raise _SkipError(f"{what} is a link out of the store ({real})")
    if not stat.S_ISREG(mode):
        raise _SkipError(f"{what} is not a regular file")


def _detail(store: Path, blob: Path) -> str:
    """A template/parameters/system blob as text (bounded; '' when unusable)."""
    try:
        _regular_inside(store, blob, "detail blob")
        with blob.open("rb") as f:
            raw = f.read(MAX_DETAIL_BYTES)
    except (_SkipError, OSError):
        return ""
    text = raw.decode("utf-8", "replace")
    if blob.stat().st_size > MAX_DETAIL_BYTES:
        text += "\n…"
    return _params_text(text)


def _params_text(text: str) -> str:
    """Ollama's parameters blob is JSON ({"stop": [...], "temperature": 0.7}); one
    ``name value`` line each reads better. Other text is kept as it is."""
    try:
        data: Any = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if not isinstance(data, dict):
        return text
    return "\n".join(f"{k} {json.dumps(v)[:200]}" for k, v in list(data.items())[:64])
