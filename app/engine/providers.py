"""Providers: named remote OpenAI-compatible servers, their API keys, and remote model ids.

A provider is a name (lowercase letters, digits and dashes), a base URL, an optional preset
(vllm, sglang, tgi, ollama, lmstudio, llama-server, openai), where its API key comes from, and
extra headers. The registry lives in ``EMBER_HOME/providers.json`` (atomic writes) and is
shared by the GUI's Settings and ``ember providers``.

API keys are never written to providers.json. A key is kept in the OS keyring when a usable
backend exists, else in ``EMBER_HOME/secrets.json`` (mode 0600), or read at use from an
environment variable (``--api-key-env VAR`` stores only the variable's name).

Remote model ids
----------------
A remote model is named ``<provider>::<model>``, e.g. ``gpu-box::meta-llama/Llama-3.1-8B`` or
``ollama::llama3.2:3b``. The provider part is a provider name; the model part is whatever the
server calls the model (split at the first ``::``). This cannot be taken for a Hub repository
id (``owner/repo`` never contains a colon) nor for a Windows path (``C:\\…`` has one colon); a
local file whose name contains ``::`` is given with a directory part (``./a::b.gguf``), which
is not a provider name. Everywhere a model id is accepted (the model picker, conversations,
Ember's API, ``ember run``), a string that parses as a remote id routes to :class:`RemoteRouter`.
The ids and the presets are in :mod:`app.engine.provider_ids` (re-exported here).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from app.config import atomic_write_text, paths
from app.engine.provider_ids import (
    PRESETS,
    format_remote_id,
    parse_remote_id,
    validate_provider_name,
)
from app.engine.remote import RemoteEngine
from app.engine.remote_wire import normalize_base_url
from app.engine.types import BadRequestError, ChatRequest, CompletionRequest, EngineError, Request
from app.engine.worker import Job, Sink

__all__ = [
    "KEYRING_SERVICE",
    "FileSecrets",
    "KeyringSecrets",
    "Provider",
    "ProviderError",
    "ProviderKeyError",
    "ProviderNotFoundError",
    "ProviderRegistry",
    "RemoteRouter",
    "SecretStore",
    "engine_for",
    "keyring_usable",
    "make_provider",
]

log = logging.getLogger(__name__)

KEYRING_SERVICE = "Ember"
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ProviderError(EngineError):
    code = "provider_error"


class ProviderNotFoundError(ProviderError):
    code = "provider_not_found"


class ProviderKeyError(ProviderError):
    """The provider's API key cannot be read (unset variable, keyring gone)."""

    code = "provider_key"


# ---- providers --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Provider:
    """A remote server. ``key_ref`` says where its API key is: None (no key), ``"keyring"``,
    ``"file"`` (secrets.json) or ``"env:VAR"``."""

    name: str
    base_url: str
    preset: str | None = None
    key_ref: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_provider_name(self.name)
        object.__setattr__(self, "base_url", normalize_base_url(self.base_url))
        if self.preset is not None and self.preset not in PRESETS:
            raise ValueError(f"Unknown preset {self.preset!r}; choose from {', '.join(PRESETS)}.")
        ref = self.key_ref
        if ref not in (None, "keyring", "file") and not (
            ref.startswith("env:") and _ENV_RE.match(ref[4:])
        ):
            raise ValueError(f"Bad API key reference {ref!r}.")

    @property
    def key_source(self) -> str:
        """For people: ``none``, ``keyring``, ``file`` or ``env:VAR``."""
        return self.key_ref or "none"

    @property
    def api_key_env(self) -> str | None:
        return self.key_ref[4:] if self.key_ref and self.key_ref.startswith("env:") else None

    @property
    def llama_extras(self) -> bool:
        return PRESETS[self.preset].llama_extras if self.preset else True

    def to_json(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "preset": self.preset,
            "key_ref": self.key_ref,
            "headers": dict(self.headers),
        }

    @classmethod
    def from_json(cls, name: str, data: dict[str, Any]) -> Provider:
        return cls(
            name=name,
            base_url=str(data["base_url"]),
            preset=data.get("preset"),
            key_ref=data.get("key_ref"),
            headers={str(k): str(v) for k, v in (data.get("headers") or {}).items()},
        )


def make_provider(
    name: str,
    base_url: str | None = None,
    preset: str | None = None,
    *,
    api_key_env: str | None = None,
    headers: dict[str, str] | None = None,
) -> Provider:
    """A provider from what a person typed: the preset's URL when ``base_url`` is left out."""
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"Unknown preset {preset!r}; choose from {', '.join(PRESETS)}.")
    if base_url is None:
        if preset is None:
            raise ValueError("Give a base URL or a preset (its usual URL is used).")
        base_url = PRESETS[preset].base_url
    if api_key_env is not None and not _ENV_RE.match(api_key_env):
        raise ValueError(f"{api_key_env!r} is not an environment variable name.")
    key_ref = f"env:{api_key_env}" if api_key_env else None
    return Provider(name, base_url, preset, key_ref, dict(headers or {}))


# ---- secrets ----------------------------------------------------------------------------------


class SecretStore(Protocol):
    kind: str  # "keyring" or "file": what Provider.key_ref records

    def get(self, name: str) -> str | None: ...
    def set(self, name: str, value: str) -> None: ...
    def delete(self, name: str) -> None: ...


def keyring_usable() -> bool:
    """True when the keyring package is installed and has a real backend (not fail/null)."""
    try:
        import keyring
        from keyring.backends import fail
    except ImportError:
        return False
    try:
        backend = keyring.get_keyring()
        if isinstance(backend, fail.Keyring):
            return False
        return float(backend.priority) > 0  # the null backend has a negative priority
    except Exception:  # a broken backend (no D-Bus, say) is as good as none
        log.debug("The keyring backend is unusable", exc_info=True)
        return False


def default_secret_store(folder: Path) -> SecretStore:
    """The OS keyring when one works, else a 0600 ``secrets.json`` in ``folder``: where
    provider API keys and MCP servers' secrets are kept."""
    return KeyringSecrets() if keyring_usable() else FileSecrets(folder / "secrets.json")


class KeyringSecrets:
    """API keys in the OS keyring (service "Ember", user ``provider:<name>``)."""

    kind = "keyring"

    def get(self, name: str) -> str | None:
        import keyring

        value: str | None = keyring.get_password(KEYRING_SERVICE, _user(name))
        return value

    def set(self, name: str, value: str) -> None:
        import keyring

        keyring.set_password(KEYRING_SERVICE, _user(name), value)

    def delete(self, name: str) -> None:
        import keyring
        from keyring.errors import PasswordDeleteError

        with contextlib.suppress(PasswordDeleteError):  # nothing stored: fine
            keyring.delete_password(KEYRING_SERVICE, _user(name))


def _user(name: str) -> str:
    return f"provider:{name}"


class FileSecrets:
    """API keys in ``EMBER_HOME/secrets.json``, readable only by the user (mode 0600).
    The fallback when no OS keyring is available."""

    kind = "file"

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths().home / "secrets.json"
        self._lock = threading.Lock()

    def _read(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise ProviderKeyError(f"Cannot read the API keys in {self.path}: {e}") from e
        keys = data.get("providers") if isinstance(data, dict) else None
        return {str(k): str(v) for k, v in keys.items()} if isinstance(keys, dict) else {}

    def _write(self, keys: dict[str, str]) -> None:
        text = json.dumps({"version": 1, "providers": keys}, indent=2, sort_keys=True)
        atomic_write_text(self.path, text)  # mkstemp creates the file with mode 0600
        os.chmod(self.path, 0o600)

    def get(self, name: str) -> str | None:
        with self._lock:
            return self._read().get(name)

    def set(self, name: str, value: str) -> None:
        with self._lock:
            keys = self._read()
            keys[name] = value
            self._write(keys)

    def delete(self, name: str) -> None:
        with self._lock:
            keys = self._read()
            if keys.pop(name, None) is not None:
                self._write(keys)


# ---- the registry ----------------------------------------------------------------------------


_UNSET: Any = object()


class ProviderRegistry:
    """The providers in ``providers.json``: add, update, remove, list, get, and their keys.

    What was read is kept: the file is read again only when it changed (a ``stat`` per call
    tells), so the GUI and ``ember providers`` in another process see each other's changes
    without a read and a parse per request; every change is written atomically. Stored keys
    (keyring, secrets.json) are kept too, as reading the keyring can be slow (D-Bus): they are
    forgotten on every add, update or remove here and whenever providers.json changes (another
    process changes a key only through it). Keys in environment variables are read at each use.
    Thread-safe.
    """

    def __init__(self, path: Path | None = None, secrets: SecretStore | None = None) -> None:
        self.path = path or paths().home / "providers.json"
        self._secrets = secrets
        self._lock = threading.RLock()
        self._stamp: object = None  # which version of providers.json was read (_file_stamp)
        self._providers: dict[str, Provider] | None = None  # None: read the file next time
        self._keys: dict[str, tuple[str, str]] = {}  # name -> (key_ref, key); never logged
        self._generation = 0  # bumped whenever the above are forgotten

    @property
    def secrets(self) -> SecretStore:
        """Where API keys are kept: the OS keyring when one works, else a 0600 file. Decided on
        first use (asking the keyring takes a moment: the app does not wait for it at start)."""
        with self._lock:
            if self._secrets is None:
                self._secrets = default_secret_store(self.path.parent)
            return self._secrets

    # -- reading ----------------------------------------------------------------------------

    def _file_stamp(self) -> object:
        """What tells one version of providers.json from another: its inode (an atomic write
        makes a new one), size and times; None when there is no file."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        except OSError:
            return object()  # equal to nothing: read (and report) the file
        return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def _forget(self) -> None:
        """Drop the providers and keys read so far (the caller holds the lock)."""
        self._providers = None
        self._keys.clear()
        self._generation += 1

    def _refresh(self) -> None:
        """Forget what was read if providers.json changed since (another process, say)."""
        stamp = self._file_stamp()
        if stamp != self._stamp:
            self._stamp = stamp
            self._forget()

    def _load(self) -> dict[str, Provider]:
        """The providers, read again only when providers.json changed. A copy: callers edit it."""
        with self._lock:
            self._refresh()
            if self._providers is None:
                self._providers = self._read()
            return dict(self._providers)

    def _read(self) -> dict[str, Provider]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise ProviderError(f"{self.path} is unreadable ({e}); fix or delete it.") from e
        entries = data.get("providers") if isinstance(data, dict) else None
        providers: dict[str, Provider] = {}
        for name, entry in (entries or {}).items():
            try:
                providers[name] = Provider.from_json(name, entry)
            except (KeyError, TypeError, ValueError) as e:
                log.warning("Skipping provider %r in %s: %s", name, self.path, e)
        return providers

    def _save(self, providers: dict[str, Provider]) -> None:
        data = {"version": 1, "providers": {n: p.to_json() for n, p in sorted(providers.items())}}
        try:
            atomic_write_text(self.path, json.dumps(data, indent=2))
        finally:
            self._forget()

    def list(self) -> list[Provider]:
        with self._lock:
            return sorted(self._load().values(), key=lambda p: p.name)

    def find(self, name: str) -> Provider | None:
        with self._lock:
            return self._load().get(name)

    def get(self, name: str) -> Provider:
        provider = self.find(name)
        if provider is None:
            known = ", ".join(p.name for p in self.list()) or "none yet"
            raise ProviderNotFoundError(
                f"No provider called {name!r} (known: {known}). "
                "Add one with `ember providers add NAME BASE_URL`."
            )
        return provider

    # -- changing ----------------------------------------------------------------------------

    def add(
        self, provider: Provider, api_key: str | None = None, *, replace: bool = False
    ) -> Provider:
        """Save ``provider``; ``api_key`` goes to the secret store (and ``key_ref`` says which).
        Raises ProviderError if the name is taken, unless ``replace``."""
        if api_key and provider.api_key_env:
            raise ValueError("Give either an API key or the variable that holds it, not both.")
        with self._lock:
            providers = self._load()
            old = providers.get(provider.name)
            if old is not None and not replace:
                raise ProviderError(
                    f"A provider called {provider.name!r} exists already; remove it first "
                    "or replace it."
                )
            if api_key:
                self.secrets.set(provider.name, api_key)
                provider = dataclasses.replace(provider, key_ref=self.secrets.kind)
            providers[provider.name] = provider
            self._save(providers)
            if old is not None and old.key_ref != provider.key_ref:
                self._forget_key(old)
            return provider

    def update(
        self,
        name: str,
        *,
        base_url: str = _UNSET,
        preset: str | None = _UNSET,
        headers: dict[str, str] = _UNSET,
        api_key: str | None = _UNSET,
        api_key_env: str | None = _UNSET,
    ) -> Provider:
        """Edit a provider in place; left-out fields keep their values. ``api_key=None`` (or
        ``api_key_env=None``) removes the key."""
        with self._lock:
            old = self.get(name)
            changes: dict[str, Any] = {}
            if base_url is not _UNSET:
                changes["base_url"] = base_url
            if preset is not _UNSET:
                changes["preset"] = preset
            if headers is not _UNSET:
                changes["headers"] = dict(headers)
            if api_key is not _UNSET:
                changes["key_ref"] = None  # add() stores a new key and sets it
            if api_key_env is not _UNSET:
                if api_key_env is not None and not _ENV_RE.match(api_key_env):
                    raise ValueError(f"{api_key_env!r} is not an environment variable name.")
                changes["key_ref"] = f"env:{api_key_env}" if api_key_env else None
            new = dataclasses.replace(old, **changes)
            return self.add(new, api_key if api_key is not _UNSET else None, replace=True)

    def remove(self, name: str) -> Provider:
        with self._lock:
            provider = self.get(name)
            providers = self._load()
            providers.pop(name, None)
            self._save(providers)
            self._forget_key(provider)
            return provider

    def _store(self, kind: str) -> SecretStore:
        if kind == self.secrets.kind:
            return self.secrets
        if kind == "keyring":
            return KeyringSecrets()
        return FileSecrets(self.path.parent / "secrets.json")

    def _forget_key(self, provider: Provider) -> None:
        if provider.key_ref not in ("keyring", "file"):
            return
        try:
            self._store(provider.key_ref).delete(provider.name)
        except Exception as e:  # the entry is gone either way; a stale secret is harmless
            log.warning("Could not delete the stored key of %s: %s", provider.name, e)

    # -- using ---------------------------------------------------------------------------------

    def api_key(self, provider: Provider) -> str | None:
        """The provider's key: an environment variable is read at each use, a stored key once
        (until providers change, here or in providers.json)."""
        ref = provider.key_ref
        if ref is None:
            return None
        if provider.api_key_env:
            value = os.environ.get(provider.api_key_env)
            if not value:
                raise ProviderKeyError(
                    f"Provider {provider.name} reads its API key from ${provider.api_key_env}, "
                    "which is not set."
                )
            return value
        with self._lock:
            self._refresh()
            cached = self._keys.get(provider.name)
            if cached is not None and cached[0] == ref:
                return cached[1]
            generation = self._generation
        value = self._read_key(provider, ref)  # not under the lock: the keyring may be slow
        with self._lock:
            if self._generation == generation:  # no change meanwhile: still the current key
                self._keys[provider.name] = (ref, value)
        return value

    def _read_key(self, provider: Provider, ref: str) -> str:
        if ref == "keyring" and self.secrets.kind != "keyring" and not keyring_usable():
            raise ProviderKeyError(
                f"The API key of {provider.name} is in the OS keyring, which is not "
                "available now; add the key again."
            )
        store = self._store(ref)
        value = store.get(provider.name)
        if value is None:
            raise ProviderKeyError(
                f"The API key of {provider.name} is missing from the {ref}; add it again."
            )
        return value

    def engine(self, name: str, **kwargs: Any) -> RemoteEngine:
        """A new RemoteEngine for the provider (the caller shuts it down)."""
        provider = self.get(name)
        return engine_for(provider, self.api_key(provider), **kwargs)


def engine_for(provider: Provider, api_key: str | None, **kwargs: Any) -> RemoteEngine:
    kwargs.setdefault("llama_extras", provider.llama_extras)
    return RemoteEngine(provider.base_url, api_key, provider.headers, name=provider.name, **kwargs)


# ---- routing -----------------------------------------------------------------------------------


class RemoteRouter:
    """Sends requests whose ``model`` is a remote id (``provider::model``) to that provider's
    RemoteEngine, with the bare model name. Engines are made on first use and remade when the
    provider's settings or key change. Thread-safe; ``shutdown`` stops every engine."""

    def __init__(self, registry: ProviderRegistry | None = None) -> None:
        self.registry = registry or ProviderRegistry()
        self._lock = threading.Lock()
        self._engines: dict[str, tuple[tuple[Provider, str | None], RemoteEngine]] = {}
        self._retired: list[RemoteEngine] = []

    def engine(self, provider_name: str) -> RemoteEngine:
        provider = self.registry.get(provider_name)
        fingerprint = (provider, self.registry.api_key(provider))
        with self._lock:
            current = self._engines.get(provider_name)
            if current is not None and _same(current[0], fingerprint):
                return current[1]
            if current is not None:
                self._retired.append(current[1])  # its running jobs finish undisturbed
            engine = engine_for(provider, fingerprint[1])
            self._engines[provider_name] = (fingerprint, engine)
            return engine

    def submit(self, request: Request, sink: Sink | None = None, *, stream: bool = True) -> Job:
        if not isinstance(request, ChatRequest | CompletionRequest):
            raise BadRequestError(
                f"A remote model runs chat and completion requests, not {type(request).__name__}."
            )
        remote = parse_remote_id(request.model) if request.model else None
        if remote is None:
            raise BadRequestError(f"{request.model!r} is not a remote model id (provider::model).")
        bare = dataclasses.replace(request, model=remote.model)
        return self.engine(remote.provider).submit(bare, sink, stream=stream)

    def list_models(self, provider_name: str) -> list[str]:
        """The provider's models as remote ids, for the model picker."""
        return [
            format_remote_id(provider_name, m) for m in self.engine(provider_name).list_models()
        ]

    def shutdown(self) -> None:
        with self._lock:
            engines = [e for _, e in self._engines.values()] + self._retired
            self._engines.clear()
            self._retired = []
        for engine in engines:
            engine.shutdown()


def _same(a: tuple[Provider, str | None], b: tuple[Provider, str | None]) -> bool:
    return a[0] == b[0] and a[1] == b[1]
