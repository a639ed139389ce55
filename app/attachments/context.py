"""What of the attached documents goes before a question: whole, or the relevant chunks.

Given the room left in the context (tokens, after the system prompt, the history, the
question and the answer's room) and a token counter (the loaded model's, or
``app.engine.fitting.estimate_tokens``): documents that fit comfortably together
(``WHOLE_SHARE`` of the room) go in whole, each delimited with its file name, smallest
first. The others are chunked, indexed in the conversation's FTS5 index
(:mod:`app.attachments.index`) and the chunks that best match the question (BM25, fused with
vector similarity when an ``embedder`` is given) are put in, best first, while they fit in the
rest of the room (at most ``top_k``). The result is the text to put before the question and
the sources to cite. An embedder that fails (a model that cannot embed) leaves BM25 alone,
and the log says why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.attachments.document import CancelFlag, Document, Progress
from app.attachments.embedder import Embedder
from app.attachments.index import ChunkIndex, Hit
from app.engine.types import EngineError

log = logging.getLogger(__name__)

WHOLE_SHARE = 0.75
TOP_K = 8
# No tokenizer packs more characters than this into a token of real text: a document longer
# than room * this is not counted (counting 50 MB with the model's tokenizer takes minutes).
MAX_CHARS_PER_TOKEN = 12
SEPARATOR_TOKENS = 2  # the blank line between parts
INTRO = (
    "The user attached these files. Use them to answer, and cite the file and page or "
    "section you used."
)


@dataclass(frozen=True, slots=True)
class Source:
    """A passage given to the model: a chunk, or a whole document (``whole``)."""

    file: str
    page: int | None
    heading: str | None
    text: str
    whole: bool = False

    @property
    def where(self) -> str:
        """'report.pdf, page 27', 'notes.docx, section "Tides"', 'a.txt (whole)'."""
        if self.whole:
            return f"{self.file} (whole)"
        if self.page is not None:
            return f"{self.file}, page {self.page}"
        if self.heading:
            return f'{self.file}, section "{self.heading}"'
        return self.file


@dataclass(frozen=True, slots=True)
class AttachedContext:
    text: str  # to put before the question ('' with no documents)
    sources: tuple[Source, ...]  # whole documents first, then chunks best first
    retrieved: tuple[str, ...]  # names of the documents too long to go in whole

    def prompt(self, question: str) -> str:
        """The user message: the attachments, then the question."""
        return f"{self.text}\n\n{question}" if self.text else question


def build_context(
    documents: Sequence[Document],
    question: str,
    room: int,
    count_tokens: Callable[[str], int],
    conversation_id: str | int,
    *,
    top_k: int = TOP_K,
    progress: Progress | None = None,
    cancel: CancelFlag | None = None,
    embedder: Embedder | None = None,
) -> AttachedContext:
    """See the module docstring. ``progress`` reports (characters indexed, total); with an
    embedder the total counts each character twice (indexed, then embedded)."""
    documents = list({d.sha256: d for d in documents}.values())  # the same file once
    if not documents:
        return AttachedContext("", (), ())
    budget = room - count_tokens(INTRO) - SEPARATOR_TOKENS
    whole, used, rest = _choose_whole(documents, int(budget * WHOLE_SHARE), count_tokens)
    parts = [INTRO, *(whole_text(d) for d in whole)]
    sources = [Source(d.name, None, None, d.text(), whole=True) for d in whole]
    left = budget - used
    if rest:
        hits = _retrieve(
            rest,
            question,
            conversation_id,
            top_k,
            progress=progress,
            cancel=cancel,
            embedder=embedder,
        )
        names = {d.sha256: d.name for d in rest}
        for hit in hits:
            if len(sources) - len(whole) >= top_k:
                break
            source = Source(names[hit.sha256], hit.page, hit.heading, hit.text)
            text = excerpt_text(source)
            cost = count_tokens(text) + SEPARATOR_TOKENS
            if cost <= left:
                parts.append(text)
                sources.append(source)
                left -= cost
    text = "\n\n".join(parts) if sources else ""
    return AttachedContext(text, tuple(sources), tuple(d.name for d in rest))


def _choose_whole(
    documents: Sequence[Document], share: int, count_tokens: Callable[[str], int]
) -> tuple[list[Document], int, list[Document]]:
    """The documents that go whole (smallest first, while they fit in ``share``), the tokens
    they take, and the others; each list in the user's order."""
    whole: set[str] = set()
    used = 0
    for doc in sorted(documents, key=lambda d: d.chars):
        if doc.chars > max(share, 0) * MAX_CHARS_PER_TOKEN:
            continue
        cost = count_tokens(whole_text(doc)) + SEPARATOR_TOKENS
        if used + cost <= share:
            whole.add(doc.sha256)
            used += cost
    return (
        [d for d in documents if d.sha256 in whole],
        used,
        [d for d in documents if d.sha256 not in whole],
    )


def _retrieve(
    documents: Sequence[Document],
    question: str,
    conversation_id: str | int,
    top_k: int,
    *,
    progress: Progress | None,
    cancel: CancelFlag | None,
    embedder: Embedder | None,
) -> list[Hit]:
    chars = sum(d.chars for d in documents)
    total = chars * 2 if embedder is not None else chars
    offset = 0

    def overall(done: int, _total: int) -> None:
        if progress is not None:
            progress(offset + done, total)

    with ChunkIndex(conversation_id) as index:
        for doc in documents:
            index.add(doc, progress=overall, cancel=cancel)
            offset += doc.chars
        if embedder is not None:
            embedder = _with_vectors(
                index, documents, embedder, cancel=cancel, report=_Report(progress, offset, total)
            )
        # More than top_k: a long chunk that does not fit leaves room for a shorter one.
        sha256s = [d.sha256 for d in documents]
        try:
            hits = index.search(question, sha256s, limit=top_k * 3, embedder=embedder)
        except EngineError as error:
            log.warning("Retrieving by meaning failed (%s); using the words alone", error)
            hits = index.search(question, sha256s, limit=top_k * 3)
        if not hits:  # nothing in the question matched: the documents' beginnings
            per_doc = max(1, top_k // len(documents))
            hits = [h for d in documents for h in index.first(d.sha256, per_doc)]
    return hits


@dataclass(slots=True)
class _Report:
    """Progress of the embedding phase, in characters: a document's share by its chunks done."""

    progress: Progress | None
    offset: int
    total: int
    chars: int = 0  # of the document being embedded

    def __call__(self, done: int, todo: int) -> None:
        if self.progress is not None:
            part = self.chars * done // todo if todo else self.chars
            self.progress(self.offset + part, self.total)


def _with_vectors(
    index: ChunkIndex,
    documents: Sequence[Document],
    embedder: Embedder,
    *,
    cancel: CancelFlag | None,
    report: _Report,
) -> Embedder | None:
    """Embed the documents' chunks; the embedder, or None if it failed (BM25 alone)."""
    for doc in documents:
        report.chars = doc.chars
        try:
            index.add_vectors(doc, embedder, progress=report, cancel=cancel)
        except EngineError as error:
            log.warning("The attached files' embeddings failed (%s); using words alone", error)
            return None
        report.offset += doc.chars
    return embedder


def _quote(name: str) -> str:
    return name.replace('"', "'").replace("\n", " ")


def whole_text(doc: Document) -> str:
    """A whole document as the model gets it, delimited with its name (and page count)."""
    pages = f' pages="{doc.pages}"' if doc.pages else ""
    return f'<file name="{_quote(doc.name)}"{pages}>\n{doc.text()}\n</file>'


def excerpt_text(source: Source) -> str:
    """A passage as the model gets it, with its file and page or section."""
    where = ""
    if source.page is not None:
        where = f' page="{source.page}"'
    elif source.heading:
        where = f' section="{_quote(source.heading)}"'
    return f'<excerpt file="{_quote(source.file)}"{where}>\n{source.text}\n</excerpt>'


# The first names of the two formats (the chat's prompt builder imported them so).
_whole_text = whole_text
_excerpt_text = excerpt_text
