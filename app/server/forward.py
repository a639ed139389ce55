"""Ember's API fronts remote providers: a request whose ``model`` is a remote id
(``provider::model``) is forwarded to that provider's OpenAI-compatible server, stream or not,
so an editor needs one endpoint for local and remote models.

The provider already speaks OpenAI's API, so bodies pass through unchanged except ``model``
(the bare name goes upstream; the remote id comes back). Upstream errors keep their status and
OpenAI shape; a provider that cannot be reached is a 502 with a clear message.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.background import BackgroundTask
from starlette.responses import JSONResponse, Response, StreamingResponse

from app.engine.provider_ids import format_remote_id, parse_remote_id
from app.engine.providers import Provider, ProviderRegistry
from app.engine.remote_limits import AnswerTooLargeError, aiter_lines_capped, aread_capped
from app.engine.remote_wire import normalize_base_url
from app.server.errors import APIError, error_body

log = logging.getLogger(__name__)

LIST_TTL = 30.0  # seconds a provider's model list is reused for GET /v1/models
LIST_TIMEOUT = 3.0


class RemoteForwarder:
    """Forwards requests naming ``provider::model``; lists remote models. Event-loop only.

    One HTTP client per event loop (a server run), so connections to a provider are kept alive
    between requests instead of a TCP (and TLS) handshake each time; ``aclose`` ends it.
    """

    def __init__(self, registry: ProviderRegistry | None = None, timeout: float = 600.0) -> None:
        self.registry = registry or ProviderRegistry()
        self._timeout = httpx.Timeout(timeout, connect=10.0)
        self._lists: dict[str, tuple[float, list[str]]] = {}
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = httpx.AsyncClient(timeout=self._timeout)
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the client of the running loop (the server calls this as it stops)."""
        client, self._client = self._client, None
        if client is not None and self._client_loop is asyncio.get_running_loop():
            await client.aclose()

    # -- forwarding -------------------------------------------------------------------------

    def _provider_and_key(self, name: str) -> tuple[Provider, str | None] | None:
        provider = self.registry.find(name)
        return None if provider is None else (provider, self.registry.api_key(provider))

    async def forward(self, path: str, body: dict[str, Any]) -> Response:
        remote = parse_remote_id(str(body.get("model", "")))
        assert remote is not None
        # Reading the key may ask the OS keyring (D-Bus): not on the event loop.
        found = await asyncio.to_thread(self._provider_and_key, remote.provider)
        if found is None:
            raise APIError(
                404,
                f"The model `{body.get('model')}` names the provider `{remote.provider}`, "
                "which is not set up. Add it with `ember providers add` or in Settings.",
                code="model_not_found",
                param="model",
            )
        provider, key = found
        url = normalize_base_url(provider.base_url) + path
        headers = {"Content-Type": "application/json", **provider.headers}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        upstream = {**body, "model": remote.model}
        client = self._http()
        try:
            request = client.build_request("POST", url, json=upstream, headers=headers)
            response = await client.send(request, stream=True)
        except httpx.HTTPError as e:
            raise APIError(
                502,
                f"Can't reach {provider.name} at {provider.base_url} ({type(e).__name__}). "
                "Is the server running?",
                code="provider_unreachable",
                type="server_error",
            ) from None
        remote_id = format_remote_id(remote.provider, remote.model)
        if response.status_code >= 400:
            try:
                content = await aread_capped(response, provider.name)  # its first MB
            finally:
                await response.aclose()
            return _upstream_error(response.status_code, content, provider.name, response)
        if "text/event-stream" in response.headers.get("content-type", ""):
            return StreamingResponse(
                _relabel_stream(aiter_lines_capped(response, provider.name), remote_id),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
                background=BackgroundTask(response.aclose),
            )
        try:
            data = json.loads(await aread_capped(response, provider.name))
        except AnswerTooLargeError as e:
            raise APIError(502, str(e), code="upstream_too_large", type="server_error") from None
        except httpx.HTTPError as e:
            raise APIError(
                502,
                f"{provider.name} stopped answering mid-answer ({type(e).__name__}).",
                code="provider_unreachable",
                type="server_error",
            ) from None
        except (ValueError, RecursionError):
            raise APIError(
                502,
                f"{provider.name} answered with something that is not JSON.",
                code="bad_upstream",
                type="server_error",
            ) from None
        finally:
            await response.aclose()
        if isinstance(data, dict) and "model" in data:
            data["model"] = remote_id
        return JSONResponse(data)

    # -- listing ----------------------------------------------------------------------------

    async def models(self) -> list[dict[str, Any]]:
        """Model objects for every provider's models (cached briefly; unreachable ones skipped)."""
        providers = await asyncio.to_thread(self.registry.list)
        lists = await asyncio.gather(*(self._list(p.name) for p in providers))
        out: list[dict[str, Any]] = []
        for provider, names in zip(providers, lists, strict=True):
            for name in names:
                out.append(
                    {
                        "id": format_remote_id(provider.name, name),
                        "object": "model",
                        "created": 0,
                        "owned_by": provider.name,
                        "state": "remote",
                        "capabilities": ["completion"],
                    }
                )
        return out

    async def _list(self, name: str) -> list[str]:
        cached = self._lists.get(name)
        if cached and time.monotonic() - cached[0] < LIST_TTL:
            return cached[1]
        try:
            engine = await asyncio.to_thread(self.registry.engine, name, timeout=LIST_TIMEOUT)
            try:
                names = await asyncio.to_thread(engine.list_models)
            finally:
                await asyncio.to_thread(engine.shutdown)
        except Exception as e:  # one provider being down must not break /v1/models
            log.info("Provider %s did not list its models: %s", name, e)
            names = []
        self._lists[name] = (time.monotonic(), names)
        return names


async def _relabel_stream(lines: AsyncIterator[str], remote_id: str) -> AsyncIterator[bytes]:
    """Pass SSE through, putting the remote id in each chunk's ``model``. A line longer than
    the limit ends the stream with an OpenAI-shaped error event."""
    try:
        async for line in lines:
            yield _relabel_line(line, remote_id)
    except AnswerTooLargeError as e:
        error = error_body(str(e), "server_error", None, "upstream_too_large")
        yield f"data: {json.dumps(error)}\n\n".encode()


def _relabel_line(raw: str, remote_id: str) -> bytes:
    line = raw
    if line.startswith("data:"):
        payload = line[5:].strip()
        if payload and payload != "[DONE]":
            try:
                chunk = json.loads(payload)
            except (ValueError, RecursionError):
                chunk = None
            if isinstance(chunk, dict) and "model" in chunk:
                chunk["model"] = remote_id
                line = "data: " + json.dumps(chunk, separators=(",", ":"))
    return (line + "\n").encode()


def _upstream_error(
    status: int, content: bytes, provider: str, response: httpx.Response
) -> Response:
    """Keep the provider's OpenAI-shaped error; wrap anything else in that shape."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    headers = {}
    if "retry-after" in response.headers:
        headers["Retry-After"] = response.headers["retry-after"]
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        err = data["error"]
        err.setdefault("type", kind)
        err.setdefault("param", None)
        err.setdefault("code", None)
        return JSONResponse({"error": err}, status_code=status, headers=headers)
    text = content.decode("utf-8", errors="replace").strip()[:500] or response.reason_phrase
    return APIError(
        status, f"{provider} answered {status}: {text}", type=kind, headers=headers
    ).response()
