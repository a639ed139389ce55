"""Export a conversation to Markdown or JSON, import one from JSON (file dialogs + files)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from app.chats.models import ChatStoreError, Conversation
from app.chats.store import ChatStore
from app.config import atomic_write_text

FORMATS = {"markdown": ("Markdown (*.md)", ".md"), "json": ("Ember conversation (*.json)", ".json")}


def safe_file_name(title: str) -> str:
    name = re.sub(r"[^\w\- ]+", "", title).strip()[:60]
    return name or "conversation"


def write_export(store: ChatStore, conversation_id: str, path: Path, fmt: str) -> None:
    if fmt == "markdown":
        text = store.export_markdown(conversation_id)
    else:
        text = json.dumps(store.export_json(conversation_id), ensure_ascii=False, indent=2)
    atomic_write_text(path, text)


def read_import(store: ChatStore, path: Path) -> Conversation:
    """Raises ValueError with a readable reason for a file that is not an Ember export."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path.name} could not be read: {error}") from error
    except json.JSONDecodeError as error:
        raise ValueError(f"{path.name} is not JSON ({error}).") from error
    return store.import_json(data)


def export_with_dialog(
    parent: QWidget, store: ChatStore, conversation_id: str, fmt: str
) -> Path | None:
    conversation = store.get_conversation(conversation_id)
    file_filter, suffix = FORMATS[fmt]
    start = str(Path.home() / (safe_file_name(conversation.title) + suffix))
    chosen, _ = QFileDialog.getSaveFileName(parent, "Export conversation", start, file_filter)
    if not chosen:
        return None
    path = Path(chosen)
    if not path.suffix:
        path = path.with_suffix(suffix)
    try:
        write_export(store, conversation_id, path, fmt)
    except (OSError, ChatStoreError) as error:
        QMessageBox.warning(parent, "Export failed", f"The conversation was not exported: {error}")
        return None
    return path


def import_with_dialog(parent: QWidget, store: ChatStore) -> Conversation | None:
    chosen, _ = QFileDialog.getOpenFileName(
        parent, "Import conversation", str(Path.home()), FORMATS["json"][0]
    )
    if not chosen:
        return None
    try:
        return read_import(store, Path(chosen))
    except (ValueError, ChatStoreError) as error:
        QMessageBox.warning(parent, "Import failed", f"Nothing was imported. {error}")
        return None
