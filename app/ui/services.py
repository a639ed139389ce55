"""The long-lived objects the window's panes share: settings, chat store, engine, model list.

``Services.close()`` is the shutdown order from DESIGN.md (minus the server, owned elsewhere):
cancel jobs, unload and join the engine worker, purge chats deleted this session, close the
database. Idempotent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from app.chats.store import ChatStore
from app.config import Settings, paths
from app.engine.worker import EngineWorker
from app.ui.engine_session import EngineSession
from app.ui.header.model_list import ModelCatalog

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Services:
    settings: Settings
    store: ChatStore
    engine: EngineSession
    catalog: ModelCatalog
    recovered: int = 0  # answers found interrupted by a crash at start-up
    _closed: bool = field(default=False, repr=False)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.engine.shutdown()
        try:
            self.store.purge_deleted()
        except Exception:
            log.exception("Purging deleted chats failed")
        self.store.close()


def create_services(worker: EngineWorker | None = None) -> Services:
    """Open everything under EMBER_HOME. Raises ChatStoreError when the history cannot open.

    ``worker``: an engine worker to share (tests); by default the session starts its own.
    """
    p = paths().ensure()
    settings = Settings()
    store = ChatStore(p.chats_db)
    recovered = store.recover_interrupted()
    if recovered:
        log.info("Recovered %d answers interrupted by a crash", len(recovered))
    engine = EngineSession(settings, worker)
    catalog = ModelCatalog(settings)
    return Services(settings, store, engine, catalog, len(recovered))
