"""Ollama-style ``name:tag`` names for the models a server can use, and aliases made by copy.

Every model gets one name, the same on every listing, so it round-trips:

- a model downloaded from the Hub is named as Ollama names Hub models,
  ``hf.co/OWNER/REPO:QUANT`` (what ``POST /api/pull`` accepts);
- any other model is ``STEM:QUANT``, or ``STEM:latest`` when its quantization is unknown.

Two models that would share a name (one repository with two files of one quantization) keep
it apart by the file's stem as the tag, and, failing that, by their id. Names are matched as
Ollama matches them: ignoring case, with ``:latest`` when no tag is given, and with
``huggingface.co/`` meaning ``hf.co/``. ``POST /api/copy`` adds an alias (kept in a small
JSON file in EMBER_HOME), which names the same model until ``DELETE /api/delete`` removes it.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.server.catalog import CatalogModel

log = logging.getLogger(__name__)

HF_PREFIX = "hf.co/"
DEFAULT_TAG = "latest"
PREFERRED_QUANT = "q4_k_m"  # Ollama's pick for an untagged hf.co name, and `ember pull`'s
MAX_NAME_CHARS = 350  # Ollama's limit for a whole name
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


def _part(text: str) -> str:
    return _UNSAFE.sub("-", text).strip("-.") or "model"


def base_name(entry: CatalogModel) -> str:
    """The name before the tag."""
    if entry.repo_id and "/" in entry.repo_id:
        owner, repo = entry.repo_id.split("/", 1)
        return f"{HF_PREFIX}{_part(owner)}/{_part(repo)}"
    stem = entry.name or Path(entry.id).name.removesuffix(".gguf")
    if entry.quant:  # "gemma-3-1b-it-Q4_K_M" + Q4_K_M -> "gemma-3-1b-it"
        stem = re.sub(rf"[-_.]?{re.escape(entry.quant)}$", "", stem, flags=re.I) or stem
    return _part(stem).lower()


def name_of(entry: CatalogModel) -> str:
    """The name a model gets when no other model wants it."""
    return f"{base_name(entry)}:{_part(entry.quant) if entry.quant else DEFAULT_TAG}"


def normalize(name: str) -> str:
    """How names compare: lower case, a tag, ``hf.co/`` for the Hub."""
    name = name.strip().lower()
    for prefix in ("https://", "http://"):
        name = name.removeprefix(prefix)
    if name.startswith("huggingface.co/"):
        name = HF_PREFIX + name.removeprefix("huggingface.co/")
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last else f"{name}:{DEFAULT_TAG}"


def assign(entries: Iterable[CatalogModel]) -> dict[str, CatalogModel]:
    """Each model's name (in the order given, so the same list gives the same names)."""
    named: dict[str, CatalogModel] = {}
    taken: set[str] = set()
    for entry in entries:
        # a model from Ollama's store keeps the name Ollama gives it ("gemma3:270m")
        own = [entry.name] if entry.owned_by == "ollama" and ":" in entry.name else []
        candidates = [*own, name_of(entry)]
        stem = Path(entry.id).name.removesuffix(".gguf")
        candidates.append(f"{base_name(entry)}:{_part(stem)}")
        candidates.append(entry.id)
        for candidate in candidates:
            if normalize(candidate) not in taken:
                break
        taken.add(normalize(candidate))
        named[candidate] = entry
    return named


def find(name: str, named: dict[str, CatalogModel]) -> CatalogModel | None:
    """The model ``name`` means among ``named`` (from :func:`assign`), or None."""
    want = normalize(name)
    by_norm = {normalize(n): e for n, e in named.items()}
    if want in by_norm:
        return by_norm[want]
    base, _, tag = want.rpartition(":")
    if tag != DEFAULT_TAG:
        return None
    # "hf.co/owner/repo" alone: the repository's Q4_K_M, else its only model
    same = [e for n, e in by_norm.items() if n.rpartition(":")[0] == base]
    preferred = [e for e in same if (e.quant or "").lower() == PREFERRED_QUANT]
    if preferred:
        return preferred[0]
    return same[0] if len(same) == 1 else None


def check_name(name: str) -> str:
    """A name a user may give (``/api/copy``'s destination); raises ValueError saying why not."""
    name = name.strip()
    if not name:
        raise ValueError("a model name is required")
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"a model name has at most {MAX_NAME_CHARS} characters")
    base, _, tag = normalize(name).rpartition(":")
    parts = base.split("/")
    if not all(parts) or any(not re.fullmatch(r"[a-z0-9_][a-z0-9_.\-]*", p) for p in parts):
        raise ValueError(
            f"{name!r} is not a model name: use letters, digits, '.', '-' and '_', parts "
            "separated by '/', and an optional ':tag'"
        )
    if not re.fullmatch(r"[a-z0-9_][a-z0-9_.\-]{0,127}", tag):
        raise ValueError(f"{name!r} has an invalid tag: use letters, digits, '.', '-' and '_'")
    return name


# ---- aliases --------------------------------------------------------------------------------


class AliasStore:
    """Alias names (``/api/copy``) -> model ids, in a JSON file written atomically.
    Thread-safe; the file is read on every call, so servers and the app share it."""

    _lock = threading.Lock()  # one for every store: each call makes its own (alias_store)

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            log.warning("Ignoring the model aliases in %s: %s", self.path, e)
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): str(v) for k, v in data.items() if isinstance(v, str)}

    def add(self, alias: str, model_id: str) -> None:
        from app.config import atomic_write_text

        with self._lock:
            aliases = {k: v for k, v in self.load().items() if normalize(k) != normalize(alias)}
            aliases[alias] = model_id
            atomic_write_text(self.path, json.dumps(aliases, indent=1, ensure_ascii=False))

    def remove(self, alias: str) -> bool:
        """Remove an alias (any case, tag or not); False if there is none."""
        from app.config import atomic_write_text

        with self._lock:
            aliases = self.load()
            kept = {k: v for k, v in aliases.items() if normalize(k) != normalize(alias)}
            if len(kept) == len(aliases):
                return False
            atomic_write_text(self.path, json.dumps(kept, indent=1, ensure_ascii=False))
            return True

    def remove_target(self, model_id: str) -> None:
        """Forget the aliases of a deleted model."""
        from app.config import atomic_write_text

        with self._lock:
            aliases = self.load()
            kept = {k: v for k, v in aliases.items() if v != model_id}
            if len(kept) != len(aliases):
                atomic_write_text(self.path, json.dumps(kept, indent=1, ensure_ascii=False))


def alias_store() -> AliasStore:
    """The aliases of this EMBER_HOME."""
    from app.config import paths

    return AliasStore(paths().home / "model-aliases.json")


def named_models(entries: list[CatalogModel], aliases: dict[str, str]) -> dict[str, CatalogModel]:
    """Every model's name, and each alias whose model is still there (names win over aliases)."""
    named = assign(entries)
    taken = {normalize(n) for n in named}
    by_id = {e.id: e for e in entries}
    for alias, model_id in aliases.items():
        entry = by_id.get(model_id)
        if entry is not None and normalize(alias) not in taken:
            taken.add(normalize(alias))
            named[alias] = entry
    return named
