"""The models remote providers serve, for the model picker and the chat settings.

``RemoteCatalog`` keeps, per provider, the models it served the last time it was asked (or why
it could not be asked). ``refresh()`` re-reads the provider list and asks every provider whose
answer is older than ``max_age`` again. The work runs on the app's task runner: the provider
list on its disk lane (a refresh asked meanwhile reads it once more after), each provider's
models on the network lane, one task per provider keyed by its name, so one that is down (a few
seconds of connect timeout) never delays the others or the menu, and only its latest answer
counts.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from functools import partial
from urllib.parse import urlsplit

from PySide6.QtCore import QObject, Signal

from app.engine.providers import Provider, ProviderKeyError, RemoteRouter
from app.engine.remote_errors import (
    RemoteAuthError,
    RemoteError,
    RemoteTimeoutError,
    RemoteUnreachableError,
)
from app.ui.task_runner import tasks

log = logging.getLogger(__name__)

MAX_AGE = 60.0  # seconds an answer is good for when the menu opens
MAX_AGE_FAILED = 8.0  # a provider that was down is asked again sooner


@dataclass(frozen=True, slots=True)
class ProviderModels:
    """One provider as the picker shows it. ``status`` is ``checking``, ``ok`` or ``error``
    (then ``problem`` is a few words for the menu and ``error`` the full message)."""

    provider: Provider
    models: tuple[str, ...] = ()
    status: str = "checking"
    problem: str = ""
    error: str = ""
    fetched_at: float = field(default=0.0, compare=False)

    @property
    def name(self) -> str:
        return self.provider.name

    @property
    def host(self) -> str:
        """``host:port`` of the base URL, short enough for a menu."""
        parts = urlsplit(self.provider.base_url)
        return parts.netloc or self.provider.base_url

    def remote_id(self, model: str) -> str:
        return f"{self.name}::{model}"


def problem_of(error: BaseException) -> str:
    """A few words on why a provider's models could not be listed."""
    if isinstance(error, RemoteUnreachableError):
        return "Can't reach the server"
    if isinstance(error, RemoteTimeoutError):
        return "Not answering"
    if isinstance(error, RemoteAuthError):
        return "API key rejected" if "rejected" in str(error) else "Needs an API key"
    if isinstance(error, ProviderKeyError):
        return "API key missing"
    if isinstance(error, RemoteError) and error.upstream_status == 404:
        return "No OpenAI API at this URL"
    return "Not available"


class RemoteCatalog(QObject):
    """See the module docstring. Signal: ``changed()`` (GUI thread) after any update."""

    changed = Signal()

    def __init__(self, router: RemoteRouter, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.router = router
        self._entries: dict[str, ProviderModels] = {}
        self._scope = object()  # keeps this catalog's task keys apart from any other's
        self._max_age: float | None = None  # the smallest max_age asked since the last read
        self.loaded = False  # the provider list has been read at least once

    # -- queries --------------------------------------------------------------------------

    @property
    def providers(self) -> list[ProviderModels]:
        return [self._entries[name] for name in sorted(self._entries)]

    def entry(self, name: str) -> ProviderModels | None:
        return self._entries.get(name)

    # -- refreshing -----------------------------------------------------------------------

    def refresh(self, max_age: float = MAX_AGE) -> None:
        """Re-read the providers (off the GUI thread) and ask the stale ones for their models.
        ``max_age=0`` asks every provider again (the menu's "Refresh")."""
        self._max_age = max_age if self._max_age is None else min(self._max_age, max_age)
        tasks().submit(
            self.router.registry.list,
            self._on_read,
            self._on_read_failed,
            key=(self._scope, "providers"),
            coalesce=True,  # asked while reading: read once more after (a provider was added)
            name="read the providers",
        )

    def _on_read(self, providers: list[Provider]) -> None:
        max_age, self._max_age = self._max_age, None
        self._apply(providers, MAX_AGE if max_age is None else max_age)

    def _on_read_failed(self, error: BaseException) -> None:
        self._max_age = None
        log.warning("Reading the providers failed: %s", error)

    def _apply(self, providers: list[Provider], max_age: float) -> None:
        now = time.monotonic()
        entries: dict[str, ProviderModels] = {}
        for provider in providers:
            old = self._entries.get(provider.name)
            if old is None or old.provider != provider:  # new, or its URL/key/headers changed
                entries[provider.name] = ProviderModels(provider)
                self._ask(provider)
                continue
            entries[provider.name] = old
            limit = MAX_AGE_FAILED if old.status == "error" else max_age
            if old.status != "checking" and now - old.fetched_at >= min(limit, max_age):
                entries[provider.name] = dataclasses.replace(old, status="checking")
                self._ask(provider)
        self._entries = entries
        self.loaded = True
        self.changed.emit()

    def _ask(self, provider: Provider) -> None:
        name = provider.name
        router = self.router
        tasks().submit(
            lambda: router.engine(name).list_models(),
            partial(self._on_listed, name),
            partial(self._on_list_failed, name),
            key=(self._scope, "models", name),  # asked again: only the newest answer counts
            lane="network",
            receiver=self,
            name=f"list the models of {name}",
        )

    def _on_listed(self, name: str, models: list[str]) -> None:
        entry = self._entries.get(name)
        if entry is None:
            return  # removed since
        self._entries[name] = dataclasses.replace(
            entry,
            models=tuple(models),
            status="ok",
            problem="",
            error="",
            fetched_at=time.monotonic(),
        )
        self.changed.emit()

    def _on_list_failed(self, name: str, error: BaseException) -> None:
        entry = self._entries.get(name)
        if entry is None:
            return
        if not isinstance(error, RemoteError | ProviderKeyError):
            log.warning("Listing the models of %s failed", name, exc_info=error)
        self._entries[name] = dataclasses.replace(
            entry,
            status="error",
            problem=problem_of(error),
            error=str(error),
            fetched_at=time.monotonic(),
        )
        self.changed.emit()
