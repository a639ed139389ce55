"""Ollama's model management on Ember's library: ``/api/pull`` (from the Hugging Face Hub,
through Ember's resumable, verified downloader), ``/api/delete`` and ``/api/copy`` (an alias).

A pull streams Ollama's progress objects: ``pulling manifest``, ``pulling <digest>`` with
``total``/``completed`` bytes, ``verifying sha256 digest``, ``writing manifest``, ``success``.
What is wrong before the download starts (not a Hub name, no such repository or quantization)
is a 4xx; a failure later is an ``{"error": ...}`` line. A client that goes away pauses the
download: the same pull (or ``ember pull``) resumes it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

from app.server.catalog import (
    CatalogError,
    LibraryCatalog,
    ModelCatalog,
    check_deletable,
    delete,
    refresh,
)
from app.server.errors import APIError
from app.server.gateway import Gateway
from app.server.names import DEFAULT_TAG, HF_PREFIX, alias_store, check_name, normalize
from app.server.ollama.common import (
    NDJSONResponse,
    OllamaRoute,
    gateway_of,
    lookup,
    not_found,
    parse,
    require_model_name,
    unload,
)
from app.server.ollama.schemas import CopyBody, ModelBody, PullBody
from app.server.ollama.shapes import line

router = APIRouter(route_class=OllamaRoute)


# ---- pull -----------------------------------------------------------------------------------


def hub_spec(name: str) -> tuple[str, str | None]:
    """``hf.co/OWNER/REPO[:QUANT]`` -> (``OWNER/REPO``, ``QUANT`` or None); a 400 otherwise."""
    from app.library.hub import validate_repo_id
    from app.library.hub_errors import UnsafeNameError

    normalized = normalize(name)
    if not normalized.startswith(HF_PREFIX):
        raise APIError(
            400,
            f"Ember pulls models from Hugging Face, not from Ollama's library: name it "
            f"hf.co/OWNER/REPO[:QUANT] (e.g. hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M), "
            f"not {name!r}.",
        )
    rest = name.strip().split("/", 1)[1]  # as written: repository ids keep their case
    repo_id, _, tag = rest.partition(":")
    try:
        validate_repo_id(repo_id)
    except UnsafeNameError as e:
        raise APIError(400, str(e)) from None
    return repo_id, (None if not tag or tag.lower() == DEFAULT_TAG else tag)


def _library_dirs(catalog: ModelCatalog) -> tuple[Path, Path]:
    from app.config import paths

    p = paths()
    for inner in getattr(catalog, "catalogs", (catalog,)):
        if isinstance(inner, LibraryCatalog):
            return inner.library.models_dir, p.downloads_dir
    return p.models_dir, p.downloads_dir


def _choose(repo_id: str, selector: str | None) -> Any:
    """The model file a pull means (reads the Hub: off the event loop)."""
    from app.library import hub
    from app.library.hub_errors import HubError, RepoNotFoundError

    try:
        return hub.list_gguf_files(repo_id, "main").select(selector)
    except RepoNotFoundError as e:
        raise APIError(404, f"pull model manifest: {e}") from None
    except LookupError as e:
        raise APIError(404, f"pull model manifest: {e}") from None
    except HubError as e:
        raise APIError(502, f"pull model manifest: {e}") from None


@router.post("/api/pull", response_model=None)
async def pull(request: Request) -> Response:
    body, note = await parse(request, PullBody)
    require_model_name(body.model)
    note.model = body.model
    repo_id, selector = hub_spec(body.model)
    model_file = await asyncio.to_thread(_choose, repo_id, selector)
    pulling = _Pull(gateway_of(request), repo_id, model_file)
    if body.stream is False:
        final: dict[str, Any] = {}
        async with contextlib.aclosing(pulling.run()) as objs:
            async for obj in objs:
                final = obj
        if "error" in final:
            note.error = final["error"]
            return JSONResponse(final, status_code=500)
        return JSONResponse(final)
    return NDJSONResponse(_lines(pulling, note), pulling.stop)


async def _lines(pulling: _Pull, note: Any) -> AsyncIterator[bytes]:
    async with contextlib.aclosing(pulling.run()) as objs:  # its manager shuts down with us
        async for obj in objs:
            if "error" in obj:
                note.error = obj["error"]
            yield line(obj)


class _Pull:
    """One pull: a DownloadManager of its own whose events come to the event loop."""

    def __init__(self, gateway: Gateway, repo_id: str, model_file: Any) -> None:
        self.gateway, self.repo_id, self.model_file = gateway, repo_id, model_file
        self.loop = asyncio.get_running_loop()
        self.events: asyncio.Queue[Any] = asyncio.Queue()
        self.download_id: str | None = None
        self.manager: Any = None
        self.finished = False

    def stop(self) -> None:
        """The client went away (on the event loop): pause, so the next pull resumes."""
        if self.manager is not None and self.download_id is not None and not self.finished:
            with contextlib.suppress(Exception):
                self.manager.pause(self.download_id)
        self.events.put_nowait(None)  # the answer ends

    def _on_event(self, event: Any) -> None:
        d = event.download
        if d.repo_id == self.repo_id and self.model_file.filename in d.filenames:
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.events.put_nowait, d)

    async def run(self) -> AsyncGenerator[dict[str, Any], None]:
        from app.library.download_state import DownloadState
        from app.library.downloads import DownloadManager

        yield {"status": "pulling manifest"}
        models_dir, downloads_dir = _library_dirs(self.gateway.catalog)
        manager = DownloadManager(models_dir, downloads_dir, max_concurrent=1)
        self.manager = manager
        try:
            installed = await asyncio.to_thread(
                manager.installed_path, self.repo_id, self.model_file
            )
            if installed is None:
                manager.subscribe(self._on_event)
                await asyncio.to_thread(manager.restore, False)  # resume a partial pull
                d = manager.start(self.repo_id, self.model_file, "main")
                self.download_id = d.id
                if d.state == DownloadState.PAUSED:
                    manager.resume(d.id)
                async for obj in self._progress(DownloadState):
                    yield obj
                    if "error" in obj:
                        return
            self.finished = True
            refresh(self.gateway.catalog)
            yield {"status": "writing manifest"}
            yield {"status": "success"}
        finally:
            await asyncio.to_thread(manager.shutdown)

    async def _progress(self, states: Any) -> AsyncGenerator[dict[str, Any], None]:
        sha = self.model_file.parts[0].sha256 or ""
        digest = f"sha256:{sha}"
        verifying = False
        while True:
            d = await self.events.get()
            if d is None:
                yield {"error": "The pull was stopped; pull the model again to resume it."}
                return
            if d.state == states.COMPLETED:
                if not verifying:
                    yield {"status": "verifying sha256 digest"}
                return
            if d.state in (states.FAILED, states.CANCELLED):
                self.finished = True
                yield {"error": d.error or f"The download was {d.state.value}."}
                return
            if d.state == states.VERIFYING and not verifying:
                verifying = True
                yield {"status": "verifying sha256 digest"}
            elif d.total_bytes and not verifying:
                yield {
                    "status": f"pulling {sha[:12]}",
                    "digest": digest,
                    "total": d.total_bytes,
                    "completed": d.done_bytes,
                }


# ---- delete and copy ------------------------------------------------------------------------


@router.delete("/api/delete", response_model=None)
async def delete_model(request: Request) -> Response:
    body, note = await parse(request, ModelBody)
    require_model_name(body.model)
    note.model = body.model
    gateway = gateway_of(request)
    aliases = alias_store()
    if await asyncio.to_thread(aliases.remove, body.model):
        return Response(status_code=200)
    found = await asyncio.to_thread(lookup, gateway, body.model)
    if found is None:
        raise not_found(body.model)
    try:
        await asyncio.to_thread(check_deletable, gateway.catalog, found.entry.id)
        if found.loaded is not None:
            await unload(gateway, found.loaded.model_id)
        hidden = await asyncio.to_thread(delete, gateway.catalog, found.entry.id)
    except CatalogError as e:
        raise APIError(400, f"Cannot delete {body.model}: {e}") from None
    await asyncio.to_thread(aliases.remove_target, found.entry.id)
    if hidden is not None:  # another app's files: hidden from Ember, never deleted
        return JSONResponse({"status": "hidden", "message": hidden})
    return Response(status_code=200)


@router.post("/api/copy", response_model=None)
async def copy_model(request: Request) -> Response:
    body, note = await parse(request, CopyBody)
    require_model_name(body.source)
    note.model = body.source
    try:
        destination = check_name(body.destination)
    except ValueError as e:
        raise APIError(400, f"Invalid 'destination': {e}.") from None
    gateway = gateway_of(request)
    found = await asyncio.to_thread(lookup, gateway, body.source)
    if found is None:
        raise not_found(body.source)
    taken = await asyncio.to_thread(lookup, gateway, destination)
    if taken is not None and normalize(taken.name) == normalize(destination):
        if taken.entry.id == found.entry.id:
            return Response(status_code=200)
        raise APIError(
            400,
            f"{destination!r} already names another model; choose another name, or delete "
            "that one first.",
        )
    await asyncio.to_thread(alias_store().add, destination, found.entry.id)
    return Response(status_code=200)
