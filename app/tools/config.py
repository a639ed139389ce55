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
from app.safe_text import shell_line, terminal_text

log = logging.getLogger(__name__)

SECRET_MARK = "<secret>"
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL", "COOKIE")


class ToolConfigError(ValueError):
    """A server entry or mcp.json that cannot be used; the message says what to fix."""


def validate_server_name(name: str) -> str:
    if not _NAME_RE.fullmatch(name):
        raise ToolConfigError(
            f"{name!a} is not a valid server name: use letters, digits, '-', '_' and '.' "
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
    def argv(self) -> tuple[str, ...]:
        """What runs, exactly (empty for an HTTP server)."""
        return () if self.command is None else (self.command, *self.args)

    @property
    def shown_command(self) -> str:
        """The exact command line, safe to show (app/safe_text.py): what an approval shows."""
        return shell_line(self.argv)

    @property
    def needs_approval(self) -> bool:
        """A stdio server whose exact command line the user has not agreed to yet."""
        return self.command is not None and self.approved_command != self.command_line

    @property
    def target(self) -> str:
        """What the server is, safe to show: its command line or its URL."""
        return self.shown_command or terminal_text(self.url or "")

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
        """The server an mcp.json entry describes; a ToolConfigError naming the server and the
        field when a value has the wrong type (:func:`check_entry`)."""
        return cls(name=name, **check_entry(name, data))


# ---- the one check of an entry's fields ------------------------------------------------------

MAX_NESTING = 32  # an entry's values nest a few levels; thousands (a RecursionError) are no entry
_STRING, _BOOL, _STRINGS, _NAMES, _MAP = (
    "a string",
    "true or false",
    "a list of strings",
    "a list of tool names (strings)",
    "an object of strings",
)
# mcp.json key -> (what it must be, the ServerConfig field)
_FIELDS: dict[str, tuple[str, str]] = {
    "command": (_STRING, "command"),
    "args": (_STRINGS, "args"),
    "env": (_MAP, "env"),
    "cwd": (_STRING, "cwd"),
    "url": (_STRING, "url"),
    "serverUrl": (_STRING, "url"),  # Windsurf's name for url
    "headers": (_MAP, "headers"),
    "type": (_STRING, ""),
    "disabled": (_BOOL, "enabled"),
    "disabledTools": (_NAMES, "disabled_tools"),
    "alwaysAllow": (_NAMES, "always_allow"),
    "approvedCommand": (_STRING, "approved_command"),
}
_SCALARS = (str, int, float, bool)


def check_entry(name: str, data: Any) -> dict[str, Any]:
    """ServerConfig's fields from one mcp.json entry, every value checked for its type: a wrong
    one is a ToolConfigError naming the server and the field, never a traceback."""
    if not isinstance(data, dict):
        raise ToolConfigError(
            f"Server {name}: its entry must be a JSON object, not {_shown(data)}."
        )
    if _depth(data) > MAX_NESTING:
        raise ToolConfigError(
            f"Server {name}: its entry nests deeper than {MAX_NESTING} levels, as no MCP "
            "server's does; fix or remove it."
        )
    fields: dict[str, Any] = {}
    for key, (what, attr) in _FIELDS.items():
        value = data.get(key)
        if value is None or (attr == "url" and "url" in fields):
            continue
        converted = _converted(what, value)
        if converted is None:
            raise ToolConfigError(f"Server {name}: {key!r} must be {what}, not {_shown(value)}.")
        if attr:
            fields[attr] = not converted if attr == "enabled" else converted
    fields["extra"] = {k: v for k, v in data.items() if k not in _FIELDS}
    return fields


def _converted(what: str, value: Any) -> Any:
    """``value`` as the field's type, or None when it is not one."""
    if what == _STRING:
        return value if isinstance(value, str) else None
    if what == _BOOL:
        return value if isinstance(value, bool) else None
    if what == _MAP:  # env values are sometimes written as numbers or booleans
        if not isinstance(value, dict) or not all(isinstance(v, _SCALARS) for v in value.values()):
            return None
        return {k: v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
    if what == _STRINGS and isinstance(value, list):  # "args": ["--port", 8080] is seen too
        numbers = [
            str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v for v in value
        ]
        return tuple(numbers) if all(isinstance(v, str) for v in numbers) else None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return frozenset(value)


def _depth(value: Any) -> int:
    """How deep ``value`` nests, counted without recursion up to just past MAX_NESTING."""
    deepest, todo = 0, [(value, 1)]
    while todo and deepest <= MAX_NESTING:
        item, depth = todo.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            todo.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            todo.extend((child, depth + 1) for child in item)
    return deepest


def _shown(value: Any) -> str:
    """A value as a short line of ASCII JSON, for an error message."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


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


MAX_FILE_BYTES = 4 * 1024 * 1024  # an mcp.json of many servers is a few kilobytes


def read_entries(path: Path) -> tuple[dict[str, ServerConfig], dict[str, Any], dict[str, str]]:
    """The servers in a file of the ``{"mcpServers": {...}}`` shape (Claude Desktop's
    ``claude_desktop_config.json``, Cursor's ``mcp.json``, …); the entries that cannot be used,
    as written; and why, one line each naming the file, the server and the field. A file that is
    no such config is a ToolConfigError. An entry marked ``SECRET_MARK`` keeps its mark."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ToolConfigError(
                f"{path} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB, as no MCP config "
                "is; fix or delete it."
            )
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ToolConfigError(f"{path}: no such file.") from None
    except RecursionError:  # too deep for Python's parser: say where, found without it
        raise ToolConfigError(
            f"{path}: {_deepest_place(path.read_text(encoding='utf-8'))} nests thousands of "
            "levels deep, as no MCP config does; fix or delete it."
        ) from None
    except ToolConfigError:
        raise
    except (OSError, ValueError) as e:
        raise ToolConfigError(f"{path} is unreadable ({e}); fix or delete it.") from e
    entries = data.get("mcpServers", data.get("servers")) if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise ToolConfigError(f'{path} has no "mcpServers" object.')
    servers: dict[str, ServerConfig] = {}
    bad: dict[str, Any] = {}
    problems: dict[str, str] = {}
    for name, entry in entries.items():
        try:
            servers[name] = ServerConfig.from_json(validate_server_name(name), entry)
        except ToolConfigError as e:
            bad[name] = entry
            problems[name] = f"{path}: {e}"
    return servers, bad, problems


def _deepest_place(text: str) -> str:
    """Where JSON ``text`` first nests past MAX_NESTING, as "server 'x', 'args'" (or the keys
    that lead there). One pass over the text, without recursion."""
    open_: list[list[str | None]] = []  # per open container: [its kind, its last key]
    at, expect_key = 0, False
    while at < len(text) and len(open_) <= MAX_NESTING:
        char = text[at]
        if char == '"':
            end = at + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            if expect_key:
                open_[-1][1] = text[at + 1 : end]
            at, expect_key = end + 1, False
            continue
        if char in "{[":
            open_.append([char, None])
            expect_key = char == "{"
        elif char in "}]" and open_:
            open_.pop()
        elif char == ",":
            expect_key = bool(open_) and open_[-1][0] == "{"
        at += 1
    keys = [key for _kind, key in open_ if key is not None]
    if len(keys) >= 3 and keys[0] in ("mcpServers", "servers"):
        return f"server {keys[1]!r}, {keys[2]!r}"
    return "the value at " + ".".join(keys) if keys else "the file"


def read_servers(path: Path) -> dict[str, ServerConfig]:
    """The servers of a config file (:func:`read_entries`); an unusable one is an error."""
    servers, _bad, problems = read_entries(path)
    if problems:
        raise ToolConfigError(next(iter(problems.values())))
    return servers


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
        self._bad: dict[str, Any] = {}  # entries that cannot be used, kept as written
        self._problems: dict[str, str] = {}

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
                found = read_entries(self.path) if stamp is not None else ({}, {}, {})
                self._servers, self._bad, self._problems = found
                self._stamp = stamp
            return dict(self._servers)

    def list(self) -> list[ServerConfig]:
        """The servers that can be used (:meth:`problems` says why the others cannot)."""
        return sorted(self._load().values(), key=lambda s: s.name)

    def problems(self) -> dict[str, str]:
        """Why each entry that cannot be used cannot, one line naming the file, the server
        and the field; the other servers work meanwhile."""
        with self._lock:
            self._load()
            return dict(self._problems)

    def find(self, name: str) -> ServerConfig | None:
        return self._load().get(name)

    def get(self, name: str) -> ServerConfig:
        server = self.find(name)
        if server is None and name in self._problems:
            raise ToolConfigError(self._problems[name])
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
        kept = {n: e for n, e in self._bad.items() if n not in servers}  # left as written
        entries = {**kept, **{n: s.to_json() for n, s in servers.items()}}
        data = {"mcpServers": dict(sorted(entries.items()))}
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

    def remove(self, name: str) -> ServerConfig | None:
        """Remove a server (one that cannot be used too: None then)."""
        with self._lock:
            servers = self._load()
            if name not in servers and self._bad.pop(name, None) is not None:
                self._save(servers)
                return None
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
