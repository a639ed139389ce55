"""Attached files and a chat that refers to them, for the tests of what purging attachments
keeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.attachments.attachment import Attachment, attach_file
from app.attachments.index import ChunkIndex
from app.chats.store import ChatStore


def attach_text(tmp_path: Path, name: str, text: str) -> Attachment:
    source = tmp_path / name
    source.write_text(text, encoding="utf-8")
    return attach_file(source)


def attachment_entry(attachment: Attachment) -> dict[str, Any]:
    return {
        "name": attachment.document.name,
        "size": attachment.stored.size,
        "sha256": attachment.stored.sha256,
        "suffix": Path(attachment.document.name).suffix,
        "kind": attachment.document.kind,
        "pages": attachment.document.pages,
    }


def chat_with_files(store: ChatStore, *files: Attachment, indexed: bool = False) -> str:
    conversation = store.create_conversation()
    store.add_message(
        conversation.id,
        "user",
        "What is in these?",
        metadata={"attachments": [attachment_entry(f) for f in files]},
    )
    store.add_message(conversation.id, "assistant", "Tides.")
    if indexed:
        with ChunkIndex(conversation.id) as index:
            for f in files:
                index.add(f.document)
    return conversation.id
