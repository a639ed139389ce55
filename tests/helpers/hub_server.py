"""A small fake of the Hugging Face Hub on 127.0.0.1, for tests.

It implements the routes huggingface_hub 2.4 (and Ember) use, with the real Hub's headers:

- ``GET /api/models``: search (``search``, ``author``, ``filter``, ``sort``, ``direction``,
  ``limit``, ``expand``, ``full``), paginated with a ``Link: <...>; rel="next"`` header.
- ``GET /api/models/{repo}[/revision/{rev}]``: repository info; ``blobs=true`` adds each file's
  size, blob id and LFS sha256 (``HfApi.model_info(files_metadata=True)``); ``expand`` selects
  fields.
- ``GET /api/models/{repo}/tree/{rev}[/{path}]``: file listing (``list_repo_tree``).
- ``HEAD|GET /{repo}/resolve/{rev}/{path}``: a file. Small (non-LFS) files are served directly
  with ``ETag`` = git blob sha1. LFS files answer ``302`` to a "CDN" with ``X-Linked-Size``,
  ``X-Linked-Etag`` (the sha256) and ``X-Repo-Commit``, as the real Hub does. The CDN is this same
  server reached as ``localhost`` instead of ``127.0.0.1``: a different origin, so clients must not
  forward the ``Authorization`` header there (httpx drops it; so does huggingface_hub).
- ``HEAD|GET /cdn/{sha256}``: the CDN. Both routes honour ``Range`` (206 + ``Content-Range``, 416)
  and ``If-Range``.

Errors carry the Hub's ``X-Error-Code`` header (``RepoNotFound``, ``GatedRepo``,
``EntryNotFound``, ``RevisionNotFound``) so huggingface_hub raises its specific exceptions. A gated
repository's metadata is public (as on the Hub) but its files need
``Authorization: Bearer <token>``: no token -> 401, a token without access
(``no_access_token``) -> 403, an unknown token -> 401 "Invalid credentials in Authorization
header".

Fault injection: ``fail_next`` (answer N matching requests with a status, optionally after
skipping some: "fail the 3rd request"), ``drop_next`` (cut the connection after N body bytes),
``corrupt`` (serve one flipped byte), ``throttle_bps`` (slow bodies down, so pause/cancel can be
tested), ``latency`` (every answer waits that many seconds first: a slow Hub), ``hold()`` /
``release()`` (answers wait until released: ``held`` counts them, so a test can prove a caller
did not wait for the Hub without timing it). Every request is logged (``requests``,
``body_bytes``) so tests can assert what was asked.

Point huggingface_hub at it by passing ``endpoint=hub.url`` (HfApi, hf_hub_url, hf_hub_download),
or set ``HF_ENDPOINT`` for Ember: Ember reads ``HF_ENDPOINT`` when each call is made, while
huggingface_hub reads it once at import (``constants.ENDPOINT``).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

CHUNK = 64 * 1024
LFS_POINTER_SIZE = 134
HOLD_FAILSAFE = 60.0  # seconds a held request waits for release() before it is answered 504


@dataclass
class FakeFile:
    """One file of a repository: bytes in memory or a path on disk (for the real test model)."""

    content: bytes | Path
    lfs: bool = True
    _sha256: str | None = field(default=None, repr=False)
    _blob_id: str | None = field(default=None, repr=False)

    @property
    def size(self) -> int:
        if isinstance(self.content, bytes):
            return len(self.content)
        return self.content.stat().st_size

    def _chunks(self) -> Iterator[bytes]:
        if isinstance(self.content, bytes):
            yield self.content
            return
        with self.content.open("rb") as f:
            while chunk := f.read(8 * 1024 * 1024):
                yield chunk

    @property
    def sha256(self) -> str:
        if self._sha256 is None:
            h = hashlib.sha256()
            for chunk in self._chunks():
                h.update(chunk)
            self._sha256 = h.hexdigest()
        return self._sha256

    @property
    def blob_id(self) -> str:
        """The git object id: of the LFS pointer for LFS files, of the content otherwise."""
        if self._blob_id is None:
            if self.lfs:
                data = self.pointer().encode()
                h = hashlib.sha1(b"blob %d\0" % len(data) + data)
            else:
                h = hashlib.sha1(b"blob %d\0" % self.size)
                for chunk in self._chunks():
                    h.update(chunk)
            self._blob_id = h.hexdigest()
        return self._blob_id

    def pointer(self) -> str:
        spec = "version https://git-lfs.github.com/spec/v1"
        return f"{spec}\noid sha256:{self.sha256}\nsize {self.size}\n"

    def read(self, start: int, end: int) -> Iterator[bytes]:
        """Bytes [start, end) in chunks."""
        if isinstance(self.content, bytes):
            for i in range(start, end, CHUNK):
                yield self.content[i : min(end, i + CHUNK)]
            return
        with self.content.open("rb") as f:
            f.seek(start)
            pos = start
            while pos < end:
                chunk = f.read(min(CHUNK, end - pos))
                if not chunk:
                    return
                pos += len(chunk)
                yield chunk


def _as_file(name: str, value: FakeFile | bytes | str | Path) -> FakeFile:
    if isinstance(value, FakeFile):
        return value
    if isinstance(value, str):
        return FakeFile(value.encode(), lfs=False)
    return FakeFile(value, lfs=name.endswith((".gguf", ".bin", ".safetensors")))


@dataclass
class FakeRepo:
    """A model repository. ``files`` maps repo paths to contents; ``card`` becomes README.md."""

    repo_id: str
    files: dict[str, Any] = field(default_factory=dict)
    card: str | None = None
    downloads: int = 0
    likes: int = 0
    trending_score: int = 0
    last_modified: str = "2025-01-01T00:00:00.000Z"
    created_at: str = "2024-06-01T00:00:00.000Z"
    tags: list[str] = field(default_factory=lambda: ["gguf"])
    gated: bool | str = False
    private: bool = False
    pipeline_tag: str | None = "text-generation"
    library_name: str | None = None
    gguf: dict[str, Any] | None = None
    sha: str = field(default_factory=lambda: secrets.token_hex(20))

    def __post_init__(self) -> None:
        if self.card is not None:
            self.files.setdefault("README.md", self.card)
        self.files = {name: _as_file(name, v) for name, v in self.files.items()}

    @property
    def author(self) -> str:
        return self.repo_id.split("/")[0]

    def file(self, name: str) -> FakeFile | None:
        f = self.files.get(name)
        return f if isinstance(f, FakeFile) else None


@dataclass
class RequestLog:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    status: int = 0
    body_bytes: int = 0


@dataclass
class _Rule:
    kind: str  # "status" | "drop"
    match: Callable[[str, str], bool]
    times: int
    skip: int = 0
    status: int = 500
    after_bytes: int = 0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.hub._handle(self)

    def do_HEAD(self) -> None:
        self.server.hub._handle(self)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    hub: FakeHub

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.hub._lock:
            self.hub._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.hub._lock:
            self.hub._connections.discard(request)
        super().shutdown_request(request)


class _AbortError(Exception):
    pass


class FakeHub:
    """The fake Hub server. Use as a context manager, or ``start()``/``stop()``."""

    def __init__(
        self,
        repos: Iterable[FakeRepo] = (),
        *,
        token: str = "hf_valid_token",
        no_access_token: str = "hf_no_access_token",
        cdn_host: str = "localhost",
        lfs_redirect: bool = True,
    ) -> None:
        self.repos: dict[str, FakeRepo] = {r.repo_id: r for r in repos}
        self.token = token
        self.no_access_token = no_access_token
        self.cdn_host = cdn_host
        self.lfs_redirect = lfs_redirect
        self.throttle_bps: int | None = None
        self.latency = 0.0  # seconds every answer waits first: a slow Hub
        self.held = 0  # requests waiting for release() (see hold)
        self._open = threading.Event()
        self._open.set()
        self.requests: list[RequestLog] = []
        self._rules: list[_Rule] = []
        self._corrupt: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._closed = False
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle ----------------------------------------------------------------------------------

    def start(self) -> FakeHub:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.hub = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-hub",
            daemon=True,
        )
        self._thread.start()
        return self

    def hold(self) -> None:
        """Answer nothing until :meth:`release`: requests wait at the Hub (``held`` counts them).
        One held past HOLD_FAILSAFE seconds is answered 504, so a caller stuck waiting for it
        fails instead of hanging the test."""
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def stop(self) -> None:
        self._closed = True
        self._open.set()
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(5)
        self._server = None

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "FakeHub is not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # configuration ------------------------------------------------------------------------------

    def add(self, repo: FakeRepo) -> FakeRepo:
        self.repos[repo.repo_id] = repo
        return repo

    @staticmethod
    def _matcher(path_contains: str | None, method: str | None) -> Callable[[str, str], bool]:
        def match(m: str, path: str) -> bool:
            return (method is None or m == method) and (
                path_contains is None or path_contains in path
            )

        return match

    def fail_next(
        self,
        status: int = 500,
        *,
        times: int = 1,
        skip: int = 0,
        path_contains: str | None = None,
        method: str | None = None,
    ) -> None:
        """Answer the next ``times`` matching requests (after ``skip`` of them) with ``status``."""
        with self._lock:
            self._rules.append(
                _Rule("status", self._matcher(path_contains, method), times, skip, status)
            )

    def drop_next(
        self,
        after_bytes: int,
        *,
        times: int = 1,
        skip: int = 0,
        path_contains: str | None = "/cdn/",
    ) -> None:
        """Cut the connection of the next ``times`` matching bodies after ``after_bytes`` bytes."""
        rule = _Rule(
            "drop", self._matcher(path_contains, "GET"), times, skip, after_bytes=after_bytes
        )
        with self._lock:
            self._rules.append(rule)

    def clear_faults(self) -> None:
        with self._lock:
            self._rules.clear()
            self._corrupt.clear()
        self.throttle_bps = None

    def corrupt(self, repo_id: str, filename: str) -> None:
        """Serve ``filename`` with one byte flipped (its advertised sha256 stays the true one)."""
        self._corrupt.add((repo_id, filename))

    # statistics ---------------------------------------------------------------------------------

    def log(
        self, *, path_contains: str | None = None, method: str | None = None
    ) -> list[RequestLog]:
        with self._lock:
            items = list(self.requests)
        return [
            r
            for r in items
            if (path_contains is None or path_contains in r.path)
            and (method is None or r.method == method)
        ]

    def body_bytes(self, path_contains: str | None = None) -> int:
        return sum(r.body_bytes for r in self.log(path_contains=path_contains))

    def reset_log(self) -> None:
        with self._lock:
            self.requests.clear()

    # request handling ---------------------------------------------------------------------------

    def _take_rule(self, kind: str, method: str, path: str) -> _Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.kind != kind or not rule.match(method, path):
                    continue
                if rule.skip > 0:
                    rule.skip -= 1
                    continue
                rule.times -= 1
                if rule.times <= 0:
                    self._rules.remove(rule)
                return rule
        return None

    def _handle(self, h: _Handler) -> None:
        split = urlsplit(h.path)
        raw_segments = split.path.split("/")[1:]
        segments = [unquote(s) for s in raw_segments]
        log = RequestLog(
            method=h.command,
            path=unquote(split.path),
            query=parse_qs(split.query),
            headers={k.lower(): v for k, v in h.headers.items()},
        )
        with self._lock:
            self.requests.append(log)
        if not self._wait_for_release():
            self._error(h, log, 504, None, "The fake Hub was held and never released")
            return
        if self.latency:
            time.sleep(self.latency)
        try:
            rule = self._take_rule("status", h.command, log.path)
            if rule is not None:
                self._error(h, log, rule.status, "InternalError", "Injected failure")
                return
            if self._bad_token(log):
                self._error(h, log, 401, None, "Invalid credentials in Authorization header")
                return
            if segments[:2] == ["api", "models"]:
                self._api_models(h, log, segments[2:])
            elif segments and segments[0] == "cdn" and len(segments) == 2:
                self._cdn(h, log, segments[1])
            elif len(segments) >= 5 and segments[2] == "resolve":
                self._resolve(h, log, "/".join(segments[:2]), segments[3], "/".join(segments[4:]))
            else:
                self._error(h, log, 404, None, "Not found")
        except _AbortError:
            h.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True

    def _bad_token(self, log: RequestLog) -> bool:
        auth = log.headers.get("authorization")
        if not auth:
            return False
        token = auth.removeprefix("Bearer ").strip()
        return token not in (self.token, self.no_access_token)

    def _authorized(self, log: RequestLog) -> bool:
        return log.headers.get("authorization", "") == f"Bearer {self.token}"

    def _send(
        self,
        h: _Handler,
        log: RequestLog,
        status: int,
        body: bytes,
        headers: dict[str, str] | None = None,
    ) -> None:
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        log.status = status
        if h.command != "HEAD":
            h.wfile.write(body)
            log.body_bytes += len(body)

    def _json(
        self, h: _Handler, log: RequestLog, data: Any, headers: dict[str, str] | None = None
    ) -> None:
        all_headers = {"Content-Type": "application/json; charset=utf-8", **(headers or {})}
        self._send(h, log, 200, json.dumps(data).encode(), all_headers)

    def _wait_for_release(self) -> bool:
        if self._open.is_set():
            return True
        with self._lock:
            self.held += 1
        try:
            return self._open.wait(HOLD_FAILSAFE)
        finally:
            with self._lock:
                self.held -= 1

    def _error(
        self, h: _Handler, log: RequestLog, status: int, code: str | None, message: str
    ) -> None:
        headers = {"Content-Type": "application/json; charset=utf-8", "X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._send(h, log, status, json.dumps({"error": message}).encode(), headers)

    def _repo_or_error(self, h: _Handler, log: RequestLog, repo_id: str) -> FakeRepo | None:
        repo = self.repos.get(repo_id)
        if repo is None or (repo.private and not self._authorized(log)):
            self._error(h, log, 401, "RepoNotFound", "Repository not found")
            return None
        return repo

    def _revision_ok(self, h: _Handler, log: RequestLog, repo: FakeRepo, revision: str) -> bool:
        if revision in ("main", repo.sha):
            return True
        self._error(h, log, 404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return False

    # /api/models ---------------------------------------------------------------------------------

    def _api_models(self, h: _Handler, log: RequestLog, rest: list[str]) -> None:
        if not rest:
            self._search(h, log)
            return
        if len(rest) < 2:
            self._error(h, log, 404, None, "Not found")
            return
        repo = self._repo_or_error(h, log, "/".join(rest[:2]))
        if repo is None:
            return
        tail = rest[2:]
        if not tail:
            self._info(h, log, repo)
        elif tail[0] == "revision" and len(tail) == 2:
            if self._revision_ok(h, log, repo, tail[1]):
                self._info(h, log, repo)
        elif tail[0] == "tree" and len(tail) >= 2:
            if self._revision_ok(h, log, repo, tail[1]):
                self._tree(h, log, repo, "/".join(tail[2:]))
        else:
            self._error(h, log, 404, None, "Not found")

    def _model_json(
        self, repo: FakeRepo, fields: set[str] | None, blobs: bool = False
    ) -> dict[str, Any]:
        siblings: list[dict[str, Any]] = []
        for name, f in repo.files.items():
            item: dict[str, Any] = {"rfilename": name}
            if blobs:
                item.update(size=f.size, blobId=f.blob_id)
                if f.lfs:
                    item["lfs"] = {
                        "sha256": f.sha256,
                        "size": f.size,
                        "pointerSize": LFS_POINTER_SIZE,
                    }
            siblings.append(item)
        everything: dict[str, Any] = {
            "author": repo.author,
            "sha": repo.sha,
            "lastModified": repo.last_modified,
            "createdAt": repo.created_at,
            "private": repo.private,
            "disabled": False,
            "gated": repo.gated,
            "downloads": repo.downloads,
            "likes": repo.likes,
            "trendingScore": repo.trending_score,
            "tags": repo.tags,
            "pipeline_tag": repo.pipeline_tag,
            "library_name": repo.library_name,
            "siblings": siblings,
            "spaces": [],
            "usedStorage": sum(f.size for f in repo.files.values()),
            "gguf": repo.gguf,
        }
        data: dict[str, Any] = {
            "_id": hashlib.md5(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id,
        }
        if fields is None:
            data["modelId"] = repo.repo_id
            data.update({k: v for k, v in everything.items() if v is not None})
        else:
            data.update({k: everything.get(k) for k in fields if k in everything})
        return data

    @staticmethod
    def _expand(log: RequestLog) -> set[str] | None:
        values = log.query.get("expand", []) + log.query.get("expand[]", [])
        return set(values) if values else None

    @staticmethod
    def _flag(log: RequestLog, name: str) -> bool:
        return log.query.get(name, ["false"])[-1].lower() in ("1", "true")

    def _info(self, h: _Handler, log: RequestLog, repo: FakeRepo) -> None:
        self._json(
            h, log, self._model_json(repo, self._expand(log), blobs=self._flag(log, "blobs"))
        )

    def _search(self, h: _Handler, log: RequestLog) -> None:
        q = log.query
        search = q.get("search", [""])[-1].lower()
        author = q.get("author", [None])[-1]
        filters = q.get("filter", [])
        repos = [
            r
            for r in self.repos.values()
            if not r.private
            and search in r.repo_id.lower()
            and (author is None or r.author == author)
            and all(f in r.tags or f == r.library_name for f in filters)
        ]
        sort = q.get("sort", [None])[-1]
        keys: dict[str, Callable[[FakeRepo], Any]] = {
            "downloads": lambda r: r.downloads,
            "likes": lambda r: r.likes,
            "trendingScore": lambda r: r.trending_score,
            "lastModified": lambda r: r.last_modified,
            "createdAt": lambda r: r.created_at,
        }
        if sort is not None:
            if sort not in keys:
                self._error(h, log, 400, None, f"Invalid sort: {sort}")
                return
            ascending = q.get("direction", ["-1"])[-1] == "1"
            repos.sort(key=keys[sort], reverse=not ascending)
        limit = min(int(q.get("limit", ["1000"])[-1]), 1000)
        offset = int(q.get("cursor", ["0"])[-1])
        page = repos[offset : offset + limit]
        fields = self._expand(log)
        if fields is None and self._flag(log, "full"):
            fields = {
                "author",
                "sha",
                "lastModified",
                "private",
                "gated",
                "disabled",
                "downloads",
                "likes",
            }
            fields |= {
                "tags",
                "pipeline_tag",
                "library_name",
                "createdAt",
                "siblings",
                "trendingScore",
            }
        elif fields is None:
            fields = {"likes", "trendingScore", "private", "downloads", "tags", "pipeline_tag"}
            fields |= {"library_name", "createdAt"}
        items = [self._model_json(r, fields) for r in page]
        for item in items:
            item.setdefault("modelId", item["id"])
        headers = {}
        if offset + limit < len(repos):
            next_q = {k: v for k, v in q.items() if k != "cursor"}
            next_q["cursor"] = [str(offset + limit)]
            headers["Link"] = f'<{self.url}/api/models?{urlencode(next_q, doseq=True)}>; rel="next"'
        self._json(h, log, items, headers)

    def _tree(self, h: _Handler, log: RequestLog, repo: FakeRepo, path: str) -> None:
        recursive = self._flag(log, "recursive")
        prefix = f"{path.strip('/')}/" if path.strip("/") else ""
        entries: dict[str, dict[str, Any]] = {}
        for name, f in sorted(repo.files.items()):
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix) :]
            parts = rest.split("/")
            for depth in range(1, len(parts)):
                folder = prefix + "/".join(parts[:depth])
                if recursive or depth == 1:
                    oid = hashlib.sha1(folder.encode()).hexdigest()
                    entries.setdefault(folder, {"type": "directory", "oid": oid, "path": folder})
            if recursive or len(parts) == 1:
                item: dict[str, Any] = {
                    "type": "file",
                    "oid": f.blob_id,
                    "size": f.size,
                    "path": name,
                }
                if f.lfs:
                    item["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": LFS_POINTER_SIZE}
                entries[name] = item
        if prefix and not entries:
            self._error(h, log, 404, "EntryNotFound", f"{path} does not exist on main")
            return
        self._json(h, log, list(entries.values()))

    # files --------------------------------------------------------------------------------------

    def _gate(self, h: _Handler, log: RequestLog, repo: FakeRepo) -> bool:
        if not repo.gated or self._authorized(log):
            return True
        if "authorization" in log.headers:
            message = (
                f"Access to model {repo.repo_id} is restricted and you are not in the "
                "authorized list."
            )
            self._error(
                h,
                log,
                403,
                "GatedRepo",
                message + f" Visit {self.url}/{repo.repo_id} to ask for access.",
            )
        else:
            message = (
                f"Access to model {repo.repo_id} is restricted. You must have access to it and be "
                "authenticated to access it. Please log in."
            )
            self._error(h, log, 401, "GatedRepo", message)
        return False

    def _resolve(
        self, h: _Handler, log: RequestLog, repo_id: str, revision: str, filename: str
    ) -> None:
        repo = self._repo_or_error(h, log, repo_id)
        if (
            repo is None
            or not self._revision_ok(h, log, repo, revision)
            or not self._gate(h, log, repo)
        ):
            return
        f = repo.file(filename)
        if f is None:
            self._error(h, log, 404, "EntryNotFound", "Entry not found")
            return
        headers = {"X-Repo-Commit": repo.sha, "Accept-Ranges": "bytes"}
        if not f.lfs:
            self._body(h, log, (repo, filename, f), {**headers, "ETag": f'"{f.blob_id}"'})
            return
        headers.update(
            {
                "X-Linked-Size": str(f.size),
                "X-Linked-Etag": f'"{f.sha256}"',
                "ETag": f'"{f.sha256}"',
            }
        )
        if not self.lfs_redirect:
            self._body(h, log, (repo, filename, f), headers)
            return
        query = urlencode({"repo": repo.repo_id, "file": filename, "sig": secrets.token_hex(8)})
        location = f"http://{self.cdn_host}:{self.port}/cdn/{f.sha256}?{query}"
        self._send(h, log, 302, b"", {**headers, "Location": location})

    def _cdn(self, h: _Handler, log: RequestLog, sha256: str) -> None:
        repo = self.repos.get(log.query.get("repo", [""])[-1])
        filename = log.query.get("file", [""])[-1]
        f = repo.file(filename) if repo is not None else None
        if repo is None or f is None or f.sha256 != sha256:
            self._send(h, log, 404, b"NoSuchKey", {"Content-Type": "text/plain"})
            return
        cdn_headers = {"ETag": f'"{f.sha256}"', "Accept-Ranges": "bytes"}
        self._body(h, log, (repo, filename, f), cdn_headers)

    def _body(
        self,
        h: _Handler,
        log: RequestLog,
        target: tuple[FakeRepo, str, FakeFile],
        headers: dict[str, str],
    ) -> None:
        repo, filename, f = target
        size = f.size
        start, end = 0, size  # [start, end)
        status = 200
        range_header = log.headers.get("range")
        if_range = log.headers.get("if-range")
        if range_header and (if_range is None or if_range == headers.get("ETag")):
            parsed = _parse_range(range_header, size)
            if isinstance(parsed, str):
                self._send(h, log, 416, b"", {**headers, "Content-Range": f"bytes */{size}"})
                return
            if parsed is not None:
                start, end = parsed
                status = 206
                headers = {**headers, "Content-Range": f"bytes {start}-{end - 1}/{size}"}
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(end - start))
        h.end_headers()
        log.status = status
        if h.command == "HEAD":
            return
        drop = self._take_rule("drop", h.command, log.path)
        flip = size // 2 if (repo.repo_id, filename) in self._corrupt else -1
        began = time.monotonic()
        pos = start
        for piece in f.read(start, end):
            if self._closed:
                raise _AbortError
            chunk = piece
            if pos <= flip < pos + len(chunk):
                i = flip - pos
                chunk = chunk[:i] + bytes([chunk[i] ^ 0xFF]) + chunk[i + 1 :]
            if drop is not None and log.body_bytes + len(chunk) > drop.after_bytes:
                h.wfile.write(chunk[: drop.after_bytes - log.body_bytes])
                h.wfile.flush()
                log.body_bytes = drop.after_bytes
                h.connection.shutdown(socket.SHUT_RDWR)
                raise _AbortError
            self._throttled_write(h, log, chunk, began)
            pos += len(chunk)

    def _throttled_write(self, h: _Handler, log: RequestLog, chunk: bytes, began: float) -> None:
        bps = self.throttle_bps
        if not bps:
            h.wfile.write(chunk)
            log.body_bytes += len(chunk)
            return
        step = max(1024, bps // 20)
        for i in range(0, len(chunk), step):
            if self._closed:
                raise _AbortError
            piece = chunk[i : i + step]
            h.wfile.write(piece)
            h.wfile.flush()
            log.body_bytes += len(piece)
            wait = began + log.body_bytes / bps - time.monotonic()
            if wait > 0:
                time.sleep(wait)


def _parse_range(header: str, size: int) -> tuple[int, int] | str | None:
    """``bytes=a-b``, ``bytes=a-`` or ``bytes=-n`` -> [start, end); None to ignore the header."""
    unit, _, spec = header.partition("=")
    if unit.strip() != "bytes" or "," in spec:
        return None
    first, _, last = spec.strip().partition("-")
    try:
        if not first:
            n = int(last)
            return (max(0, size - n), size) if n > 0 else "unsatisfiable"
        start = int(first)
        end = min(size, int(last) + 1) if last else size
    except ValueError:
        return None
    if start >= size or end <= start:
        return "unsatisfiable"
    return start, end


@contextmanager
def serve_hub(repos: Iterable[FakeRepo] = (), **kwargs: Any) -> Iterator[FakeHub]:
    """Run a FakeHub for the duration of a ``with`` block."""
    with FakeHub(repos, **kwargs) as hub:
        yield hub


def resolve_url(hub: FakeHub, repo_id: str, filename: str, revision: str = "main") -> str:
    return f"{hub.url}/{repo_id}/resolve/{quote(revision, safe='')}/{quote(filename)}"


@contextmanager
def fake_hub_env(monkeypatch: Any, tmp_path_factory: Any) -> Iterator[FakeHub]:
    """A FakeHub as ``HF_ENDPOINT`` for this test, with no token anywhere (env, token file,
    subprocesses), so tests see what a user without a Hugging Face login sees."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    import huggingface_hub.constants

    token = tmp_path_factory.mktemp("hf_home") / "token"
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(token))
    monkeypatch.setenv("HF_TOKEN_PATH", str(token))  # for subprocesses
    with FakeHub() as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        yield fake
