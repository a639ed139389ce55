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

Images: every question's images go with it, each as a ``MEDIA_MARKER`` before its text, in
order, and their stored bytes in ``images`` (the same bytes each time, so the prefix cache
keeps matching them). The answer runner sends only the images of the messages the context
keeps; a model that cannot take them gets ``text_only``, which names them under the answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.attachments.context import (
    INTRO,
    Source,
    build_context,
    excerpt_text,  # the core's own formats, so a rebuilt question reads as the first time
    whole_text,
)
from app.attachments.document import CancelFlag, Document, Progress
from app.attachments.embedder import Embedder
from app.attachments.errors import AttachmentError
from app.attachments.image import entry_bytes, is_image_entry
from app.chats.models import Message
from app.engine.fitting import PER_MESSAGE_OVERHEAD, estimate_tokens
from app.engine.media import MEDIA_MARKER
from app.ui.chat.attaching import cached_document
from app.ui.chat.waiting_label import reading_text

SHOWN_WHOLE_CHARS = 2000  # of a whole document, kept with the answer to show as its passage
# Context positions an image is counted as before the engine says: Gemma 3's projector takes
# 256, most others take 256-729; the engine still refuses a prompt that does not fit.
IMAGE_TOKENS = 256


@dataclass(frozen=True, slots=True)
class AttachedPrompt:
    contents: dict[str, str]  # message id -> the text the model gets instead of its content
    sources: list[dict[str, Any]]  # the question's sources, for its answer's metadata
    left_out: list[str]  # one sentence per attached file that could not be used
    # message id -> its images' bytes, in order (one MEDIA_MARKER each in its contents)
    images: dict[str, tuple[bytes, ...]] = dataclasses.field(default_factory=dict)
    image_names: tuple[str, ...] = ()  # of the images in ``images``

    def images_after(self, history: Sequence[Message], dropped: int) -> tuple[bytes, ...]:
        """The images of the messages the context keeps (all but the first ``dropped``)."""
        return tuple(b for m in history[dropped:] for b in self.images.get(m.id, ()))

    def text_only(self, why: str) -> AttachedPrompt:
        """The same prompt without its images (their markers taken out): for a model that
        cannot take them, ``why`` says so under the answer, with their names."""
        if not self.images:
            return self
        contents = dict(self.contents)
        for message_id, images in self.images.items():
            marked = contents[message_id]
            contents[message_id] = marked[len(with_markers("", len(images))) :]
        names = list(dict.fromkeys(self.image_names))
        verb = "was" if len(names) == 1 else "were"
        note = f"{', '.join(names)} {verb} left out: {why}"
        return AttachedPrompt(contents, self.sources, [*self.left_out, note])

    def without_room_for(self, dropped: Sequence[Message]) -> AttachedPrompt:
        """Says which files went with the earlier messages the context had no room for."""
        names = list(dict.fromkeys(str(e.get("name")) for m in dropped for e in attachments_of(m)))
        if not names:
            return self
        return dataclasses.replace(self, left_out=[*self.left_out, left_out_for_room(names)])


@dataclass(slots=True)
class ReadingProgress:
    """``prepare_prompt``'s progress for the answer's message: ``send((key, text))`` ("Reading
    report.pdf… 40%", waiting_label.py) each time the percent grows. Called on the task's
    thread: give it a Relay's ``send``."""

    send: Callable[[object], None]
    key: object  # which answer
    names: list[str]  # of the question's documents
    percent: int = -1

    def __call__(self, done: int, total: int) -> None:
        percent = done * 100 // total if total > 0 else 0
        if percent > self.percent:
            self.percent = percent
            self.send((self.key, reading_text(self.names, done, total)))


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


def documents_of(message: Message) -> list[dict[str, Any]]:
    return [e for e in attachments_of(message) if not is_image_entry(e)]


def images_of(message: Message) -> list[dict[str, Any]]:
    return [e for e in attachments_of(message) if is_image_entry(e)]


def with_markers(text: str, count: int) -> str:
    """``text`` after ``count`` images' markers (the images go before the question)."""
    return "\n".join([MEDIA_MARKER] * count + [text]) if count else text


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
    *,
    embedder: Embedder | None = None,
    progress: Progress | None = None,
) -> AttachedPrompt:
    """``history`` ends with the question; ``budget``: tokens for the messages (the context
    less the system prompt, the template's overhead and the answer's room). With an
    ``embedder`` the question's passages are chosen by meaning too (BM25 and vectors fused).
    ``progress`` reports the indexing (and embedding) of the question's long documents, as
    ``build_context`` does."""
    prompt = _with_documents(history, budget, conversation_id, cancel, embedder, progress=progress)
    contents, left_out, images = dict(prompt.contents), list(prompt.left_out), {}
    names: list[str] = []
    for message in history:
        entries = images_of(message)
        read: list[bytes] = []
        for entry in entries:
            try:
                read.append(entry_bytes(entry))
                names.append(str(entry.get("name")))
            except (AttachmentError, ValueError) as error:
                left_out.append(f"{entry.get('name') or 'An image'} was left out: {error}")
        if read:
            contents[message.id] = with_markers(
                contents.get(message.id, message.content), len(read)
            )
            images[message.id] = tuple(read)
    return AttachedPrompt(contents, prompt.sources, left_out, images, tuple(names))


def _with_documents(
    history: Sequence[Message],
    budget: int,
    conversation_id: str,
    cancel: CancelFlag | None,
    embedder: Embedder | None,
    *,
    progress: Progress | None = None,
) -> AttachedPrompt:
    contents: dict[str, str] = {}
    left_out: list[str] = []
    question = history[-1]
    for index, message in enumerate(history[:-1]):
        entries = documents_of(message)
        if entries:
            documents = _documents(entries, left_out)
            recorded = _recorded_sources(history[index + 1 :])
            contents[message.id] = _rebuilt(message, documents, recorded, budget, conversation_id)
    used = sum(
        estimate_tokens(contents.get(m.id, m.content)) + PER_MESSAGE_OVERHEAD for m in history[:-1]
    )
    room = max(budget - used, budget // 2) - estimate_tokens(question.content)
    room -= PER_MESSAGE_OVERHEAD
    documents = _documents(documents_of(question), left_out)
    context = build_context(
        documents,
        question.content,
        room,
        estimate_tokens,
        conversation_id,
        cancel=cancel,
        embedder=embedder,
        progress=progress,
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


def prepared_prompt_with(
    find_embedder: Callable[[], Embedder | None] | None,
    history: list[Message],
    budget: int,
    conversation_id: str,
    cancel: CancelFlag,
    *,
    progress: ReadingProgress,
) -> AttachedPrompt:
    """On a task thread: the embedder the user chose (it may load an embedding GGUF the first
    time, or look for one in the library), then prepare_prompt with it."""
    embedder = find_embedder() if find_embedder is not None else None
    return prepare_prompt(
        history, budget, conversation_id, cancel, embedder=embedder, progress=progress
    )
