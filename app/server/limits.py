"""How much the API takes on at once: requests in flight, and request-body bytes held.

Each request may send a body up to ``max_body_bytes`` (32 MB, app/server/security.py); without
a bound on how many do so at once, memory had none. Two bounds, both answered with an
OpenAI-shaped 503 (Ollama's ``{"error"}`` on its routes) and ``Retry-After``:

- ``MAX_REQUESTS`` requests in flight (128): from the moment a request's head has arrived until
  its response has been sent, streams included. A desktop app's clients (editors, scripts, the
  GUI) use a few at a time; 128 is far more, and also the listen backlog. A long stream holds
  one place; the engine queue (``--max-queue``) bounds the generation jobs behind them, so
  streams cannot take all places unless they are that many remote ones.
- ``MAX_BODY_BYTES_IN_FLIGHT`` (256 MB) of request bodies held at once, across all requests:
  a body is counted as its bytes arrive, and until its request ends; one whose declared
  Content-Length does not fit in what is left is refused before any of it is read, but a
  declared length is not held (8 clients that declared 32 MB and sent a byte every 10 s held
  the whole budget). The request that would go beyond it is refused; the others go on.
- A quarter of each bound is kept for clients on this computer (loopback): other clients may
  hold at most three quarters of the places and of the body bytes, so a client on the network
  cannot lock out the ones here. A body must also keep arriving at a minimum rate
  (app/server/header_timeout.py), so no client holds a place or bytes by trickling.

The GUI's own chats do not use HTTP: they are jobs on the engine worker, untouched by these.

:class:`RequestLimits` holds the counts and is thread-safe: the servers of one gateway (the
main port and the optional Ollama port, each on its own thread and event loop) share one
(:func:`limits_for`). ``changed`` (a threading.Condition) lets other threads (tests) wait on
the counts.
"""

from __future__ import annotations

import ipaddress
import threading
import weakref
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from app.engine.gguf_format import MIB, mib_text

MAX_REQUESTS = 128
MAX_BODY_BYTES_IN_FLIGHT = 256 * MIB
LOCAL_SHARE = 4  # 1/4 of each bound is kept for clients on this computer
RETRY_AFTER_SECONDS = 1


def is_local_client(scope: Scope) -> bool:
    """Whether the request comes from this computer (a loopback address, or a Unix socket)."""
    client = scope.get("client")
    if not client:
        return True
    try:
        return ipaddress.ip_address(str(client[0]).split("%", 1)[0]).is_loopback
    except ValueError:
        return False


class RequestLimits:
    def __init__(
        self, max_requests: int = MAX_REQUESTS, max_body_bytes: int = MAX_BODY_BYTES_IN_FLIGHT
    ) -> None:
        self.max_requests = max_requests
        self.max_body_bytes = max_body_bytes
        self.requests = 0  # in flight now
        self.body_bytes = 0  # of request bodies held now
        self.remote_requests = 0  # of ``requests``, from clients not on this computer
        self.remote_body_bytes = 0  # of ``body_bytes``, theirs
        self.refused = 0  # requests refused by either bound, ever
        self.changed = threading.Condition(threading.RLock())

    @property
    def max_remote_requests(self) -> int:
        return self.max_requests - self.max_requests // LOCAL_SHARE

    @property
    def max_remote_body_bytes(self) -> int:
        return self.max_body_bytes - self.max_body_bytes // LOCAL_SHARE

    def _update(
        self, requests: int = 0, body_bytes: int = 0, refused: int = 0, *, local: bool = True
    ) -> None:
        with self.changed:
            self.requests += requests
            self.body_bytes += body_bytes
            self.refused += refused
            if not local:
                self.remote_requests += requests
                self.remote_body_bytes += body_bytes
            self.changed.notify_all()

    def count_refused(self) -> None:
        """One more request refused for want of room (``refused``)."""
        self._update(refused=1)

    def wait_for(self, predicate: Callable[[RequestLimits], bool], timeout: float) -> bool:
        """Block until ``predicate(self)`` holds (for tests and other threads)."""
        with self.changed:
            return self.changed.wait_for(lambda: predicate(self), timeout)

    def enter(self, local: bool = True) -> bool:
        """Count one more request in flight, unless that goes beyond the cap (for a client
        not on this computer: beyond its three quarters)."""
        with self.changed:
            if self.requests >= self.max_requests or (
                not local and self.remote_requests >= self.max_remote_requests
            ):
                return False
            self._update(requests=1, local=local)
            return True

    def leave(self, local: bool = True) -> None:
        self._update(requests=-1, local=local)

    def body_fits(self, n: int, local: bool = True) -> bool:
        """Whether ``n`` more body bytes would fit now (nothing is counted)."""
        with self.changed:
            if self.body_bytes + n > self.max_body_bytes:
                return False
            return local or self.remote_body_bytes + n <= self.max_remote_body_bytes

    def take_body(self, n: int, local: bool = True) -> bool:
        """Count ``n`` more body bytes held, unless that goes beyond the budget."""
        with self.changed:
            if not self.body_fits(n, local):
                return False
            self._update(body_bytes=n, local=local)
            return True

    def give_body(self, n: int, local: bool = True) -> None:
        if n:
            self._update(body_bytes=-n, local=local)

    def busy_message(self) -> str:
        return (
            f"The server is busy: {self.max_requests} requests are in progress, as many as it "
            f"takes at once. Retry in {RETRY_AFTER_SECONDS} s."
        )

    def body_busy_message(self) -> str:
        return (
            f"The server is busy: the request bodies it is receiving now add up to its limit of "
            f"{mib_text(self.max_body_bytes)}. Retry in {RETRY_AFTER_SECONDS} s."
        )


_SHARED: weakref.WeakKeyDictionary[object, RequestLimits] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def limits_for(gateway: object, limits: RequestLimits | None = None) -> RequestLimits:
    """The limits of every server on ``gateway`` (``limits`` from now on, when given): the main
    port and the optional Ollama port (app/server/ollama/port.py) share one bound."""
    with _SHARED_LOCK:
        if limits is not None:
            _SHARED[gateway] = limits
        elif (limits := _SHARED.get(gateway)) is None:
            limits = _SHARED[gateway] = RequestLimits()
        return limits


# a probe (GET or HEAD of these) answers at once, from nothing: never refused as busy, so a
# client (or a person) can always see that the server is up
PROBES = frozenset({"/health", "/", "/api/version"})


class ConcurrencyMiddleware:
    """Counts HTTP requests in flight; beyond ``max_requests``, a 503 with Retry-After."""

    def __init__(self, app: ASGIApp, limits: RequestLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        probe = scope.get("method") in ("GET", "HEAD") and scope.get("path") in PROBES
        if scope["type"] != "http" or probe:
            await self.app(scope, receive, send)
            return
        local = is_local_client(scope)
        if not self.limits.enter(local):
            await reject_busy(scope, send, self.limits, self.limits.busy_message())
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.limits.leave(local)


async def reject_busy(
    scope: Scope,
    send: Send,
    limits: RequestLimits,
    message: str,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Answer 503 ``server_busy`` (Ollama's shape on its routes) with Retry-After."""
    from app.server.protocols import send_refusal

    limits.count_refused()
    retry = [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())]
    await send_refusal(scope, send, 503, message, "server_busy", headers=retry + (extra or []))
