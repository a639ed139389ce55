"""A conversation's attachment index: SQLite FTS5, ranked by BM25, and the chunks' vectors.

One database per conversation, ``attachments/index/<conversation id>.sqlite`` in EMBER_HOME,
so deleting a conversation deletes one file (:func:`drop_index`). A document is indexed once
per conversation (keyed by its file's sha256), in one transaction: a cancelled or failed
indexing leaves nothing half-done. The porter stemmer lets "tides" find "tide".

With an embedder, each chunk's embedding is kept beside it (:mod:`app.attachments.vectors`)
and :meth:`ChunkIndex.search` fuses the BM25 and the vector rankings; without one it is BM25
alone.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from app.attachments.chunks import Chunk, chunk_document
from app.attachments.document import CancelFlag, Document, Job, Progress
from app.attachments.embedder import Embedder
from app.attachments.store import attachments_dir
from app.attachments.vectors import MAX_VECTOR_CHUNKS, VectorStore, fuse
from app.config import private_dir, private_file

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    sha256 TEXT PRIMARY KEY, name TEXT NOT NULL, chunks INTEGER NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks USING fts5(
    text, sha256 UNINDEXED, page UNINDEXED, heading UNINDEXED, seq UNINDEXED,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
"""
BATCH = 500  # chunks inserted between progress reports and cancel checks
MAX_TERMS = 32  # a question's words that reach the query
_STOPWORDS = (
    "a an and are as at be but by can could did do does for from had has have how i if in"
    " into is it its me my of on or our she he so than that the their them then there"
    " these they this those to was we were what when where which who whom why will with"
    " would you your about tell please say said"
)
STOPWORDS = frozenset(_STOPWORDS.split())


def index_path(conversation_id: str | int) -> Path:
    """The index file of a conversation; its id must be a plain name (letters, digits, - _)."""
    key = str(conversation_id)
    if not _ID.fullmatch(key):
        raise ValueError(f"not a conversation id: {key!r}")
    return attachments_dir() / "index" / f"{key}.sqlite"


def drop_index(conversation_id: str | int) -> bool:
    """Delete a conversation's index (when the conversation is deleted); True if it existed."""
    path = index_path(conversation_id)
    existed = path.exists()
    for p in (path, path.with_name(path.name + "-journal"), path.with_name(path.name + "-wal")):
        p.unlink(missing_ok=True)
    return existed


@dataclass(frozen=True, slots=True)
class Hit:
    """A retrieved chunk (``score``: lower is better; BM25, or minus the fused RRF score)."""

    sha256: str
    text: str
    page: int | None
    heading: str | None
    seq: int
    score: float


def query_terms(question: str) -> list[str]:
    """The question's words that say something, as FTS5 phrases (quoted: no query syntax
    from the user reaches FTS5)."""
    seen: dict[str, None] = {}
    for word in re.findall(r"\w+", question.lower()):
        if word not in STOPWORDS and (len(word) > 1 or word.isdigit()):
            seen.setdefault(word, None)
    return [f'"{w}"' for w in list(seen)[:MAX_TERMS]]


class ChunkIndex:
    """A conversation's index; use from one thread, and close it (or use ``with``)."""

    def __init__(self, conversation_id: str | int) -> None:
        path = index_path(conversation_id)
        private_dir(path.parent)
        self._db = sqlite3.connect(path)
        self._db.executescript(_SCHEMA)
        self.vectors = VectorStore(self._db)
        private_file(path)  # its folder is private already; the file is, as Ember's others

    def __enter__(self) -> ChunkIndex:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def has(self, sha256: str) -> bool:
        row = self._db.execute("SELECT 1 FROM documents WHERE sha256 = ?", (sha256,)).fetchone()
        return row is not None

    def add(
        self,
        doc: Document,
        *,
        progress: Progress | None = None,
        cancel: CancelFlag | None = None,
    ) -> int:
        """Index ``doc`` unless it is there already; the number of its chunks."""
        row = self._db.execute(
            "SELECT chunks FROM documents WHERE sha256 = ?", (doc.sha256,)
        ).fetchone()
        if row is not None:
            return int(row[0])
        job = Job(doc.name, progress=progress, cancel=cancel)
        total, done, count = doc.chars, 0, 0
        batch: list[tuple[str, str, int | None, str | None, int]] = []
        with self._db:  # one transaction: all of the document or nothing
            job.step(0, total)
            for chunk in chunk_document(doc):
                batch.append(_row(doc.sha256, chunk))
                done += len(chunk.text)
                if len(batch) >= BATCH:
                    count += self._insert(batch)
                    job.step(min(done, total), total)
            count += self._insert(batch)
            self._db.execute(
                "INSERT INTO documents (sha256, name, chunks) VALUES (?, ?, ?)",
                (doc.sha256, doc.name, count),
            )
            job.step(total, total)
        return count

    def _insert(self, batch: list[tuple[str, str, int | None, str | None, int]]) -> int:
        self._db.executemany(
            "INSERT INTO chunks (text, sha256, page, heading, seq) VALUES (?, ?, ?, ?, ?)", batch
        )
        n = len(batch)
        batch.clear()
        return n

    def add_vectors(
        self,
        doc: Document,
        embedder: Embedder,
        *,
        progress: Progress | None = None,
        cancel: CancelFlag | None = None,
    ) -> bool:
        """Embed ``doc``'s chunks that have no vector from this embedder's model yet (the
        document is indexed first: :meth:`add`); ``progress`` reports (chunks done, total).
        False if the document has too many chunks for vectors (it stays BM25 only)."""
        row = self._db.execute(
            "SELECT chunks FROM documents WHERE sha256 = ?", (doc.sha256,)
        ).fetchone()
        if row is None or int(row[0]) > MAX_VECTOR_CHUNKS:
            return False
        self.vectors.use_model(embedder.model_id, embedder.dims)
        chunks = [
            (int(seq), int(rowid), str(text))
            for seq, rowid, text in self._db.execute(
                "SELECT seq, rowid, text FROM chunks WHERE sha256 = ? ORDER BY seq",
                (doc.sha256,),
            )
        ]
        job = Job(doc.name, progress=progress, cancel=cancel)
        self.vectors.fill(doc.sha256, chunks, embedder, job.step)
        return True

    def search(
        self,
        question: str,
        sha256s: Sequence[str],
        limit: int,
        embedder: Embedder | None = None,
    ) -> list[Hit]:
        """The chunks of these documents that best match the question, best first: by BM25,
        or with an embedder by BM25 and vector similarity fused (reciprocal rank fusion)."""
        hits = self._bm25(question, sha256s, limit)
        if embedder is None or not sha256s:
            return hits
        if self.vectors.model() != (embedder.model_id, embedder.dims):
            return hits  # no vectors from this model (add_vectors was not run)
        query = embedder.embed([question[: embedder.max_tokens]])[0]
        nearest = dict(self.vectors.nearest(query, sha256s, limit))
        by_key = {(h.sha256, h.seq): h for h in hits}
        fused = fuse([list(by_key), list(nearest)])[:limit]
        by_key.update(self._chunks([nearest[k] for k, _ in fused if k not in by_key]))
        return [
            Hit(h.sha256, h.text, h.page, h.heading, h.seq, -score)
            for key, score in fused
            if (h := by_key.get(key)) is not None
        ]

    def _bm25(self, question: str, sha256s: Sequence[str], limit: int) -> list[Hit]:
        terms = query_terms(question)
        if not terms or not sha256s:
            return []
        marks = ",".join("?" * len(sha256s))
        rows = self._db.execute(
            "SELECT sha256, text, page, heading, seq, bm25(chunks) AS score FROM chunks "
            f"WHERE chunks MATCH ? AND sha256 IN ({marks}) ORDER BY score LIMIT ?",
            (" OR ".join(terms), *sha256s, limit),
        ).fetchall()
        return [Hit(*row) for row in rows]

    def _chunks(self, rowids: Sequence[int]) -> dict[tuple[str, int], Hit]:
        """Chunks by their rowid (an FTS5 table finds those without a scan)."""
        if not rowids:
            return {}
        rows = self._db.execute(
            "SELECT sha256, text, page, heading, seq, 0.0 FROM chunks "
            f"WHERE rowid IN ({','.join('?' * len(rowids))})",
            tuple(rowids),
        ).fetchall()
        return {(h.sha256, h.seq): h for h in (Hit(*row) for row in rows)}

    def first(self, sha256: str, limit: int) -> list[Hit]:
        """A document's opening chunks (when nothing in the question matched)."""
        rows = self._db.execute(
            "SELECT sha256, text, page, heading, seq, 0.0 FROM chunks WHERE sha256 = ? "
            "ORDER BY seq LIMIT ?",
            (sha256, limit),
        ).fetchall()
        return [Hit(*row) for row in rows]


def _row(sha256: str, chunk: Chunk) -> tuple[str, str, int | None, str | None, int]:
    return (chunk.text, sha256, chunk.page, chunk.heading, chunk.seq)
