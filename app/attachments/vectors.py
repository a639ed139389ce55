"""Chunk embeddings beside the FTS5 index, and the fusion of the two rankings.

Vectors live in the conversation's index database (:mod:`app.attachments.index`), in a plain
table: one little-endian float32 BLOB per chunk (the byte layout sqlite-vec reads, should a
Python with loadable SQLite extensions ever use it), keyed by the file's sha256 and the
chunk's ``seq``, so each chunk is embedded once per conversation. Nearest chunks are found by
an exact cosine scan with numpy: a conversation holds at most a few thousand chunks with
vectors (``MAX_VECTOR_CHUNKS`` a document), a few MB, scanned in milliseconds, and the Python
builds Ember runs on (this venv's, macOS's) cannot load SQLite extensions at all.

The embedding model's identity (its id and dimensions) is stored once per database: a
different model drops every vector and embeds again, so two vector spaces never mix.

Rankings are fused by reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009): a chunk's
score is the sum over the rankings it is in of ``1 / (RRF_K + rank)``, ranks from 1.
``RRF_K = 60`` is the paper's constant: a top rank in one list counts, but agreement between
the two lists counts more.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from app.attachments.embedder import Embedder

if TYPE_CHECKING:
    import numpy as np

RRF_K = 60
# Chunks per embedding job (~1,600 tokens at most): the engine runs a job between its
# answers' decode steps, so a smaller job holds them up less; a cancel and a progress report
# come between jobs.
EMBED_BATCH = 4
# A document with more chunks gets no vectors (BM25 only): embedding ~1,000 chunks of ~400
# tokens is minutes already on a laptop CPU, and a 50 MB file would be hours.
MAX_VECTOR_CHUNKS = 1000
# Characters of a chunk that reach the embedder, per token of its input limit: a token is
# at least one character in real text, so this never asks the engine for more than it takes.
CHARS_PER_LIMIT_TOKEN = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS vector_model (
    only INTEGER PRIMARY KEY CHECK (only = 1), model TEXT NOT NULL, dims INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS vectors (
    sha256 TEXT NOT NULL, seq INTEGER NOT NULL, chunk INTEGER NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY (sha256, seq)
);
"""

Key = tuple[str, int]  # (sha256, seq)
Chunk = tuple[int, int, str]  # seq, the chunk's rowid in the FTS5 table, text


# numpy is imported where used: the chat imports this module while the window is being built.


def to_blob(vector: Sequence[float]) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    import numpy as np

    return np.frombuffer(blob, dtype="<f4")


def fuse(rankings: Iterable[Sequence[Key]], k: int = RRF_K) -> list[tuple[Key, float]]:
    """Reciprocal rank fusion of best-first rankings: (key, score), best first (ties keep
    the order they were first seen in, so the first ranking breaks them)."""
    scores: dict[Key, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])


class VectorStore:
    """The vectors in one index database (the index's connection, its thread)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._db.executescript(SCHEMA)

    def model(self) -> tuple[str, int] | None:
        row = self._db.execute("SELECT model, dims FROM vector_model").fetchone()
        return (str(row[0]), int(row[1])) if row else None

    def use_model(self, model: str, dims: int) -> None:
        """Make ``model`` the index's embedding model; another one's vectors are dropped."""
        if self.model() == (model, dims):
            return
        with self._db:
            self._db.execute("DELETE FROM vectors")
            self._db.execute(
                "INSERT OR REPLACE INTO vector_model (only, model, dims) VALUES (1, ?, ?)",
                (model, dims),
            )

    def count(self, sha256: str) -> int:
        row = self._db.execute("SELECT count(*) FROM vectors WHERE sha256 = ?", (sha256,))
        return int(row.fetchone()[0])

    def fill(
        self,
        sha256: str,
        chunks: Sequence[Chunk],
        embedder: Embedder,
        step: Callable[[int, int], None],
    ) -> int:
        """Embed the chunks that have no vector yet, ``EMBED_BATCH`` at a time,
        each batch in its own transaction (a cancel keeps the batches done). ``step(done,
        total)`` runs between batches and raises to stop. The number embedded."""
        have = {
            int(r[0])
            for r in self._db.execute("SELECT seq FROM vectors WHERE sha256 = ?", (sha256,))
        }
        todo = [c for c in chunks if c[0] not in have]
        limit = max(1, embedder.max_tokens * CHARS_PER_LIMIT_TOKEN)
        for start in range(0, len(todo), EMBED_BATCH):
            step(start, len(todo))
            batch = todo[start : start + EMBED_BATCH]
            vectors = embedder.embed([text[:limit] for _, _, text in batch])
            if len(vectors) != len(batch) or any(len(v) != embedder.dims for v in vectors):
                raise ValueError(
                    f"The embedding model {embedder.model_id!r} returned vectors of the wrong "
                    "number or size."
                )
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors (sha256, seq, chunk, vector) "
                    "VALUES (?, ?, ?, ?)",
                    [
                        (sha256, seq, rowid, to_blob(v))
                        for (seq, rowid, _), v in zip(batch, vectors, strict=True)
                    ],
                )
        step(len(todo), len(todo))
        return len(todo)

    def nearest(
        self, query: Sequence[float], sha256s: Sequence[str], limit: int
    ) -> list[tuple[Key, int]]:
        """The chunks of these documents closest to ``query`` by cosine, best first, each with
        its rowid in the FTS5 table."""
        if not sha256s or limit <= 0:
            return []
        marks = ",".join("?" * len(sha256s))
        rows = self._db.execute(
            f"SELECT sha256, seq, chunk, vector FROM vectors WHERE sha256 IN ({marks})",
            tuple(sha256s),
        ).fetchall()
        if not rows:
            return []
        import numpy as np

        matrix = np.stack([from_blob(r[3]) for r in rows]).astype(np.float32)
        q = np.asarray(query, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * (float(np.linalg.norm(q)) or 1.0)
        similarity = matrix @ q / np.where(norms > 0, norms, 1.0)
        best = np.argsort(-similarity, kind="stable")[:limit]
        return [((str(rows[i][0]), int(rows[i][1])), int(rows[i][2])) for i in best]
