"""The long-lived objects the window's panes share: settings, chat store, engine, model list,
the model library and its downloads, and the remote providers.

``Services.close()`` is the shutdown order from DESIGN.md: the ``on_close`` callbacks first
(the API server registers its stop there, so no request is left half-served), then background
tasks stop (waiting ones dropped, running disk work waited for briefly, network work abandoned:
app/ui/task_runner.py), then downloads pause (their partial files stay resumable), remote
streams close, the engine worker's jobs are cancelled and it is joined, chats deleted this
session are purged, the database closes. Idempotent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from app.attachments.embedder import Embedders
from app.chats.store import ChatStore
from app.config import Settings, paths
from app.engine.providers import ProviderRegistry, RemoteRouter
from app.engine.residency import Residency
from app.engine.worker import EngineWorker
from app.library.downloads import DownloadManager
from app.library.local import Library
from app.library.user_library import default_library
from app.ui.engine_session import EngineSession
from app.ui.header.model_list import ModelChoices
from app.ui.task_runner import shutdown_tasks, tasks

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Services:
    settings: Settings
    store: ChatStore
    engine: EngineSession
    catalog: ModelChoices
    library: Library
    downloads: DownloadManager
    providers: ProviderRegistry
    router: RemoteRouter
    recovered: int = 0  # answers found interrupted by a crash at start-up
    # Said to the user when the window opens: chats.db was damaged and recovered at start-up.
    history_notice: str = ""
    on_close: list[Callable[[], None]] = field(default_factory=list)
    # the embedders long attached files are searched with (an embedding GGUF stays loaded
    # while it is the user's choice; close() unloads it)
    embedders: Embedders = field(default_factory=Embedders)
    # which models stay loaded (memory budget, time-to-live): the API server's gateway and
    # the status bar's loaded-models menu share it
    residency: Residency = field(init=False)

    def __post_init__(self) -> None:
        if self.embedders.library is None:  # "auto" looks for an embedding GGUF in it
            self.embedders.library = self.library
        self.residency = Residency(self.engine.worker)

    _closed: bool = field(default=False, repr=False)

    def warm_up(self) -> None:
        """Start-up work that can wait until the window is shown (run_gui calls it then): ask
        the OS keyring whether it works, off the GUI thread, so the Providers page need not;
        remove the attached files earlier purges left.
        Importing keyring and its D-Bus backend takes a quarter of a second, which even on
        another thread would hold the GIL while the window is being built."""
        providers = self.providers
        # The network lane: a D-Bus keyring that never answers is abandoned at quit.
        tasks().submit(lambda: providers.secrets, lane="network", name="probe the keyring")
        # Attached files a large purge left for later (a purge at quit removes only a few).
        store = self.store
        tasks().submit(store.remove_unused_attachments, name="remove unused attachments")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        steps: tuple[Callable[[], object], ...] = (
            *reversed(self.on_close),
            shutdown_tasks,  # before what the tasks use (library, providers, store) closes
            self.embedders.close,  # an embedding GGUF's own worker
            self.residency.close,
            self.downloads.shutdown,
            self.router.shutdown,
        )
        for callback in steps:
            try:
                callback()
            except Exception:
                log.exception("Shutting down %r failed", callback)
        self.engine.shutdown()
        try:
            self.store.purge_deleted()
        except Exception:
            log.exception("Purging deleted chats failed")
        self.store.close()


def create_services(worker: EngineWorker | None = None) -> Services:
    """Open everything under EMBER_HOME. Raises ChatStoreError when the history cannot open.

    ``worker``: an engine worker to share (tests); by default the session starts its own.
    Nothing here touches the network or scans a disk: the library scans and the downloads
    restore when their pane asks, on a background thread.
    """
    p = paths().ensure()
    settings = Settings()
    store = ChatStore(p.chats_db)
    recovered = store.recover_interrupted()
    if recovered:
        log.info("Recovered %d answers interrupted by a crash", len(recovered))
    providers = ProviderRegistry()
    router = RemoteRouter(providers)
    engine = EngineSession(settings, worker, router=router)
    library = default_library()
    catalog = ModelChoices(settings, library)
    engine.draft_for = catalog.draft_for
    downloads = DownloadManager(p.models_dir, p.downloads_dir)
    return Services(
        settings,
        store,
        engine,
        catalog,
        library,
        downloads,
        providers,
        router,
        len(recovered),
        store.recovery.message if store.recovery is not None else "",
    )
