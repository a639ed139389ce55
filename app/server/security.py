"""Who may use the API: bind policy, Host and Origin checks, CORS, API key, body size.

- Bound to loopback (the default), only requests whose ``Host`` is a loopback name are
  served: a web page that rebinds its own domain to 127.0.0.1 (DNS rebinding) is refused.
- Bound to anything else, an API key of at least ``MIN_NETWORK_KEY_CHARS`` characters is
  required (:func:`check_bind` refuses to start without one); it may be set on loopback too.
  Keys are compared in constant time.
- A request with an ``Origin`` header comes from a browser page. As Ollama allows by default,
  pages from this computer (``http(s)://localhost``, ``127.0.0.1``, ``[::1]``, any port) and
  app or editor webviews (``app://``, ``file://``, ``tauri://``, ``vscode-webview://``,
  ``vscode-file://``) are allowed; any other origin is refused unless configured
  (``--cors-origin``), so other pages cannot drive the local server even with "simple"
  requests that skip the CORS preflight. Allowed origins get CORS headers, and preflights are
  answered, including Private Network Access.
- Request bodies above ``max_body_bytes`` are refused with 413 before the app sees them, and
  a body that would take the bodies held at once beyond their budget (app/server/limits.py)
  with 503: a declared Content-Length that does not fit before any of it is read, a body that
  grows past what is left as it arrives. Only bytes that arrived are counted (a client that
  declares 32 MB and sends nothing holds nothing), until the request ends.
- A refused request is marked in the request log's note, so the log keeps none of its body.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.engine.gguf_format import mib_text
from app.server.config import ServerConfig
from app.server.limits import RequestLimits, is_local_client, reject_busy
from app.server.protocols import protocol_of, send_refusal

# answered without an API key (nothing secret in them; Ollama's clients probe the last two)
OPEN_PATHS = frozenset({"/health", "/", "/api/version"})
# Ollama's default origins: pages on this computer, and app or editor webviews
LOCAL_PAGE = re.compile(r"^https?://(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?$", re.I)
WEBVIEW_SCHEMES = ("app://", "file://", "tauri://", "vscode-webview://", "vscode-file://")


def default_origin(origin: str) -> bool:
    """Whether a page at ``origin`` may call the API without being configured."""
    origin = origin.strip()
    return bool(LOCAL_PAGE.match(origin.rstrip("/"))) or origin.lower().startswith(WEBVIEW_SCHEMES)


def is_ollama_path(path: str) -> bool:
    """Ollama's routes answer errors as ``{"error": "..."}``."""
    return protocol_of(path) == "ollama"


# 16 hex characters are 64 bits: out of reach of guessing over the network, short to type.
MIN_NETWORK_KEY_CHARS = 16


class InsecureBindError(ValueError):
    """Binding to a network address without an API key."""


class WeakApiKeyError(InsecureBindError):
    """Binding to a network address with a key shorter than ``MIN_NETWORK_KEY_CHARS``."""


def generate_api_key() -> str:
    """A new random API key (for the GUI's "Generate" button)."""
    return "sk-ember-" + secrets.token_urlsafe(24)


def is_loopback(host: str) -> bool:
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(config: ServerConfig) -> None:
    """Refuse to expose the API beyond this computer without an API key, or with a short one."""
    if is_loopback(config.host):
        return
    if not config.api_key:
        raise InsecureBindError(
            f"Binding to {config.host} makes the API reachable from other computers; set an "
            "API key (EMBER_API_KEY, --api-key-file FILE, or the server.api_key setting) to "
            "do that."
        )
    if len(config.api_key.strip()) < MIN_NETWORK_KEY_CHARS:
        raise WeakApiKeyError(
            f"The API key is {len(config.api_key.strip())} characters long; a key that guards "
            f"the API on the network needs at least {MIN_NETWORK_KEY_CHARS} "
            "(`openssl rand -hex 16` makes one)."
        )


def host_name(header: str) -> str:
    """``"[::1]:8434"`` -> ``"::1"``; ``"Localhost:80"`` -> ``"localhost"``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class SecurityMiddleware:
    def __init__(
        self, app: ASGIApp, config: ServerConfig, limits: RequestLimits | None = None
    ) -> None:
        self.app = app
        self.config = config
        self.limits = limits if limits is not None else RequestLimits()
        self.check_host = is_loopback(config.host)
        self.extra_hosts = {h.lower() for h in config.allowed_hosts}
        self.origins = {o.rstrip("/") for o in config.cors_origins}
        self.any_origin = "*" in self.origins
        self.key = config.api_key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        method = scope["method"]
        if self.check_host and not self._host_ok(headers.get("host")):
            await _reject(
                scope,
                send,
                403,
                "The Host header names a server other than this one; "
                "requests must use localhost or 127.0.0.1.",
                "invalid_host",
            )
            return
        origin = headers.get("origin")
        cors: list[tuple[bytes, bytes]] = []
        if origin is not None:
            if not self._origin_ok(origin):
                await _reject(
                    scope,
                    send,
                    403,
                    f"Requests from web pages at {origin} are not allowed (only pages on this "
                    "computer and app webviews are); add the origin to the server's CORS "
                    "origins (--cors-origin) to allow them.",
                    "origin_not_allowed",
                )
                return
            cors = self._cors_headers(origin)
            if method == "OPTIONS" and "access-control-request-method" in headers:
                await _preflight(send, cors, headers)
                return
        if self.key and scope["path"] not in OPEN_PATHS and not self._key_ok(headers):
            await _reject(scope, send, 401, *self._key_problem(headers), extra=cors)
            return
        length = headers.get("content-length", "")
        declared = int(length) if length.isdigit() and len(length) <= 18 else None
        if len(length) > 18 or (declared is not None and declared > self.config.max_body_bytes):
            await _reject(scope, send, 413, self._too_large(), "request_too_large", extra=cors)
            return
        held = _Held(self.limits, is_local_client(scope))
        try:
            if method in ("POST", "PUT", "PATCH"):
                if declared is not None and not held.fits(declared):  # refused before reading
                    await reject_busy(
                        scope, send, self.limits, self.limits.body_busy_message(), cors
                    )
                    return
                try:
                    body = await _read_body(receive, self.config.max_body_bytes, held)
                except _OverBudgetError:
                    await reject_busy(
                        scope, send, self.limits, self.limits.body_busy_message(), cors
                    )
                    return
                if body is None:
                    await _reject(
                        scope, send, 413, self._too_large(), "request_too_large", extra=cors
                    )
                    return
                receive = _replay(body, receive)
            await self.app(scope, receive, _with_headers(send, cors) if cors else send)
        finally:
            held.release()  # the body is let go with the request

    # -- checks ---------------------------------------------------------------------------

    def _host_ok(self, header: str | None) -> bool:
        if not header:
            return False
        name = host_name(header)
        return is_loopback(name) or name in self.extra_hosts

    def _origin_ok(self, origin: str) -> bool:
        return self.any_origin or origin.rstrip("/") in self.origins or default_origin(origin)

    def _cors_headers(self, origin: str) -> list[tuple[bytes, bytes]]:
        return [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"vary", b"Origin"),
        ]

    def _key_ok(self, headers: dict[str, str]) -> bool:
        """A Bearer token (OpenAI's clients, Ollama's) or ``x-api-key`` (Anthropic's)."""
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.key):
            return True
        other = headers.get("x-api-key", "").strip().encode("latin-1")
        return bool(other) and hmac.compare_digest(other, self.key)

    @staticmethod
    def _key_problem(headers: dict[str, str]) -> tuple[str, str | None]:
        if not headers.get("authorization") and not headers.get("x-api-key"):
            return (
                "You didn't provide an API key. This server requires one, sent as "
                "`Authorization: Bearer <key>` (or `x-api-key: <key>`).",
                None,
            )
        return "Incorrect API key provided.", "invalid_api_key"

    def _too_large(self) -> str:
        limit = mib_text(self.config.max_body_bytes)
        return f"The request body is larger than this server's limit of {limit}."


async def _reject(
    scope: Scope,
    send: Send,
    status: int,
    message: str,
    code: str | None,
    *,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    challenge = [(b"www-authenticate", b"Bearer")] if status == 401 else []
    await send_refusal(scope, send, status, message, code, headers=challenge + (extra or []))


async def _preflight(send: Send, cors: list[tuple[bytes, bytes]], headers: dict[str, str]) -> None:
    allow_headers = headers.get("access-control-request-headers") or "authorization, content-type"
    out = [
        *cors,
        (b"access-control-allow-methods", b"GET, HEAD, POST, DELETE, OPTIONS"),
        (b"access-control-allow-headers", allow_headers.encode("latin-1")),
        (b"access-control-max-age", b"600"),
        (b"content-length", b"0"),
    ]
    if headers.get("access-control-request-private-network", "").lower() == "true":
        out.append((b"access-control-allow-private-network", b"true"))
    await send({"type": "http.response.start", "status": 204, "headers": out})
    await send({"type": "http.response.body", "body": b""})


class _Held:
    """The body bytes one request has counted against the budget of all requests (those that
    arrived: a declared length is checked, not held)."""

    def __init__(self, limits: RequestLimits, local: bool) -> None:
        self.limits = limits
        self.local = local
        self.bytes = 0

    def fits(self, n: int) -> bool:
        return self.limits.body_fits(n - self.bytes, self.local)

    def take(self, n: int) -> bool:
        if not self.limits.take_body(n, self.local):
            return False
        self.bytes += n
        return True

    def release(self) -> None:
        self.limits.give_body(self.bytes, self.local)
        self.bytes = 0


class _OverBudgetError(Exception):
    """Holding this body would take the bodies held at once beyond their budget."""


async def _read_body(receive: Receive, limit: int, held: _Held) -> bytes | None:
    """The whole body, or None once it exceeds ``limit``; raises _OverBudgetError once holding it
    would exceed the budget of all bodies (``held`` counts its bytes as they arrive)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # disconnected: the app will see an empty body and the next receive
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        if size > held.bytes and not held.take(size - held.bytes):
            raise _OverBudgetError
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    async def send_with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return send_with_headers
