"""Where Ember keeps its state, and its settings registry.

``EMBER_HOME`` relocates everything (tests rely on it). Otherwise the platform's user data dir
for "Ember" is used. Its folders and files hold private text (chats, prompts in the request
log, API keys), so they are readable by this user only: on POSIX, folders 0700 and files 0600
(:func:`private_dir`, :func:`private_file`, :func:`private_opener`, :func:`atomic_write_text`).

Settings are declared once in ``SETTINGS`` (key, type, default, description) and written
atomically. ``settings.json`` carries a ``"version"``; ``MIGRATIONS`` upgrade older files.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from app.engine.types import DEFAULT_CACHE_RAM_MB, LoadParams, SamplingParams

log = logging.getLogger(__name__)

APP_NAME = "Ember"


@dataclass(frozen=True, slots=True)
class Paths:
    home: Path

    @property
    def settings_file(self) -> Path:
        return self.home / "settings.json"

    @property
    def chats_db(self) -> Path:
        return self.home / "chats.db"

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    @property
    def downloads_dir(self) -> Path:
        return self.home / "downloads"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def cache_dir(self) -> Path:
        return self.home / "cache"

    def ensure(self) -> Paths:
        """Create the folders, readable by this user only (and make older ones so)."""
        for d in (self.home, self.models_dir, self.downloads_dir, self.logs_dir, self.cache_dir):
            private_dir(d)
        private_file(self.settings_file)
        return self


def ember_home() -> Path:
    env = os.environ.get("EMBER_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False, roaming=False))


def paths() -> Paths:
    """The current data layout (re-read each call so EMBER_HOME changes are honoured)."""
    return Paths(ember_home())


PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
_POSIX = os.name == "posix"


def make_private_dirs(path: Path) -> Path:
    """Create ``path`` and its missing parents, each readable by this user only; folders that
    exist already are left as they are (use :func:`private_dir` for Ember's own folders)."""
    missing: list[Path] = []
    current = path
    while not current.exists() and current.parent != current:
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another thread or process was first
            folder.mkdir(mode=PRIVATE_DIR_MODE)
    if not path.is_dir():
        raise NotADirectoryError(f"{path} is not a folder")
    return path


def private_dir(path: Path) -> Path:
    """Create ``path`` (missing parents too) readable by this user only, or take group and
    other access away from it if it exists: for folders in EMBER_HOME. Returns ``path``."""
    make_private_dirs(path)
    _tighten(path)
    return path


def private_file(path: Path) -> Path:
    """Take group and other access away from ``path`` if it exists (0600 on POSIX): for files
    created before Ember made them private, or by code that cannot choose the mode."""
    _tighten(path)
    return path


def private_opener(path: str, flags: int) -> int:
    """``open(path, "a", opener=private_opener)``: a file it creates is 0600, not 0644."""
    return os.open(path, flags, PRIVATE_FILE_MODE)


def _tighten(path: Path) -> None:
    # A symlink is the user's arrangement (say, models on a shared disk): leave its target.
    if not _POSIX or path.is_symlink():
        return
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            path.chmod(mode & ~0o077)
    except FileNotFoundError:
        pass
    except OSError as e:  # not the owner, read-only file system: still usable
        log.warning("Could not make %s private: %s", path, e)


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file in the same directory + rename, so a crash never leaves half a file.

    The file is readable by this user only (mkstemp's 0600), as are folders it creates.
    """
    make_private_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True, slots=True)
class Setting:
    key: str
    type: type
    default: Any
    description: str


def _settings(*items: Setting) -> dict[str, Setting]:
    return {s.key: s for s in items}


# The engine's sampling defaults are the one home of these numbers (the API uses them too).
_SAMPLING = SamplingParams()
_LOAD = LoadParams()


SETTINGS: dict[str, Setting] = _settings(
    # load parameters
    Setting(
        "load.n_ctx", int, 0, "Context length in tokens (0: automatic, from the model and memory)"
    ),
    # Automatic since settings version 1 without a migration: settings.json holds only values
    # a person set (the dialog stores a value when it changes), so a file without the key
    # gets the new default and an explicit 0 ("CPU only" before automatic existed) stays.
    Setting(
        "load.n_gpu_layers",
        int,
        _LOAD.n_gpu_layers,
        "Layers to offload to the GPU (-2: automatic, as many as fit; -1: all; 0: none)",
    ),
    Setting(
        "load.device",
        str,
        _LOAD.device,
        "Where layers are offloaded: 'auto' (every GPU llama.cpp finds), 'cpu' (none), or one "
        "device's name as Settings → Hardware lists it ('Vulkan0')",
    ),
    Setting("load.n_threads", int, 0, "CPU threads (0: one per physical core)"),
    Setting("load.n_batch", int, _LOAD.n_batch, "Prompt processing batch size"),
    Setting("load.flash_attn", bool, _LOAD.flash_attn, "Use flash attention where supported"),
    Setting("load.use_mmap", bool, _LOAD.use_mmap, "Memory-map the model file"),
    Setting("load.use_mlock", bool, _LOAD.use_mlock, "Lock the model in RAM"),
    Setting("load.cache_type", str, _LOAD.cache_type_k, "KV cache type (f16, q8_0, q4_0)"),
    Setting(
        "load.parallel",
        int,
        _LOAD.n_parallel,
        "Parallel answers: how many answers are written at the same time",
    ),
    Setting(
        "load.cache_ram_mb",
        int,
        DEFAULT_CACHE_RAM_MB,
        "MiB of RAM that keep conversations evicted from the context, to resume them (0: off)",
    ),
    Setting(
        "load.draft_max",
        int,
        _LOAD.draft_max,
        "Speculative decoding: most tokens drafted per answer and step (0: off)",
    ),
    Setting(
        "load.draft_model",
        str,
        "",
        "Draft model for speculative decoding: empty (none), 'suggested' (a smaller model of "
        "the library with the model's tokenizer, if one is there) or a .gguf file's path",
    ),
    # sampling defaults for new conversations
    Setting("sampling.preset", str, "Balanced", "Sampling preset for new conversations"),
    Setting("sampling.temperature", float, _SAMPLING.temperature, "Temperature"),
    Setting("sampling.top_p", float, _SAMPLING.top_p, "Top-p"),
    Setting("sampling.top_k", int, _SAMPLING.top_k, "Top-k"),
    Setting("sampling.min_p", float, _SAMPLING.min_p, "Min-p"),
    Setting("sampling.repeat_penalty", float, _SAMPLING.repeat_penalty, "Repeat penalty"),
    Setting(
        "sampling.max_tokens",
        int,
        2048,
        "Maximum answer length in tokens for new chats (0: unlimited, until the context is full)",
    ),
    Setting("chat.system_prompt", str, "", "Default system prompt for new conversations"),
    # appearance and state
    Setting("ui.theme", str, "system", "Theme: system, light or dark"),
    Setting("ui.last_conversation", str, "", "The conversation open when the app was closed"),
    Setting("ui.last_model", str, "", "The model loaded when the app was closed"),
    Setting("ui.recent_models", list, [], "Model files opened in the app, newest first"),
    Setting("ui.sidebar_visible", bool, True, "Show the conversation sidebar"),
    Setting("ui.sidebar_narrow", bool, False, "Keep the sidebar shown in narrow windows too"),
    Setting("ui.chat_settings_visible", bool, False, "Show the chat settings panel"),
    # server
    Setting("server.enabled", bool, False, "Serve the API when the app starts"),
    Setting("server.host", str, "127.0.0.1", "Address the API binds to"),
    Setting("server.port", int, 8434, "Port of the API"),
    Setting("server.api_key", str, "", "API key required by the server (empty: none on 127.0.0.1)"),
    Setting("server.cors_origins", list, [], "Origins allowed by CORS"),
    Setting(
        "server.ollama_port",
        int,
        0,
        "Also listen on this port (Ollama's is 11434) for tools that cannot change it (0: off)",
    ),
    Setting(
        "server.image_urls",
        bool,
        False,
        "Fetch http(s) image URLs named in API requests (off: images only as data URLs)",
    ),
    Setting(
        "server.image_urls_local",
        bool,
        False,
        "Fetch image URLs from this computer and local networks too (off: public addresses only)",
    ),
    Setting(
        "server.model_ttl",
        float,
        3600.0,
        "Seconds a model loaded for an API request stays loaded unused before it is unloaded "
        "(0: right after its answers; negative: until Ember quits). Models you load in the app "
        "stay loaded",
    ),
    Setting(
        "server.model_aliases",
        dict,
        {},
        "Model names clients send (e.g. claude-sonnet-4-5) and the local model each one means",
    ),
    # attached files
    Setting(
        "attachments.embedding_model",
        str,
        "auto",
        "What long attached files are searched with besides words: 'auto' (an embedding GGUF "
        "from the library, else nothing), 'loaded' (the chat model's embeddings), 'off', or "
        "the path of an embedding GGUF",
    ),
    # library
    Setting("library.extra_dirs", list, [], "More folders to look for models in"),
    Setting(
        "library.sources",
        dict,
        {},
        "Other apps' model stores to list in place, by name (ollama, llama.cpp, jan, gpt4all): "
        "true or false (unset: on when the store's folder exists)",
    ),
    # tools (MCP servers)
    Setting("tools.timeout", float, 60.0, "Seconds a tool call may take before it is cancelled"),
    Setting("tools.max_rounds", int, 8, "Rounds of tool calls in one answer before it must end"),
)


# -- versions of settings.json ------------------------------------------------------------------
#
# To rename a setting (or change what a value means), append a migration; never edit one that
# has shipped. A file without "version" is version 0. Each migration takes the file's values
# (every key but "version") and changes them in place.

VERSION_KEY = "version"

Migration = Callable[[dict[str, Any]], None]


def renamed(old: str, new: str) -> Migration:
    """A migration for a setting now called ``new``: the user's value moves to the new name
    (a value already stored under the new name wins)."""

    def rename(values: dict[str, Any]) -> None:
        if old in values:
            value = values.pop(old)
            values.setdefault(new, value)

    rename.__name__ = f"rename {old} -> {new}"
    return rename


def _version_1(values: dict[str, Any]) -> None:
    """The file says which version of the settings wrote it; no value changes."""


MIGRATIONS: list[Migration] = [_version_1]


def settings_version() -> int:
    """The version of settings.json this Ember writes."""
    return len(MIGRATIONS)


def migrate_settings(values: dict[str, Any], version: int) -> tuple[dict[str, Any], int]:
    """``values`` (from a file at ``version``) upgraded as far as the migrations go, and the
    version reached. A migration that fails stops the upgrade at the version before it (the
    values stay usable; it is logged)."""
    for index in range(version, settings_version()):
        migration = MIGRATIONS[index]
        upgraded = copy.deepcopy(values)  # a failed step must leave nothing half-done
        try:
            migration(upgraded)
        except Exception:
            log.exception("Settings migration %d (%s) failed", index + 1, migration.__name__)
            return values, index
        values, version = upgraded, index + 1
    return values, version


class Settings:
    """Typed access to settings.json. Thread-safe; every ``set`` that changes a value is written
    atomically (setting a value it already has writes nothing: the GUI sets freely).

    An older file is upgraded by ``MIGRATIONS`` and written back at once. A file from a newer
    Ember is read as it is: its version and the keys this Ember does not know are kept.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths().settings_file
        self._lock = threading.Lock()
        self.version = settings_version()
        self._values: dict[str, Any] = self._read()

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except OSError as e:
            log.warning("Ignoring unreadable settings file %s: %s", self.path, e)
            return {}
        except ValueError as e:
            self._set_aside(f"it is not valid JSON ({e})")
            return {}
        if not isinstance(data, dict):
            self._set_aside("it is not a JSON object")
            return {}
        private_file(self.path)  # written by an Ember that did not make it private yet
        version = data.pop(VERSION_KEY, 0)
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            log.warning(
                "Settings file %s has a bad version %r; reading it as 0", self.path, version
            )
            version = 0
        known = settings_version()
        if version > known:
            log.info(
                "%s was written by a newer Ember (settings version %d; this one knows %d): "
                "settings this version does not know are kept as they are",
                self.path,
                version,
                known,
            )
            self.version = version
            return data
        values, self.version = migrate_settings(data, version)
        if self.version > version:
            try:
                self._write(values)
            except OSError as e:
                log.warning("Could not save the upgraded settings file %s: %s", self.path, e)
        return values

    def _set_aside(self, problem: str) -> None:
        """Keep a damaged file for the user (the next change would overwrite it)."""
        aside = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            self.path.replace(aside)
        except OSError as e:
            log.warning(
                "Ignoring settings file %s: %s (could not move it: %s)", self.path, problem, e
            )
            return
        log.warning("Settings file %s was unusable: %s; kept as %s", self.path, problem, aside)

    def _write(self, values: dict[str, Any]) -> None:
        document = {VERSION_KEY: self.version, **values}
        atomic_write_text(self.path, json.dumps(document, indent=2, sort_keys=True))

    def get(self, key: str) -> Any:
        spec = SETTINGS[key]
        with self._lock:
            value = self._values.get(key, spec.default)
        if spec.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, spec.type):
            log.warning("Setting %s has the wrong type (%r); using the default", key, value)
            return spec.default
        return value

    def set(self, key: str, value: Any) -> None:
        spec = SETTINGS[key]
        if spec.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, spec.type):
            raise TypeError(f"Setting {key} must be {spec.type.__name__}, not {value!r}")
        self._store(key, value)

    def _store(self, key: str, value: Any) -> None:
        with self._lock:
            if key in self._values and self._values[key] == value:
                return
            self._values[key] = value
            self._write(self._values)

    def extra(self, key: str, default: Any = None) -> Any:
        """Unregistered keys (e.g. window geometry blobs owned by the GUI)."""
        with self._lock:
            return self._values.get(key, default)

    def set_extra(self, key: str, value: Any) -> None:
        if key == VERSION_KEY:
            raise ValueError(f"{VERSION_KEY!r} is the settings file's own version, not a setting")
        self._store(key, value)
