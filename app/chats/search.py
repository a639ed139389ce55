"""Search over titles and message text: FTS5 when available, LIKE otherwise.

The typed text is never passed to FTS5 as query syntax: it is split into words and each word
becomes a quoted prefix term (``"word"*``), all of which must match. Quotes, ``*``, ``-``,
``NEAR`` or parentheses in the input are therefore just text.
"""

from __future__ import annotations

import re
import sqlite3

from app.chats.models import Conversation, SearchHit
from app.chats.rows import CONVERSATION_COLUMNS, CONVERSATION_WIDTH, conversation_from_row

# Private-use characters mark the matches inside snippet() output; they do not occur in text.
MARK_START = "\ue000"
MARK_END = "\ue001"
SNIPPET_TOKENS = 12
_LIKE_CONTEXT = 40

Snippet = tuple[str, tuple[tuple[int, int], ...]]
_Hits = tuple[list[tuple[Conversation, Snippet]], list[tuple[Conversation, str, Snippet]]]

_WORD = re.compile(r"[^\W_]+")
_SPACE = re.compile(r"\s+")


def query_terms(text: str) -> list[str]:
    """The words of a search box text, in order, without duplicates."""
    return list(dict.fromkeys(_WORD.findall(text)))


def fts_query(terms: list[str]) -> str:
    """An FTS5 MATCH expression requiring every term as a word prefix."""
    return " ".join('"' + term.replace('"', '""') + '"*' for term in terms)


def like_pattern(term: str) -> str:
    """A LIKE pattern (with ``ESCAPE '\\'``) matching ``term`` anywhere."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def split_marked(marked: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """Collapse whitespace to single spaces and turn the match markers into offsets."""
    text = _SPACE.sub(" ", marked).strip()
    plain: list[str] = []
    spans: list[tuple[int, int]] = []
    length = 0
    start = -1
    for char in text:
        if char == MARK_START:
            start = length
        elif char == MARK_END:
            if start >= 0 and length > start:
                spans.append((start, length))
            start = -1
        else:
            plain.append(char)
            length += 1
    return "".join(plain), tuple(spans)


def plain_snippet(text: str, terms: list[str]) -> tuple[str, tuple[tuple[int, int], ...]]:
    """An excerpt around the first match of any term, for the search without FTS5."""
    pattern = re.compile("|".join(re.escape(term) for term in terms), re.IGNORECASE)
    first = pattern.search(text)
    if first is None:
        return split_marked(text[: 2 * _LIKE_CONTEXT])
    begin = max(0, first.start() - _LIKE_CONTEXT)
    end = min(len(text), first.end() + _LIKE_CONTEXT)
    window = text[begin:end]
    marked = pattern.sub(lambda match: MARK_START + match.group(0) + MARK_END, window)
    prefix = "…" if begin > 0 else ""
    suffix = "…" if end < len(text) else ""
    return split_marked(prefix + marked + suffix)


def find(
    conn: sqlite3.Connection, query: str, *, use_fts: bool, limit: int | None
) -> list[SearchHit]:
    """Conversations (not deleted) whose title or one message contains every word of
    ``query``, most recently active first; the snippet comes from the newest matching message,
    else from the title.
    """
    terms = query_terms(query)
    if not terms:
        return []
    titles, messages = _fts_hits(conn, terms) if use_fts else _like_hits(conn, terms)
    hits: dict[str, SearchHit] = {}
    for conversation, (snippet, highlights) in titles:
        hits[conversation.id] = SearchHit(conversation, snippet, highlights)
    for conversation, message_id, (snippet, highlights) in messages:
        hits[conversation.id] = SearchHit(conversation, snippet, highlights, message_id)
    ordered = sorted(hits.values(), key=lambda hit: -hit.conversation.updated_at)
    return ordered if limit is None else ordered[:limit]


def _fts_hits(conn: sqlite3.Connection, terms: list[str]) -> _Hits:
    match = fts_query(terms)
    marks = (MARK_START, MARK_END, SNIPPET_TOKENS)
    title_rows = conn.execute(
        f"SELECT {CONVERSATION_COLUMNS}, snippet(conversations_fts, 0, ?, ?, '…', ?) "
        "FROM conversations_fts JOIN conversations c ON c.seq = conversations_fts.rowid "
        "WHERE conversations_fts MATCH ? AND c.deleted_at IS NULL",
        (*marks, match),
    ).fetchall()
    # snippet() only for the newest matching message of each conversation.
    message_rows = conn.execute(
        f"""
        SELECT {CONVERSATION_COLUMNS}, m.id, snippet(messages_fts, 0, ?, ?, '…', ?)
        FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid
            JOIN conversations c ON c.id = m.conversation_id
        WHERE messages_fts MATCH ? AND c.deleted_at IS NULL AND m.seq IN (
            SELECT MAX(m2.seq) FROM messages m2 WHERE m2.seq IN (
                SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?)
            GROUP BY m2.conversation_id)
        """,
        (*marks, match, match),
    ).fetchall()
    width = CONVERSATION_WIDTH
    return (
        [(conversation_from_row(row), split_marked(row[width])) for row in title_rows],
        [
            (conversation_from_row(row), row[width], split_marked(row[width + 1]))
            for row in message_rows
        ],
    )


def _like_hits(conn: sqlite3.Connection, terms: list[str]) -> _Hits:
    patterns = [like_pattern(term) for term in terms]
    title_where = " AND ".join("c.title LIKE ? ESCAPE '\\'" for _ in terms)
    content_where = " AND ".join("m2.content LIKE ? ESCAPE '\\'" for _ in terms)
    title_rows = conn.execute(
        f"SELECT {CONVERSATION_COLUMNS} FROM conversations c "
        f"WHERE c.deleted_at IS NULL AND {title_where}",
        patterns,
    ).fetchall()
    # Like the FTS index, text still streaming is not searched.
    message_rows = conn.execute(
        f"""
        SELECT {CONVERSATION_COLUMNS}, m.id, m.content FROM messages m
            JOIN conversations c ON c.id = m.conversation_id
        WHERE c.deleted_at IS NULL AND m.seq IN (
            SELECT MAX(m2.seq) FROM messages m2
            WHERE m2.status != 'streaming' AND {content_where} GROUP BY m2.conversation_id)
        """,
        patterns,
    ).fetchall()
    width = CONVERSATION_WIDTH
    return (
        [(conversation_from_row(row), plain_snippet(row[1], terms)) for row in title_rows],
        [
            (conversation_from_row(row), row[width], plain_snippet(row[width + 1], terms))
            for row in message_rows
        ],
    )
