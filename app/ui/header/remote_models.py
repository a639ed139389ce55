"""The models remote providers serve, for the model picker and the chat settings.

``RemoteCatalog`` keeps, per provider, the models it served the last time it was asked (or why
it could not be asked). ``refresh()`` re-reads the provider list and asks every provider whose
answer is older than ``max_age`` again. Each provider is asked on a thread of its own, so one
that is down (a few seconds of connect timeout) never delays the others, the menu or the
global thread pool; answers come back to the GUI thread as queued signals.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from PySide6.QtCore import QObject, Qt, Signal, Slot

from app.engine.providers import Provider, ProviderKeyError, RemoteRouter
from app.engine.remote import (
    RemoteAuthError,
    RemoteError,
    RemoteTimeoutError,
    RemoteUnreachableError,
)
from app.ui.tasks import run_in_background

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
    _listed = Signal(str, int, object, object)  # name, generation, models, error (any thread)

    def __init__(self, router: RemoteRouter, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.router = router
        self._entries: dict[str, ProviderModels] = {}
        self._generation: dict[str, int] = {}
        self._reading = False
        self._again: float | None = None  # a refresh asked for while the list was being read
        self.loaded = False  # the provider list has been read at least once
        self._listed.connect(self._on_listed, Qt.ConnectionType.QueuedConnection)

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
        if self._reading:
            self._again = max_age if self._again is None else min(self._again, max_age)
            return
        self._reading = True
        registry = self.router.registry
        run_in_background(
            registry.list, lambda result, error: self._on_read(result, error, max_age), self
        )

    def _on_read(self, result: object, error: BaseException | None, max_age: float) -> None:
        self._reading = False
        if error is not None or not isinstance(result, list):
            log.warning("Reading the providers failed: %s", error)
        else:
            self._apply(result, max_age)
        if self._again is not None:
            again, self._again = self._again, None
            self.refresh(again)

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
        generation = self._generation.get(provider.name, 0) + 1
        self._generation[provider.name] = generation
        thread = threading.Thread(
            target=self._list_models,
            args=(provider.name, generation),
            name=f"ember-models-{provider.name}",
            daemon=True,
        )
        thread.start()

    def _list_models(self, name: str, generation: int) -> None:  # its own thread
        try:
            models: list[str] | None = self.router.engine(name).list_models()
            error: BaseException | None = None
        except Exception as e:
            models, error = None, e
        with contextlib.suppress(RuntimeError):  # the catalog is gone (the app is closing)
            self._listed.emit(name, generation, models, error)

    @Slot(str, int, object, object)
    def _on_listed(
        self, name: str, generation: int, models: list[str] | None, error: BaseException | None
    ) -> None:
        entry = self._entries.get(name)
        if entry is None or self._generation.get(name) != generation:
            return  # removed or asked again since
        now = time.monotonic()
        if error is not None or models is None:
            if not isinstance(error, RemoteError | ProviderKeyError):
                log.warning("Listing the models of %s failed", name, exc_info=error)
            self._entries[name] = dataclasses.replace(
                entry,
                status="error",
                problem=problem_of(error) if error else "Not available",
                error=str(error),
                fetched_at=now,
            )
        else:
            self._entries[name] = dataclasses.replace(
                entry, models=tuple(models), status="ok", problem="", error="", fetched_at=now
            )
        self.changed.emit()
