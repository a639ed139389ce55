"""Other apps' model stores that Ember lists in place (read, never written): where each
app keeps its models on this OS and how its folder is laid out.

- **Hugging Face cache** (``HF_HUB_CACHE`` / ``HF_HOME``) and **LM Studio**
  (``~/.lmstudio/models``, older ``~/.cache/lm-studio/models``): read by the library itself.
- **Ollama**: ``OLLAMA_MODELS``, else ``~/.ollama/models`` (macOS, Windows, a Linux user's
  install) and ``/usr/share/ollama/.ollama/models`` (the Linux service). See
  :mod:`app.library.ollama_store`.
- **llama.cpp**'s download cache: ``LLAMA_CACHE``, else ``$XDG_CACHE_HOME/llama.cpp`` or
  ``~/.cache/llama.cpp`` (Linux), ``~/Library/Caches/llama.cpp`` (macOS),
  ``%LOCALAPPDATA%\\llama.cpp`` (Windows); files at the top (``owner_repo_file.gguf``) or in
  a Hugging Face cache layout (``models--owner--repo``).
- **Jan**'s data folder: ``$XDG_DATA_HOME/Jan/data`` or ``~/.local/share/Jan/data`` (Linux),
  ``~/Library/Application Support/Jan/data`` (macOS), ``%APPDATA%\\Jan\\data`` (Windows), and
  the older ``~/jan``; models in ``llamacpp/models/<id>/model.gguf`` (older:
  ``models/<id>/*.gguf``), named by ``<id>``.
- **GPT4All**: ``$XDG_DATA_HOME/nomic.ai/GPT4All`` or ``~/.local/share/nomic.ai/GPT4All``
  (Linux), ``~/Library/Application Support/nomic.ai/GPT4All`` (macOS),
  ``%LOCALAPPDATA%\\nomic.ai\\GPT4All`` (Windows); ``.gguf`` files at the top.

Each of the last four is a :class:`Store` with a switch in Settings → Models
(``library.sources``; on by default when its folder exists). No Qt.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from huggingface_hub import constants as hf_constants

from app.library.gguf_folders import Found, find_hf_cache, find_plain, group_folder
from app.library.local_model import Source
from app.library.ollama_store import find_ollama

SOURCES_SETTING: Final = "library.sources"


def default_hf_cache_dir() -> Path:
    """huggingface_hub's cache, honouring HF_HUB_CACHE / HF_HOME as they are now."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path(hf_constants.HF_HUB_CACHE)


def default_lmstudio_dirs() -> tuple[Path, ...]:
    home = Path.home()
    return (home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models")


@dataclass(frozen=True, slots=True)
class Store:
    """One app's model store: ``key`` (its :data:`Source`), a ``title`` for people, the
    folders it may be in on this machine (``roots``, in order) and how to read one."""

    key: Source
    title: str
    roots: tuple[Path, ...]
    reader: Callable[[Path], Iterator[Found]]

    def found(self) -> tuple[Path, ...]:
        """The roots that exist (one ``stat`` each)."""
        return tuple(root for root in self.roots if root.is_dir())

    def find(self) -> Iterator[Found]:
        """Every model in every root that exists; the same root listed twice is read once."""
        seen: set[Path] = set()
        for root in self.found():
            real = root.resolve()
            if real not in seen:
                seen.add(real)
                yield from self.reader(root)


def known_stores(
    env: Mapping[str, str] | None = None, home: Path | None = None, platform: str | None = None
) -> tuple[Store, ...]:
    """Ollama's, llama.cpp's, Jan's and GPT4All's stores where they would be on this
    machine (``env``, ``home`` and ``platform`` default to this process's)."""
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    platform = sys.platform if platform is None else platform
    mac, windows = platform == "darwin", platform.startswith("win")

    def var(name: str, fallback: Path) -> Path:
        return Path(env[name]).expanduser() if env.get(name) else fallback

    support = home / "Library" / "Application Support"
    local_appdata = var("LOCALAPPDATA", home / "AppData" / "Local")
    data_home = var("XDG_DATA_HOME", home / ".local" / "share")

    if env.get("OLLAMA_MODELS"):
        ollama: tuple[Path, ...] = (Path(env["OLLAMA_MODELS"]).expanduser(),)
    elif mac or windows:
        ollama = (home / ".ollama" / "models",)
    else:
        ollama = (home / ".ollama" / "models", Path("/usr/share/ollama/.ollama/models"))

    if env.get("LLAMA_CACHE"):
        llama: Path = Path(env["LLAMA_CACHE"]).expanduser()
    elif mac:
        llama = home / "Library" / "Caches" / "llama.cpp"
    elif windows:
        llama = local_appdata / "llama.cpp"
    else:
        llama = var("XDG_CACHE_HOME", home / ".cache") / "llama.cpp"

    if mac:
        jan, gpt4all = support / "Jan" / "data", support / "nomic.ai" / "GPT4All"
    elif windows:
        jan = var("APPDATA", home / "AppData" / "Roaming") / "Jan" / "data"
        gpt4all = local_appdata / "nomic.ai" / "GPT4All"
    else:
        jan, gpt4all = data_home / "Jan" / "data", data_home / "nomic.ai" / "GPT4All"

    return (
        Store("ollama", "Ollama", ollama, find_ollama),
        Store("llama.cpp", "llama.cpp", (llama,), find_llama_cache),
        Store("jan", "Jan", (jan, home / "jan"), find_jan),
        Store("gpt4all", "GPT4All", (gpt4all,), find_gpt4all),
    )


def enabled(store: Store, switches: Mapping[str, object]) -> bool:
    """Whether the library reads ``store``: its switch in Settings → Models, or (never
    switched) whether its folder exists."""
    switch = switches.get(store.key)
    return switch if isinstance(switch, bool) else bool(store.found())


def find_llama_cache(root: Path) -> Iterator[Found]:
    """llama.cpp's cache: ``-hf`` downloads as top-level files, or a Hub cache layout."""
    yield from find_hf_cache(root, "llama.cpp")
    yield from _top_level(root, "llama.cpp")


def find_gpt4all(root: Path) -> Iterator[Found]:
    """GPT4All keeps its models as files at the top of its folder."""
    yield from _top_level(root, "gpt4all")


def find_jan(data: Path) -> Iterator[Found]:
    """Jan: ``llamacpp/models/<id>/model.gguf`` (older ``models/<id>/*.gguf``), named by
    ``<id>`` when the file is Jan's generic ``model.gguf``."""
    for models in (data / "llamacpp" / "models", data / "models"):
        for found in find_plain(models, "jan"):
            first = found.parts[0]
            if first.stem.lower() == "model" and first.parent != models:
                found.name = first.parent.name
            yield found


def _top_level(root: Path, source: Source) -> Iterator[Found]:
    try:
        names = sorted(
            entry.name
            for entry in os.scandir(root)
            if entry.name.lower().endswith(".gguf") and not entry.name.startswith(".")
        )
    except OSError:
        return
    for parts, projectors, error in group_folder(root, names):
        yield Found(source, root, parts, projectors, None, parts[0].name, error)
