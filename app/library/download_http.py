"""One HTTP attempt at a part of a download: a ``Range`` request that continues a partial file.

``If-Range`` with the part's ETag makes a server whose file changed send it whole (200) rather
than bytes of another version; a 206 is checked against the offset and the size it should
have. Transient failures (connection, timeout, 408, 429, 5xx) raise :class:`RetryableError`
for the manager to back off and try again; the rest raise :class:`DownloadError` with a
message that says what to do. httpx is imported on the first download, not with the app.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.config import private_opener
from app.library import hub, hub_errors
from app.library.download_files import Hashing
from app.library.download_state import (
    DownloadError,
    InsufficientSpaceError,
    Part,
    RetryableError,
)

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RangeRequest:
    """Where a part comes from, and what the attempt reports back to its download.

    ``check`` raises StopRequestedError when the download must stop; ``on_etag`` records a new
    ETag (for the next ``If-Range``); ``on_progress`` runs after each chunk written."""

    client: httpx.Client
    repo_id: str
    revision: str
    endpoint: str | None
    token: hub.Token
    check: Callable[[], None]
    on_etag: Callable[[str], None]
    on_progress: Callable[[], None]


def with_retries(
    what: str,
    attempt: Callable[[], None],
    backoff: Sequence[float],
    *,
    check: Callable[[], None],
    wait: Callable[[str, float], None],
    progress: Callable[[], int] = lambda: 0,
) -> None:
    """Run ``attempt`` until it succeeds, backing off after each transient failure; the count
    starts again whenever an attempt made progress. ``check`` runs before each attempt (it
    raises to stop); ``wait(note, seconds)`` says why and sleeps (waking early to stop)."""
    tries = 0
    while True:
        check()
        before = progress()
        try:
            attempt()
            return
        except RetryableError as e:
            tries = 1 if progress() > before else tries + 1
            if tries > len(backoff):
                raise DownloadError(
                    e.final
                    or f"{what} failed after {tries} tries: {e}. Check your connection, "
                    "then press Retry."
                ) from e
            delay = backoff[tries - 1]
            wait(f"{e}; retrying in {delay:g} s (try {tries + 1} of {len(backoff) + 1})", delay)


def fetch_range(request: RangeRequest, part: Part, path: Path, hashing: Hashing) -> None:
    """Continue ``path`` (whose bytes ``hashing`` has seen) up to ``part.size`` bytes."""
    import httpx
    from huggingface_hub import hf_hub_url

    offset = part.done
    headers = hub.hub_headers(request.token)
    headers["Accept-Encoding"] = "identity"
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if part.etag and not part.etag.startswith("W/"):
            headers["If-Range"] = part.etag
    endpoint = hub.hub_endpoint(request.endpoint)
    url = hf_hub_url(request.repo_id, part.filename, revision=request.revision, endpoint=endpoint)
    try:
        with request.client.stream("GET", url, headers=headers) as response:
            if response.status_code == 416:  # the server's file is shorter than our part
                path.unlink(missing_ok=True)
                hashing.reset()
                part.done = 0
                raise RetryableError("the server could not resume; starting the file again")
            offset = _accept(request, part, response, offset, "authorization" in headers)
            mode = "ab" if offset else "wb"
            if not offset:
                hashing.reset()
                part.done = 0
            # Readable by this user only, like the rest of EMBER_HOME (a 0644 part would not be).
            with open(path, mode, opener=private_opener) as out:
                for chunk in response.iter_raw():
                    request.check()
                    if part.done + len(chunk) > part.size:
                        raise RetryableError("the server sent more bytes than the file has")
                    out.write(chunk)
                    hashing.update(chunk)
                    part.done += len(chunk)
                    request.on_progress()
    except httpx.TimeoutException as e:
        raise RetryableError("the Hub stopped answering") from e
    except httpx.TransportError as e:
        raise RetryableError(f"the connection failed ({e or type(e).__name__})") from e
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise InsufficientSpaceError(
                f"The disk filled up while downloading {part.filename}. Free some space, "
                "then press Retry."
            ) from e
        raise DownloadError(f"Cannot write {path}: {e.strerror or e}") from e
    if part.done < part.size:
        raise RetryableError("the connection closed early")


def _accept(
    request: RangeRequest, part: Part, response: httpx.Response, offset: int, token_sent: bool
) -> int:
    """Check a response; returns the offset its body starts at."""
    status = response.status_code
    if status in (200, 206):
        etag = response.headers.get("ETag")
        if etag and etag != part.etag:
            request.on_etag(etag)
    if status == 206:
        start, total = content_range(response.headers.get("Content-Range"))
        if total is not None and total != part.size:
            raise DownloadError(
                f"{part.filename} changed on the Hub while downloading. Press Retry to start again."
            )
        if start != offset:
            raise RetryableError("the server resumed at the wrong place")
        return offset
    if status == 200:
        if offset:
            log.info("The server sent all of %s again; restarting it", part.filename)
        return 0
    message = http_error(request.repo_id, request.endpoint, response, token_sent)
    if status in (408, 429) or status >= 500:
        raise RetryableError(message)
    raise DownloadError(message)


def http_error(
    repo_id: str, endpoint: str | None, response: httpx.Response, token_sent: bool
) -> str:
    """What a failed file request means for the user, from its status and Hub headers."""
    status = response.status_code
    code = response.headers.get("X-Error-Code")
    if code == "GatedRepo":
        return hub_errors.gated_message(repo_id, hub.hub_endpoint(endpoint), token_sent, status)
    if status in (401, 403):
        if response.headers.get("X-Error-Message") == "Invalid credentials in Authorization header":
            return "The Hub rejected your Hugging Face token (401). Check HF_TOKEN and try again."
        if code == "RepoNotFound":
            hint = (
                "" if token_sent else " If it is private, set HF_TOKEN to a token that can see it."
            )
            return f"There is no repository {repo_id} on the Hub.{hint}"
        if token_sent:
            return f"Your Hugging Face token is not allowed to download from {repo_id} ({status})."
        return f"{repo_id} needs a Hugging Face token ({status}): set HF_TOKEN and try again."
    if status == 404:
        return f"The file is not on the Hub any more ({repo_id}, 404)."
    if status == 429:
        return "the Hub is rate-limiting downloads (429)"
    if status >= 500:
        return f"the Hub answered {status}"
    return f"The Hub answered {status} for a file of {repo_id}."


def content_range(value: str | None) -> tuple[int | None, int | None]:
    """``bytes 100-199/1000`` -> (100, 1000)."""
    if not value or not value.startswith("bytes "):
        return None, None
    span, _, total = value[6:].partition("/")
    start = span.split("-", 1)[0]
    return (int(start) if start.isdigit() else None, int(total) if total.isdigit() else None)
