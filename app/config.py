"""Where Ember keeps its state, and its settings registry.

``EMBER_HOME`` relocates everything (tests rely on it). Otherwise the platform's user data dir
for "Ember" is used. Settings are declared once in ``SETTINGS`` (key, type, default,
description) and written atomically.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

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
        for d in (self.home, self.models_dir, self.downloads_dir, self.logs_dir, self.cache_dir):
            d.mkdir(parents=True, exist_ok=True)
        return self


def ember_home() -> Path:
    env = os.environ.get("EMBER_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False, roaming=False))


def paths() -> Paths:
    """The current data layout (re-read each call so EMBER_HOME changes are honoured)."""
    return Paths(ember_home())


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file in the same directory + rename, so a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
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


SETTINGS: dict[str, Setting] = _settings(
    # load parameters
    Setting(
        "load.n_ctx", int, 0, "Context length in tokens (0: automatic, from the model and memory)"
    ),
    Setting("load.n_gpu_layers", int, 0, "Layers to offload to the GPU (-1: all)"),
    Setting("load.n_threads", int, 0, "CPU threads (0: one per physical core)"),
    Setting("load.n_batch", int, 512, "Prompt processing batch size"),
    Setting("load.flash_attn", bool, False, "Use flash attention"),
    Setting("load.use_mmap", bool, True, "Memory-map the model file"),
    Setting("load.use_mlock", bool, False, "Lock the model in RAM"),
    Setting("load.cache_type", str, "f16", "KV cache type (f16, q8_0, q4_0)"),
    Setting(
        "load.parallel", int, 4, "Parallel answers: how many answers are written at the same time"
    ),
    # sampling defaults for new conversations
    Setting("sampling.preset", str, "Balanced", "Sampling preset for new conversations"),
    Setting("sampling.temperature", float, 0.8, "Temperature"),
    Setting("sampling.top_p", float, 0.95, "Top-p"),
    Setting("sampling.top_k", int, 40, "Top-k"),
    Setting("sampling.min_p", float, 0.05, "Min-p"),
    Setting("sampling.repeat_penalty", float, 1.0, "Repeat penalty"),
    Setting("sampling.max_tokens", int, 0, "Maximum answer length (0: until the context is full)"),
    Setting("chat.system_prompt", str, "", "Default system prompt for new conversations"),
    # appearance and state
    Setting("ui.theme", str, "system", "Theme: system, light or dark"),
    Setting("ui.last_conversation", str, "", "The conversation open when the app was closed"),
    Setting("ui.last_model", str, "", "The model loaded when the app was closed"),
    Setting("ui.recent_models", list, [], "Model files opened in the app, newest first"),
    Setting("ui.sidebar_visible", bool, True, "Show the conversation sidebar"),
    Setting("ui.chat_settings_visible", bool, False, "Show the chat settings panel"),
    # server
    Setting("server.enabled", bool, False, "Serve the API when the app starts"),
    Setting("server.host", str, "127.0.0.1", "Address the API binds to"),
    Setting("server.port", int, 8434, "Port of the API"),
    Setting("server.api_key", str, "", "API key required by the server (empty: none on 127.0.0.1)"),
    Setting("server.cors_origins", list, [], "Origins allowed by CORS"),
    # library
    Setting("library.extra_dirs", list, [], "More folders to look for models in"),
)


class Settings:
    """Typed access to settings.json. Thread-safe; every ``set`` that changes a value is written
    atomically (setting a value it already has writes nothing: the GUI sets freely)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths().settings_file
        self._lock = threading.Lock()
        self._values: dict[str, Any] = self._read()

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            log.warning("Ignoring unreadable settings file %s: %s", self.path, e)
            return {}
        return data if isinstance(data, dict) else {}

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
            atomic_write_text(self.path, json.dumps(self._values, indent=2, sort_keys=True))

    def extra(self, key: str, default: Any = None) -> Any:
        """Unregistered keys (e.g. window geometry blobs owned by the GUI)."""
        with self._lock:
            return self._values.get(key, default)

    def set_extra(self, key: str, value: Any) -> None:
        self._store(key, value)
