"""The text the model gets for questions with attached files (a worker thread: it touches no
Qt object).

The question being answered gets ``app.attachments.context.build_context``: its documents
whole, or the passages most relevant to it, within the room the context leaves after the
system prompt, the history and the answer's room (at least half of it: older turns are then
left out by the usual fitting rule, and the chat says so). Its sources go into the answer's
metadata (``sources``), with the passages' text.

An earlier question keeps what it was given (follow-ups still see its files): its whole
documents are read again from their stored copies in EMBER_HOME and its passages are the ones
its answer recorded, so the prompt's beginning is the same text as last time (the engine's
prefix cache reuses it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.attachments.context import (
    INTRO,
    Source,
    build_context,
    excerpt_text,  # the core's own formats, so a rebuilt question reads as the first time
    whole_text,
)
from app.attachments.document import CancelFlag, Document
from app.attachments.errors import AttachmentError
from app.chats.models import Message
from app.engine.fitting import PER_MESSAGE_OVERHEAD, estimate_tokens
from app.ui.chat.attaching import cached_document

SHOWN_WHOLE_CHARS = 2000  # of a whole document, kept with the answer to show as its passage


@dataclass(frozen=True, slots=True)
class AttachedPrompt:
    contents: dict[str, str]  # message id -> the text the model gets instead of its content
    sources: list[dict[str, Any]]  # the question's sources, for its answer's metadata
    left_out: list[str]  # one sentence per attached file that could not be used

    def without_room_for(self, dropped: Sequence[Message]) -> AttachedPrompt:
        """Says which files went with the earlier messages the context had no room for."""
        names = list(dict.fromkeys(str(e.get("name")) for m in dropped for e in attachments_of(m)))
        if not names:
            return self
        return dataclasses.replace(self, left_out=[*self.left_out, left_out_for_room(names)])


def left_out_for_room(names: list[str]) -> str:
    one = len(names) == 1
    return (
        f"{', '.join(names)} {'was' if one else 'were'} left out: the earlier message "
        f"{'it' if one else 'they'} came with no longer fits in the context. Attach "
        f"{'it' if one else 'them'} again to ask about {'it' if one else 'them'} here."
    )


def attachments_of(message: Message) -> list[dict[str, Any]]:
    """The attachment entries a user message recorded (see attaching.metadata_entry)."""
    entries = message.metadata.get("attachments") if message.role == "user" else None
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("sha256"), str)]


def needs_preparing(history: Sequence[Message]) -> bool:
    return any(attachments_of(m) for m in history)


def source_entry(source: Source) -> dict[str, Any]:
    text = source.text[:SHOWN_WHOLE_CHARS] if source.whole else source.text
    return {
        "file": source.file,
        "page": source.page,
        "heading": source.heading,
        "where": source.where,
        "text": text,
        "whole": source.whole,
    }


def prepare_prompt(
    history: Sequence[Message],
    budget: int,
    conversation_id: str,
    cancel: CancelFlag | None = None,
) -> AttachedPrompt:
    """``history`` ends with the question; ``budget``: tokens for the messages (the context
    less the system prompt, the template's overhead and the answer's room)."""
    contents: dict[str, str] = {}
    left_out: list[str] = []
    question = history[-1]
    for index, message in enumerate(history[:-1]):
        entries = attachments_of(message)
        if entries:
            documents = _documents(entries, left_out)
            recorded = _recorded_sources(history[index + 1 :])
            contents[message.id] = _rebuilt(message, documents, recorded, budget, conversation_id)
    used = sum(
        estimate_tokens(contents.get(m.id, m.content)) + PER_MESSAGE_OVERHEAD for m in history[:-1]
    )
    room = max(budget - used, budget // 2) - estimate_tokens(question.content)
    room -= PER_MESSAGE_OVERHEAD
    documents = _documents(attachments_of(question), left_out)
    context = build_context(
        documents, question.content, room, estimate_tokens, conversation_id, cancel=cancel
    )
    if documents:
        contents[question.id] = context.prompt(question.content)
    return AttachedPrompt(contents, [source_entry(s) for s in context.sources], left_out)


def _documents(entries: list[dict[str, Any]], left_out: list[str]) -> list[Document]:
    documents: list[Document] = []
    for entry in entries:
        try:
            documents.append(cached_document(entry))
        except (AttachmentError, ValueError) as error:
            name = entry.get("name") or "An attached file"
            left_out.append(f"{name} was left out: {error}")
    return documents


def _recorded_sources(after: Sequence[Message]) -> list[dict[str, Any]] | None:
    """The sources the question's answer recorded (its first answer after it)."""
    for message in after:
        if message.role == "user":
            return None
        sources = message.metadata.get("sources")
        if message.role == "assistant" and isinstance(sources, list):
            return [s for s in sources if isinstance(s, dict)]
    return None


def _rebuilt(
    message: Message,
    documents: list[Document],
    recorded: list[dict[str, Any]] | None,
    budget: int,
    conversation_id: str,
) -> str:
    if recorded is None:  # its answer failed before it recorded them: choose them again
        context = build_context(
            documents, message.content, budget // 2, estimate_tokens, conversation_id
        )
        return context.prompt(message.content)
    by_name = {d.name: d for d in documents}
    parts = [INTRO]
    for source in recorded:
        name = str(source.get("file") or "")
        if source.get("whole"):
            document = by_name.get(name)
            if document is not None:
                parts.append(whole_text(document))
            continue
        page, heading = source.get("page"), source.get("heading")
        parts.append(
            excerpt_text(
                Source(
                    name,
                    page if isinstance(page, int) else None,
                    heading if isinstance(heading, str) else None,
                    str(source.get("text") or ""),
                )
            )
        )
    if len(parts) == 1:
        return message.content
    return "\n\n".join(parts) + "\n\n" + message.content
