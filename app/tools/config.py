"""MCP servers: ``EMBER_HOME/mcp.json``, in the shape Claude Desktop, Cursor and Jan use.

::

    {"mcpServers": {
        "time":   {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
        "search": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "<secret>"}}
    }}

Ember adds a few keys of its own to an entry (other programs ignore them): ``disabled``,
``disabledTools`` (tools the model is never offered), ``alwaysAllow`` (tools that run without
asking) and ``approvedCommand`` (the command line the user has seen and agreed to run; a stdio
server whose command line changed is shown again before it runs).

Secrets never stay in the file: an env variable or header whose name looks like one
(``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``Authorization``, …) is kept where provider API keys
are (the OS keyring, else ``secrets.json`` readable only by the user) and written as
``"<secret>"``. Thread-safe; every change is written atomically.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import logging
import re
import shlex
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.config import atomic_write_text, paths

log = logging.getLogger(__name__)

SECRET_MARK = "<secret>"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL", "COOKIE")
_OWN_KEYS = {
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "type",
    "disabled",
    "disabledTools",
    "alwaysAllow",
    "approvedCommand",
}


class ToolConfigError(ValueError):
    """A server entry or mcp.json that cannot be used; the message says what to fix."""


def validate_server_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise ToolConfigError(
            f"{name!r} is not a valid server name: use letters, digits, '-', '_' and '.' "
            "(up to 64, starting with a letter or digit)."
        )
    return name


def looks_secret(name: str) -> bool:
    """Whether an env variable or header called ``name`` holds a secret (kept in the keyring)."""
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One MCP server: stdio (``command``, ``args``, ``env``, ``cwd``) or Streamable HTTP
    (``url``, ``headers``). Values in ``env``/``headers`` named in ``secret_keys`` are
    :data:`SECRET_MARK` here; :meth:`McpConfig.env` and :meth:`McpConfig.headers` read them."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    enabled: bool = True
    disabled_tools: frozenset[str] = frozenset()
    always_allow: frozenset[str] = frozenset()
    approved_command: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys of other programs, kept as-is

    def __post_init__(self) -> None:
        validate_server_name(self.name)
        if (self.command is None) == (self.url is None):
            raise ToolConfigError(
                f"Server {self.name}: give either a command (stdio) or a url (HTTP), not "
                f"{'both' if self.command else 'neither'}."
            )
        if self.command is not None and not self.command.strip():
            raise ToolConfigError(f"Server {self.name}: the command is empty.")
        if self.url is not None and not re.match(r"^https?://[^\s/]+", self.url):
            raise ToolConfigError(
                f"Server {self.name}: {self.url!r} is not an http:// or https:// URL."
            )

    @property
    def kind(self) -> str:
        return "stdio" if self.command is not None else "http"

    @property
    def command_line(self) -> str:
        """What runs, as a shell would show it (empty for an HTTP server)."""
        if self.command is None:
            return ""
        return shlex.join([self.command, *self.args])

    @property
    def needs_approval(self) -> bool:
        """A stdio server whose exact command line the user has not agreed to yet."""
        return self.command is not None and self.approved_command != self.command_line

    @property
    def target(self) -> str:
        return self.command_line or (self.url or "")

    def tool_enabled(self, tool: str) -> bool:
        return tool not in self.disabled_tools

    def secret_keys(self) -> tuple[list[str], list[str]]:
        """The env variables and headers whose values are in the secret store."""
        return (
            [k for k, v in self.env.items() if v == SECRET_MARK],
            [k for k, v in self.headers.items() if v == SECRET_MARK],
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = dict(self.extra)
        if self.command is not None:
            data["command"] = self.command
            data["args"] = list(self.args)
            if self.env:
                data["env"] = dict(self.env)
            if self.cwd:
                data["cwd"] = self.cwd
        else:
            data["type"] = "http"
            data["url"] = self.url
            if self.headers:
                data["headers"] = dict(self.headers)
        if not self.enabled:
            data["disabled"] = True
        if self.disabled_tools:
            data["disabledTools"] = sorted(self.disabled_tools)
        if self.always_allow:
            data["alwaysAllow"] = sorted(self.always_allow)
        if self.approved_command is not None:
            data["approvedCommand"] = self.approved_command
        return data

    @classmethod
    def from_json(cls, name: str, data: Any) -> ServerConfig:
        if not isinstance(data, dict):
            raise ToolConfigError(f"Server {name}: its entry must be a JSON object.")
        url = data.get("url") or data.get("serverUrl")  # Windsurf says serverUrl
        args = data.get("args") or []
        if not isinstance(args, list):
            raise ToolConfigError(f"Server {name}: 'args' must be a list of strings.")
        return cls(
            name=name,
            command=_opt_str(data.get("command")),
            args=tuple(str(a) for a in args),
            env=_str_map(name, "env", data.get("env")),
            cwd=_opt_str(data.get("cwd")),
            url=_opt_str(url),
            headers=_str_map(name, "headers", data.get("headers")),
            enabled=not bool(data.get("disabled", False)),
            disabled_tools=frozenset(str(t) for t in data.get("disabledTools") or []),
            always_allow=frozenset(str(t) for t in data.get("alwaysAllow") or []),
            approved_command=_opt_str(data.get("approvedCommand")),
            extra={k: v for k, v in data.items() if k not in _OWN_KEYS and k != "serverUrl"},
        )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _str_map(server: str, what: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ToolConfigError(f"Server {server}: {what!r} must be an object of strings.")
    return {str(k): str(v) for k, v in value.items()}


def claude_desktop_config() -> Path:
    """Where Claude Desktop keeps its MCP servers on this system (the file may not exist)."""
    import os
    import sys

    if sys.platform == "darwin":
        folder = Path.home() / "Library" / "Application Support" / "Claude"
    elif sys.platform == "win32":
        folder = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming") / "Claude"
    else:  # the Linux builds follow XDG
        folder = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "Claude"
    return folder / "claude_desktop_config.json"


def read_servers(path: Path) -> dict[str, ServerConfig]:
    """The servers in a file of the ``{"mcpServers": {...}}`` shape (Claude Desktop's
    ``claude_desktop_config.json``, Cursor's ``mcp.json``, …). A bad entry is an error that
    names it; an entry marked ``SECRET_MARK`` keeps its mark."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ToolConfigError(f"{path}: no such file.") from None
    except (OSError, ValueError) as e:
        raise ToolConfigError(f"{path} is unreadable ({e}); fix or delete it.") from e
    entries = data.get("mcpServers", data.get("servers")) if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise ToolConfigError(f'{path} has no "mcpServers" object.')
    return {
        name: ServerConfig.from_json(validate_server_name(name), e) for name, e in entries.items()
    }


# ---- secrets ---------------------------------------------------------------------------------


def _secret_name(server: str, where: str, key: str) -> str:
    return f"mcp:{server}:{where}:{key}"


class McpConfig:
    """The servers in ``EMBER_HOME/mcp.json`` and their secrets. Thread-safe; the file is read
    again when it changed (the GUI and ``ember mcp`` in another process share it)."""

    def __init__(self, path: Path | None = None, secrets: Any = None) -> None:
        self.path = path or paths().home / "mcp.json"
        self._secrets = secrets
        self._lock = threading.RLock()
        self._stamp: object = None
        self._servers: dict[str, ServerConfig] = {}

    @property
    def secrets(self) -> Any:
        """Where secrets go: the same store as provider API keys (the OS keyring when one
        works, else a 0600 ``secrets.json``)."""
        from app.engine.providers import default_secret_store

        with self._lock:
            if self._secrets is None:
                self._secrets = default_secret_store(self.path.parent)
            return self._secrets

    # -- reading -----------------------------------------------------------------------------

    def _file_stamp(self) -> object:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _load(self) -> dict[str, ServerConfig]:
        with self._lock:
            stamp = self._file_stamp()
            if stamp != self._stamp:
                self._servers = read_servers(self.path) if stamp is not None else {}
                self._stamp = stamp
            return dict(self._servers)

    def list(self) -> list[ServerConfig]:
        return sorted(self._load().values(), key=lambda s: s.name)

    def find(self, name: str) -> ServerConfig | None:
        return self._load().get(name)

    def get(self, name: str) -> ServerConfig:
        server = self.find(name)
        if server is None:
            known = ", ".join(s.name for s in self.list()) or "none yet"
            raise ToolConfigError(
                f"No MCP server called {name!r} (known: {known}). "
                "Add one with `ember mcp add NAME -- COMMAND [ARGS…]`."
            )
        return server

    def env(self, server: ServerConfig) -> dict[str, str]:
        """The server's environment, secrets read from the store."""
        return self._resolved(server, "env", server.env)

    def headers(self, server: ServerConfig) -> dict[str, str]:
        return self._resolved(server, "header", server.headers)

    def _resolved(self, server: ServerConfig, where: str, values: dict[str, str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in values.items():
            if value == SECRET_MARK:
                stored = self.secrets.get(_secret_name(server.name, where, key))
                if stored is None:
                    raise ToolConfigError(
                        f"Server {server.name}: the secret {key} is missing from the "
                        f"{self.secrets.kind}; set it again (Settings → Tools, or "
                        "`ember mcp add --replace`)."
                    )
                out[key] = stored
            else:
                out[key] = value
        return out

    # -- changing ----------------------------------------------------------------------------

    def _save(self, servers: Mapping[str, ServerConfig]) -> None:
        data = {"mcpServers": {n: s.to_json() for n, s in sorted(servers.items())}}
        atomic_write_text(self.path, json.dumps(data, indent=2) + "\n")
        self._stamp = None

    def add(self, server: ServerConfig, *, replace: bool = False) -> ServerConfig:
        """Save ``server``; secret-looking env and header values go to the secret store and
        are written as :data:`SECRET_MARK`. Raises if the name is taken, unless ``replace``."""
        with self._lock:
            servers = self._load()
            old = servers.get(server.name)
            if old is not None and not replace:
                raise ToolConfigError(
                    f"An MCP server called {server.name!r} exists already; remove it first or "
                    "use --replace."
                )
            env = self._store_secrets(server.name, "env", server.env)
            headers = self._store_secrets(server.name, "header", server.headers)
            server = dataclasses.replace(server, env=env, headers=headers)
            servers[server.name] = server
            self._save(servers)
            if old is not None:
                self._drop_secrets(old, keep=server)
            return server

    def _store_secrets(self, name: str, where: str, values: dict[str, str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in values.items():
            if value != SECRET_MARK and looks_secret(key) and value:
                self.secrets.set(_secret_name(name, where, key), value)
                out[key] = SECRET_MARK
            else:
                out[key] = value
        return out

    def _drop_secrets(self, old: ServerConfig, keep: ServerConfig | None = None) -> None:
        kept_env, kept_headers = keep.secret_keys() if keep is not None else ([], [])
        env, headers = old.secret_keys()
        gone = [("env", k) for k in env if k not in kept_env]
        gone += [("header", k) for k in headers if k not in kept_headers]
        for where, key in gone:
            try:
                self.secrets.delete(_secret_name(old.name, where, key))
            except Exception as e:  # the entry is gone either way; a stale secret is harmless
                log.warning("Could not delete a stored secret of %s: %s", old.name, e)

    def remove(self, name: str) -> ServerConfig:
        with self._lock:
            server = self.get(name)
            servers = self._load()
            servers.pop(name, None)
            self._save(servers)
            self._drop_secrets(server)
            return server

    def update(self, name: str, **changes: Any) -> ServerConfig:
        """Change fields of a server in place (``enabled``, ``disabled_tools``, …)."""
        with self._lock:
            server = dataclasses.replace(self.get(name), **changes)
            servers = self._load()
            servers[name] = server
            self._save(servers)
            return server

    def set_tool_enabled(self, name: str, tool: str, enabled: bool) -> ServerConfig:
        with self._lock:
            disabled = set(self.get(name).disabled_tools)
            (disabled.discard if enabled else disabled.add)(tool)
            return self.update(name, disabled_tools=frozenset(disabled))

    def set_always_allow(self, name: str, tool: str, allow: bool) -> ServerConfig:
        with self._lock:
            allowed = set(self.get(name).always_allow)
            (allowed.add if allow else allowed.discard)(tool)
            return self.update(name, always_allow=frozenset(allowed))

    def approve_command(self, name: str, seen: str | None = None) -> ServerConfig:
        """The user has seen the server's exact command line and agreed to run it. ``seen``:
        the line they were shown; if the entry changed since, nothing is approved."""
        with self._lock:
            server = self.get(name)
            if seen is not None and seen != server.command_line:
                raise ToolConfigError(
                    f"MCP server {name}'s command line changed while it was shown to you; "
                    "nothing was approved. Look at the new one before it runs."
                )
            return self.update(name, approved_command=server.command_line or None)

    def import_file(self, path: Path, *, replace: bool = False) -> builtins.list[str]:
        """Add the servers of a Claude Desktop / Cursor / Jan config file. Their command lines
        are not approved yet (the user sees each before it first runs). Returns the names
        added; a name that exists is skipped unless ``replace``."""
        added: list[str] = []
        for name, server in read_servers(path).items():
            if self.find(name) is not None and not replace:
                continue
            self.add(dataclasses.replace(server, approved_command=None), replace=replace)
            added.append(name)
        return added
