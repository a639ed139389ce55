"""Exports carry the attachments: Markdown links to the stored copies and an answer's sources;
the JSON keeps the metadata with the hashes, and importing it keeps them (real SQLite, real
files in the test's EMBER_HOME)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from app.attachments.attachment import attach_file
from app.chats.store import ChatStore

SOURCES = [
    {
        "file": "tide notes.md",
        "page": None,
        "heading": "Tides",
        "where": 'tide notes.md, section "Tides"',
        "text": "The tide turns twice a day.",
        "whole": False,
    },
    {"file": "report.pdf", "page": 27, "heading": None, "text": "p. 27", "whole": False},
]


def _chat(store: ChatStore, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    source = tmp_path / "tide notes.md"
    source.write_text("# Tides\nThe tide turns twice a day.\n", encoding="utf-8")
    attached = attach_file(source)
    entry = {
        "name": "tide notes.md",
        "size": attached.stored.size,
        "sha256": attached.stored.sha256,
        "suffix": ".md",
        "kind": attached.document.kind,
        "pages": None,
    }
    gone = {**entry, "name": "report.pdf", "sha256": "ab" * 32, "suffix": ".pdf", "pages": 40}
    conversation = store.create_conversation("Tides")
    store.add_message(
        conversation.id, "user", "When does the tide turn?", metadata={"attachments": [entry, gone]}
    )
    store.add_message(
        conversation.id,
        "assistant",
        "Twice a day.",
        metadata={"sources": SOURCES, "attachments_left_out": ["old.txt was left out: gone."]},
    )
    return conversation.id, entry


def test_markdown_links_each_file_to_its_stored_copy_and_lists_the_sources(
    store: ChatStore, tmp_path: Path
) -> None:
    conversation_id, entry = _chat(store, tmp_path)
    text = store.export_markdown(conversation_id)

    link = next(line for line in text.splitlines() if line.startswith("- [tide notes.md]("))
    url = link.split("](", 1)[1].split(" ", 1)[0]
    target = Path(unquote(urlparse(url).path))
    assert target.read_text(encoding="utf-8").startswith("# Tides")  # a reader can follow it
    assert f'"sha256 {entry["sha256"]}"' in link
    assert "- report.pdf (not stored on this computer; sha256 " + "ab" * 32 + ")" in text
    assert ", 40 pages" in text

    answer = text.split("## Assistant", 1)[1]
    assert "**Sources:**" in answer
    assert '- tide notes.md, section "Tides"' in answer
    assert "- report.pdf, page 27" in answer
    assert "*(old.txt was left out: gone.)*" in answer
    assert "**Attached:**" not in answer  # the files are listed with their question only


def test_json_keeps_the_attachments_with_their_hashes_through_an_import(
    store: ChatStore, tmp_path: Path
) -> None:
    conversation_id, entry = _chat(store, tmp_path)
    exported = json.loads(json.dumps(store.export_json(conversation_id)))
    question, answer = exported["messages"]
    assert question["metadata"]["attachments"][0] == entry
    assert answer["metadata"]["sources"] == SOURCES

    imported = store.import_json(exported)
    branch = store.active_branch(imported.id)
    assert branch[0].metadata["attachments"][0] == entry
    assert branch[1].metadata["sources"] == SOURCES
    assert "- [tide notes.md](file:" in store.export_markdown(imported.id)

    # The imported copy uses the stored file: purging the original keeps it.
    store.delete_conversation(conversation_id)
    store.purge_deleted()
    stored = next(
        line for line in store.export_markdown(imported.id).splitlines() if "tide notes" in line
    )
    assert "not stored" not in stored
