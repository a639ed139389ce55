"""Attached files and the conversations that use them (no Qt).

A user message records its files in ``metadata["attachments"]``: entries ``{name, size,
sha256, suffix, kind, pages}`` (``app.ui.chat.attaching.metadata_entry``). The copies live
once per content in ``EMBER_HOME/attachments`` (``app.attachments.store``), shared by every
conversation that attached the same file, and each conversation with a long file has a
retrieval index there (``app.attachments.index``).

What removes them: only purging a conversation for good (``ChatStore.purge_deleted``). Its
index is dropped, and each of its stored files that no message of any other conversation
references is removed; soft-deleted conversations count as users (they may still be
restored). A soft delete removes nothing (it can be undone), and neither does deleting a
message: the versions of a branch come back through edit and regenerate, and a file kept
by a message elsewhere in the tree must stay.

Bounded: the app purges when it quits, on the GUI thread. A purge checks and unlinks at most
``MAX_REMOVALS`` files (stored files and index files together), reading only the messages
whose metadata names one of them; what is left over is written to
``attachments/unreferenced.txt`` and taken first by the next purge, or by
``ChatStore.remove_unused_attachments()`` on a worker thread, in batches of the same size
that each hold the store's lock only for their own check and unlinks. A file is checked again
when its turn comes: a chat may have attached the same content since.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.chats.models import Message

log = logging.getLogger(__name__)

KEY = "attachments"  # the user message's metadata key (app.ui.chat.attaching)
MAX_REMOVALS = 32  # unlinks a purge does on the caller's thread; the rest wait for the next
LEFTOVERS_NAME = "unreferenced.txt"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_LIKE_KEY = f'%"{KEY}"%'  # skips the JSON of messages without attachments cheaply
_CHECK_BATCH = 200  # hashes per query (SQLite allows at least 999 parameters)

StoredKey = tuple[str, str]  # (sha256, suffix as app.attachments.store.safe_suffix made it)


def entries(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's attachment entries that name a stored file (sha256 and suffix)."""
    found = metadata.get(KEY)
    if not isinstance(found, list):
        return []
    return [
        e
        for e in found
        if isinstance(e, dict)
        and isinstance(e.get("sha256"), str)
        and _SHA256.fullmatch(e["sha256"])
    ]


def stored_key(entry: dict[str, Any]) -> StoredKey:
    from app.attachments.store import safe_suffix  # only purges and exports need the store

    return entry["sha256"], safe_suffix(str(entry.get("suffix") or ""))


def files_of(conn: sqlite3.Connection, where: str, values: Iterable[Any] = ()) -> set[StoredKey]:
    """The stored files referenced by the messages matching ``where`` (SQL on ``messages``)."""
    rows = conn.execute(
        f"SELECT metadata FROM messages WHERE metadata LIKE ? AND ({where})",
        (_LIKE_KEY, *values),
    )
    found: set[StoredKey] = set()
    for (text,) in rows:
        try:
            metadata = json.loads(text)
        except (TypeError, ValueError):
            continue  # a damaged row keeps nothing alive and breaks nothing
        if isinstance(metadata, dict):
            found.update(stored_key(e) for e in entries(metadata))
    return found


@dataclass(slots=True)
class Removal:
    """What a purge frees: stored files and indexes. Only ``checked`` files may be unlinked,
    and of those only the ones no message left in the database references."""

    files: set[StoredKey] = field(default_factory=set)
    indexes: list[str] = field(default_factory=list)
    checked: set[StoredKey] = field(default_factory=set)
    referenced: set[StoredKey] = field(default_factory=set)

    def check(self, conn: sqlite3.Connection, limit: int) -> None:
        """Check the first ``limit`` files (in order) against the messages left: only those
        whose metadata contains one of their hashes are read (``instr`` in SQLite), so the
        cost follows the files checked, not the size of the chat history."""
        self.checked = set(sorted(self.files)[: max(0, limit)])
        hashes = sorted({sha256 for sha256, _ in self.checked})
        self.referenced = set()
        for start in range(0, len(hashes), _CHECK_BATCH):
            part = hashes[start : start + _CHECK_BATCH]
            where = " OR ".join(["instr(metadata, ?) > 0"] * len(part))
            self.referenced |= files_of(conn, where, part) & self.checked


def of_purged(conn: sqlite3.Connection, purged: str, values: Iterable[Any]) -> Removal:
    """What purging the conversations whose ids ``purged`` (SQL) selects may free, with what
    earlier purges left; call ``check`` after deleting them, then ``remove``."""
    values = tuple(values)
    removal = read_leftovers()
    removal.indexes += [row[0] for row in conn.execute(purged, values)]
    removal.files |= files_of(conn, f"conversation_id IN ({purged})", values)
    return removal


def leftovers_path() -> Path:
    from app.attachments.store import attachments_dir

    return attachments_dir() / LEFTOVERS_NAME


def read_leftovers() -> Removal:
    """What earlier purges left to remove (an unreadable list is an empty one)."""
    removal = Removal()
    try:
        lines = leftovers_path().read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return removal
    for line in lines:
        kind, _, rest = line.partition(" ")
        if kind == "index" and rest:
            removal.indexes.append(rest)
        elif kind == "file" and rest:
            sha256, _, suffix = rest.partition(" ")
            if _SHA256.fullmatch(sha256):
                removal.files.add(stored_key({"sha256": sha256, "suffix": suffix}))
    return removal


def remove(removal: Removal, limit: int) -> int:
    """Unlink what ``removal`` frees (checked files nothing references), at most ``limit``;
    keep the rest, and the files not checked yet, in the leftovers list. Never raises: the
    conversations are gone already."""
    from app.attachments.index import drop_index
    from app.attachments.store import remove_stored

    files = sorted(removal.checked - removal.referenced)
    unchecked = sorted(removal.files - removal.checked)
    indexes = list(dict.fromkeys(removal.indexes))
    budget = limit
    done = 0
    while indexes and done < budget:
        try:
            drop_index(indexes[0])
        except (OSError, ValueError) as error:
            log.warning("Could not remove the index of chat %s: %s", indexes[0], error)
        indexes.pop(0)
        done += 1
    while files and done < budget:
        sha256, suffix = files[0]
        try:
            remove_stored(sha256, suffix)
        except (OSError, ValueError) as error:
            log.warning("Could not remove the attached file %s%s: %s", sha256, suffix, error)
        files.pop(0)
        done += 1
    _write_leftovers(indexes, files + unchecked)
    return done


def _write_leftovers(indexes: list[str], files: list[StoredKey]) -> None:
    path = leftovers_path()
    lines = [f"index {i}" for i in indexes] + [f"file {s} {x}".rstrip() for s, x in files]
    try:
        if not lines:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".leftovers.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
    except OSError as error:
        log.warning("Could not keep the list of attached files to remove: %s", error)


# -- Markdown export -------------------------------------------------------------------------


def markdown_lines(message: Message) -> list[str]:
    """What a Markdown export shows of a question's files and an answer's sources.

    A file is a link to its stored copy as a ``file:`` URL: the export is saved wherever the
    user likes, so a path relative to it cannot reach EMBER_HOME, while the absolute URL opens
    the kept copy from any Markdown viewer on this computer. The link's title carries the
    sha256, which finds the file in another Ember's store (or says it is the same content).
    """
    metadata = message.metadata
    lines: list[str] = []
    files = entries(metadata) if message.role == "user" else []
    if files:
        lines += ["**Attached:**", ""]
        lines += [f"- {_file_link(e)}" for e in files]
        lines.append("")
    sources = metadata.get("sources") if message.role == "assistant" else None
    if isinstance(sources, list):
        wheres = [_where(s) for s in sources if isinstance(s, dict) and s.get("file")]
        if wheres:
            lines += ["**Sources:**", "", *(f"- {w}" for w in wheres), ""]
    left_out = metadata.get("attachments_left_out") if message.role == "assistant" else None
    if isinstance(left_out, list):
        lines += [f"*({_escape(str(s))})*" for s in left_out if s] + [""]
    return lines if any(lines) else []


def _file_link(entry: dict[str, Any]) -> str:
    from app.attachments.store import stored_path
    from app.engine.gguf_format import human_bytes

    name = _escape(str(entry.get("name") or entry["sha256"]))
    size, pages = entry.get("size"), entry.get("pages")
    details = [human_bytes(size)] if isinstance(size, int) and not isinstance(size, bool) else []
    if isinstance(pages, int) and not isinstance(pages, bool) and pages:
        details.append(f"{pages} page{'s' if pages != 1 else ''}")
    path = stored_path(*stored_key(entry))
    if path.exists():
        link = f'[{name}]({path.as_uri()} "sha256 {entry["sha256"]}")'
    else:
        link = f"{name} (not stored on this computer; sha256 {entry['sha256']})"
    return f"{link}, {', '.join(details)}" if details else link


def _where(source: dict[str, Any]) -> str:
    """'report.pdf, page 27', as the answer showed it (the app's ``where``), or rebuilt."""
    where = source.get("where")
    if isinstance(where, str) and where:
        return _escape(where)
    file, page, heading = str(source["file"]), source.get("page"), source.get("heading")
    if isinstance(page, int):
        return _escape(f"{file}, page {page}")
    return _escape(f'{file}, section "{heading}"' if heading else file)


def _escape(text: str) -> str:
    """Plain text in Markdown: the characters that would start a link, emphasis or code."""
    return re.sub(r"([\\`*_\[\]<>#|])", r"\\\1", " ".join(text.split()))
