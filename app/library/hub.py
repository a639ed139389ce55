"""The Hugging Face Hub side of the library: find GGUF repositories, list their files, read a
remote model's header (whether it fits is :mod:`app.engine.sizing`'s to say). No Qt; every
function is synchronous and meant to run on a worker thread.

Endpoint and token: each function takes ``endpoint=`` and ``token=``. By default ``HF_ENDPOINT``
is read when the call is made (huggingface_hub reads it only once, at import, into
``constants.ENDPOINT``; Ember passes the endpoint explicitly so a changed variable, or a test's
local Hub, is always honoured) and the token is huggingface_hub's own (``HF_TOKEN`` or the token
saved by ``hf auth login``). ``token=False`` sends none.

Errors: everything the Hub or the network can do wrong is raised as a :class:`HubError`
subclass whose message says what happened and what to do. A remote file that is not GGUF
raises :class:`app.engine.gguf.GGUFError` (a ``ValueError``) from :func:`fetch_header`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Final, Literal

from huggingface_hub import constants

from app.engine.gguf import GGUFInfo, parse_gguf_bytes
from app.engine.gguf_format import human_bytes
from app.engine.gguf_reader import GGUFNeedMoreData
from app.library.hub_errors import (
    HeaderTooLargeError,
    HubResponseError,
    UnsafeNameError,
    hub_errors,
)
from app.library.quant import (
    is_projector,
    model_stem,
    params_label,
    parse_param_hint,
    parse_quant,
    preferred_quant,
    quant_sort_key,
    split_name,
)

if TYPE_CHECKING:
    from huggingface_hub import HfApi, ModelInfo

__all__ = [
    "HEADER_INITIAL",
    "HEADER_MAX",
    "ModelFile",
    "RemoteFile",
    "RepoFiles",
    "RepoIndex",
    "RepoSummary",
    "Sort",
    "Token",
    "fetch_header",
    "group_gguf_files",
    "hub_endpoint",
    "hub_headers",
    "is_safe_repo_path",
    "list_gguf_files",
    "model_card",
    "repo_index",
    "safe_repo_path",
    "search_models",
    "strip_front_matter",
    "validate_repo_id",
]

# huggingface_hub's client side (HfApi, its HTTP session and errors, httpx2) takes about half a
# second to import: it is imported by the functions that talk to the Hub, so the app's window
# and the commands that never go online do not pay for it (tests/test_imports.py).

Sort = Literal["downloads", "likes", "trending", "updated"]
Token = str | bool | None

_SORT_FIELDS: Final[dict[str, str]] = {
    "downloads": "downloads",
    "likes": "likes",
    "trending": "trendingScore",
    "updated": "lastModified",
}
_SEARCH_EXPAND: Final = (
    "author",
    "downloads",
    "likes",
    "lastModified",
    "createdAt",
    "tags",
    "trendingScore",
    "gguf",
    "gated",
    "pipeline_tag",
)
_TIMEOUT: Final = 20.0
HEADER_INITIAL: Final = 256 * 1024
HEADER_MAX: Final = 64 * 1024 * 1024

_REPO_PART_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_DRIVE_RE: Final = re.compile(r"^[A-Za-z]:")


# --- names ---------------------------------------------------------------------------------


def validate_repo_id(repo_id: str) -> str:
    """``owner/name`` with the Hub's characters; raises :class:`UnsafeNameError` otherwise."""
    parts = repo_id.split("/") if isinstance(repo_id, str) else []
    if len(parts) != 2 or not all(_REPO_PART_RE.match(p) and ".." not in p for p in parts):
        raise UnsafeNameError(
            f"{repo_id!r} is not a Hugging Face repository id; it looks like owner/model-name"
        )
    return repo_id


def safe_repo_path(filename: str) -> PurePosixPath:
    """A file path from the Hub as a relative path that cannot leave its directory.

    Rejects absolute paths, ``..`` and ``.`` segments, empty segments, backslashes, drive
    letters, NUL and control characters. Raises :class:`UnsafeNameError`.
    """
    bad = (
        not isinstance(filename, str)
        or not filename
        or filename.startswith("/")
        or "\\" in filename
        or _DRIVE_RE.match(filename) is not None
        or any(ord(c) < 32 or c == "\x7f" for c in filename)
        or any(part in ("", ".", "..") for part in filename.split("/"))
        or len(filename) > 1024
    )
    if bad:
        raise UnsafeNameError(
            f"Refusing the file name {filename!r}: it could write outside the models folder"
        )
    return PurePosixPath(filename)


def is_safe_repo_path(filename: str) -> bool:
    try:
        safe_repo_path(filename)
    except UnsafeNameError:
        return False
    return True


# --- endpoint, token -----------------------------------------------------------------------


def hub_endpoint(endpoint: str | None = None) -> str:
    """The Hub to talk to: ``endpoint``, else ``HF_ENDPOINT`` now, else huggingface_hub's."""
    return (endpoint or os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def hub_headers(token: Token = None) -> dict[str, str]:
    """huggingface_hub's headers (user agent, ``Authorization`` from ``HF_TOKEN``/login)."""
    from huggingface_hub.utils import build_hf_headers

    return dict(build_hf_headers(token=token))


def _api(endpoint: str, token: Token) -> HfApi:
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint, token=token, library_name="ember")


# --- search --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RepoSummary:
    """One search result. ``params``: "7B"-style hint (from the Hub's GGUF data or the name)."""

    id: str
    author: str | None
    downloads: int
    likes: int
    trending_score: int
    last_modified: datetime | None
    created_at: datetime | None
    tags: tuple[str, ...]
    gated: bool
    params: str | None
    params_billions: float | None
    pipeline_tag: str | None

    @property
    def name(self) -> str:
        return self.id.split("/", 1)[-1]


def _summary(info: ModelInfo) -> RepoSummary:
    billions: float | None = None
    label: str | None = None
    total = (info.gguf or {}).get("total") if isinstance(info.gguf, dict) else None
    if isinstance(total, int) and total > 0:
        billions, label = total / 1e9, params_label(total)
    hint = parse_param_hint(info.id.split("/", 1)[-1])
    if hint is None:
        hint = next((h for h in map(parse_param_hint, info.tags or ()) if h is not None), None)
    if hint is not None:
        label = hint.label.upper().replace("X", "x")
        billions = billions if billions is not None else hint.billions
    return RepoSummary(
        id=info.id,
        author=info.author or info.id.split("/", 1)[0],
        downloads=info.downloads or 0,
        likes=info.likes or 0,
        trending_score=info.trending_score or 0,
        last_modified=info.last_modified,
        created_at=info.created_at,
        tags=tuple(info.tags or ()),
        gated=bool(info.gated),
        params=label,
        params_billions=billions,
        pipeline_tag=info.pipeline_tag,
    )


def search_models(  # noqa: PLR0917 - the documented signature
    query: str = "",
    sort: Sort = "downloads",
    author: str | None = None,
    min_params: float | None = None,
    max_params: float | None = None,
    limit: int = 50,
    *,
    endpoint: str | None = None,
    token: Token = None,
    timeout: float = _TIMEOUT,
) -> list[RepoSummary]:
    """GGUF model repositories matching ``query``, best first by ``sort``.

    ``min_params``/``max_params`` are in billions of parameters and filter on the Hub's GGUF
    parameter count or, failing that, the size in the name ("7B"); repositories whose size is
    unknown are left out when a bound is given. One request (the same ``GET /api/models`` as
    ``HfApi.list_models``, made directly so an unreachable Hub fails at once instead of after
    huggingface_hub's 23 s of connection retries).
    """
    from huggingface_hub import ModelInfo
    from huggingface_hub.utils import get_session, hf_raise_for_status

    if sort not in _SORT_FIELDS:
        raise ValueError(f"sort must be one of {', '.join(_SORT_FIELDS)}, not {sort!r}")
    base = hub_endpoint(endpoint)
    filtering = min_params is not None or max_params is not None
    params: dict[str, Any] = {
        "filter": "gguf",
        "sort": _SORT_FIELDS[sort],
        "limit": max(1, min(1000, limit * 4 if filtering else limit)),
        "expand": list(_SEARCH_EXPAND),
    }
    if query.strip():
        params["search"] = query.strip()
    if author:
        params["author"] = author
    with hub_errors(base, author or "the search"):
        response = get_session().get(
            f"{base}/api/models", params=params, headers=hub_headers(token), timeout=timeout
        )
        hf_raise_for_status(response)
        items = response.json()
    if not isinstance(items, list):
        raise HubResponseError(f"The Hub at {base} answered the search with something unexpected.")
    results = []
    for item in items:
        try:
            summary = _summary(ModelInfo(**item))
        except (TypeError, KeyError, ValueError):  # an entry in a shape we do not know
            continue
        if filtering:
            b = summary.params_billions
            if b is None or (min_params is not None and b < min_params):
                continue
            if max_params is not None and b > max_params:
                continue
        results.append(summary)
    return results[:limit]


# --- repository files ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """A file in a repository: size and, for LFS files (every GGUF), the sha256 to verify."""

    filename: str
    size: int
    sha256: str | None
    blob_id: str | None


@dataclass(frozen=True, slots=True)
class RepoIndex:
    """Every file of a repository at one commit (``commit`` pins downloads to it)."""

    repo_id: str
    revision: str
    commit: str | None
    gated: bool
    files: dict[str, RemoteFile]


@dataclass(frozen=True, slots=True)
class ModelFile:
    """One downloadable model: a single ``.gguf`` or all parts of a split one, in order."""

    name: str
    quant: str | None
    parts: tuple[RemoteFile, ...]
    split_count: int = 1

    @property
    def filename(self) -> str:
        """The first (or only) file: the one llama.cpp loads."""
        return self.parts[0].filename

    @property
    def filenames(self) -> tuple[str, ...]:
        return tuple(p.filename for p in self.parts)

    @property
    def size(self) -> int:
        return sum(p.size for p in self.parts)

    @property
    def is_split(self) -> bool:
        return self.split_count > 1

    @property
    def is_complete(self) -> bool:
        return len(self.parts) == self.split_count


@dataclass(frozen=True, slots=True)
class RepoFiles:
    """A repository's GGUF files: models sorted small to large, and its vision projectors."""

    repo_id: str
    revision: str
    commit: str | None
    gated: bool
    models: tuple[ModelFile, ...]
    projectors: tuple[RemoteFile, ...]

    def by_quant(self) -> dict[str, list[ModelFile]]:
        """Models grouped by quantization, in size order; "other" for unrecognised names."""
        groups: dict[str, list[ModelFile]] = {}
        for model in self.models:
            groups.setdefault(model.quant or "other", []).append(model)
        return groups

    def select(self, spec: str | None = None) -> ModelFile:
        """The model a user means by ``spec``: a file name (any part), a model name, a
        quantization ("Q4_K_M", case-insensitive) or None for the default (Q4_K_M if present).
        Raises LookupError naming the choices when nothing or more than one thing matches."""
        if not self.models:
            raise LookupError(f"{self.repo_id} has no GGUF model files.")
        if spec is None:
            quant = preferred_quant(m.quant for m in self.models)
            candidates = [m for m in self.models if m.quant == quant] or list(self.models)
            return candidates[0]
        exact = [m for m in self.models if spec in m.filenames or spec == m.name]
        if exact:
            return exact[0]
        by_quant = [m for m in self.models if m.quant and m.quant.lower() == spec.lower()]
        if len(by_quant) == 1:
            return by_quant[0]
        choices = ", ".join(m.filename for m in (by_quant or list(self.models)))
        if by_quant:
            raise LookupError(
                f"{self.repo_id} has several {spec.upper()} files; name one: {choices}"
            )
        raise LookupError(
            f"{self.repo_id} has no file or quantization {spec!r}. Choose from: {choices}"
        )


def repo_index(
    repo_id: str,
    revision: str = "main",
    *,
    endpoint: str | None = None,
    token: Token = None,
    timeout: float = _TIMEOUT,
) -> RepoIndex:
    """Every file of ``repo_id`` with sizes and LFS sha256 (``model_info(files_metadata=True)``)."""
    validate_repo_id(repo_id)
    base = hub_endpoint(endpoint)
    with hub_errors(base, repo_id):
        info = _api(base, token).model_info(
            repo_id, revision=revision, files_metadata=True, timeout=timeout
        )
    files: dict[str, RemoteFile] = {}
    for sibling in info.siblings or ():
        files[sibling.rfilename] = RemoteFile(
            filename=sibling.rfilename,
            size=sibling.size or 0,
            sha256=sibling.lfs.sha256 if sibling.lfs else None,
            blob_id=sibling.blob_id,
        )
    return RepoIndex(repo_id, revision, info.sha, bool(info.gated), files)


def group_gguf_files(files: Sequence[RemoteFile]) -> tuple[list[ModelFile], list[RemoteFile]]:
    """(models, projectors) from a repository's files. Split parts become one model; names that
    could escape a folder are dropped."""
    singles: list[ModelFile] = []
    splits: dict[tuple[str, str, int], list[tuple[int, RemoteFile]]] = {}
    projectors: list[RemoteFile] = []
    for f in files:
        if not f.filename.lower().endswith(".gguf") or not is_safe_repo_path(f.filename):
            continue
        if is_projector(f.filename):
            projectors.append(f)
            continue
        split = split_name(f.filename)
        if split is None:
            singles.append(ModelFile(model_stem(f.filename), parse_quant(f.filename), (f,)))
            continue
        folder = f.filename.rsplit("/", 1)[0] if "/" in f.filename else ""
        splits.setdefault((folder, split.base, split.count), []).append((split.index, f))
    for (folder, base, count), parts in splits.items():
        ordered = tuple(f for _, f in sorted(parts, key=lambda item: item[0]))
        quant = parse_quant(base) or parse_quant(folder)
        singles.append(ModelFile(base, quant, ordered, split_count=count))
    singles.sort(key=lambda m: (quant_sort_key(m.quant), m.filename.lower()))
    projectors.sort(key=lambda f: (quant_sort_key(parse_quant(f.filename)), f.filename.lower()))
    return singles, projectors


def list_gguf_files(
    repo_id: str,
    revision: str = "main",
    *,
    endpoint: str | None = None,
    token: Token = None,
    timeout: float = _TIMEOUT,
) -> RepoFiles:
    """The GGUF models of a repository grouped for choosing: see :class:`RepoFiles`."""
    index = repo_index(repo_id, revision, endpoint=endpoint, token=token, timeout=timeout)
    models, projectors = group_gguf_files(list(index.files.values()))
    return RepoFiles(repo_id, revision, index.commit, index.gated, tuple(models), tuple(projectors))


# --- model card ----------------------------------------------------------------------------

_FRONT_MATTER_RE: Final = re.compile(r"\A\ufeff?---[ \t]*\r?\n.*?\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)


def strip_front_matter(text: str) -> str:
    """Markdown without its leading YAML block (``---`` ... ``---``)."""
    return _FRONT_MATTER_RE.sub("", text, count=1).lstrip("\r\n")


def model_card(
    repo_id: str,
    revision: str = "main",
    *,
    endpoint: str | None = None,
    token: Token = None,
    timeout: float = _TIMEOUT,
) -> str:
    """The repository's README.md as Markdown, without front matter ("" when there is none)."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import get_session, hf_raise_for_status

    validate_repo_id(repo_id)
    base = hub_endpoint(endpoint)
    url = hf_hub_url(repo_id, "README.md", revision=revision, endpoint=base)
    with hub_errors(base, repo_id, "README.md"):
        response = get_session().get(url, headers=hub_headers(token), timeout=timeout)
        if response.status_code == 404:
            return ""
        hf_raise_for_status(response)
        return strip_front_matter(response.text)


# --- remote header -------------------------------------------------------------------------


def _content_range_total(value: str | None) -> int | None:
    """``bytes 0-99/1234`` -> 1234."""
    if not value or "/" not in value:
        return None
    total = value.rsplit("/", 1)[1].strip()
    return int(total) if total.isdigit() else None


def _fetch_range(
    url: str, start: int, end: int, headers: dict[str, str], timeout: float
) -> tuple[bytes, int, int | None]:
    """Bytes [start, end] of ``url``: (data, offset of data, file size if known)."""
    from huggingface_hub.utils import get_session, hf_raise_for_status

    request_headers = {**headers, "Range": f"bytes={start}-{end}", "Accept-Encoding": "identity"}
    with get_session().stream("GET", url, headers=request_headers, timeout=timeout) as response:
        if response.status_code == 416:
            return b"", start, _content_range_total(response.headers.get("Content-Range"))
        if response.status_code >= 400:
            response.read()
            hf_raise_for_status(response)
        partial = response.status_code == 206
        offset = start if partial else 0  # a server that ignores Range sends the whole file
        total = (
            _content_range_total(response.headers.get("Content-Range"))
            if partial
            else int(response.headers.get("Content-Length", "0")) or None
        )
        limit = end + 1 - offset
        data = bytearray()
        for chunk in response.iter_bytes():
            data += chunk
            if len(data) >= limit:
                break
        return bytes(data[:limit]), offset, total


def fetch_header(
    repo_id: str,
    filename: str,
    revision: str = "main",
    initial: int = HEADER_INITIAL,
    *,
    max_bytes: int = HEADER_MAX,
    endpoint: str | None = None,
    token: Token = None,
    timeout: float = 30.0,
) -> GGUFInfo:
    """Read a remote GGUF's header with ranged GETs, never the weights.

    Starts with ``initial`` bytes and fetches more while the header continues (a vocabulary can
    make it several MB); gives up past ``max_bytes`` with :class:`HeaderTooLargeError`.
    """
    from huggingface_hub import hf_hub_url

    validate_repo_id(repo_id)
    safe_repo_path(filename)
    base = hub_endpoint(endpoint)
    url = hf_hub_url(repo_id, filename, revision=revision, endpoint=base)
    headers = hub_headers(token)
    buf = bytearray()
    file_size: int | None = None
    want = max(1024, initial)
    with hub_errors(base, repo_id, filename):
        while True:
            if file_size is not None:
                want = min(want, file_size)
            if want > max_bytes:
                raise HeaderTooLargeError(
                    f"The header of {filename} is larger than {human_bytes(max_bytes)}; "
                    "Ember cannot preview this file (it can still be downloaded)."
                )
            if want > len(buf):
                data, offset, total = _fetch_range(url, len(buf), want - 1, headers, timeout)
                file_size = total if total is not None else file_size
                if offset == 0:
                    buf = bytearray(data)
                else:
                    buf += data
            try:
                return parse_gguf_bytes(buf, file_size=file_size, name=filename)
            except GGUFNeedMoreData as more:
                if more.needed <= len(buf):
                    raise HubResponseError(
                        f"The Hub sent fewer bytes of {filename} than it says the file has."
                    ) from more
                want = more.needed
