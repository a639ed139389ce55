"""The Settings choice of embedding model for attached files (the chat settings drawer's
"Attached files" section): saved at once, read by the code choosing passages."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.attachments.embedder import (
    AUTO,
    LOADED,
    OFF,
    Embedders,
    GgufEmbedder,
    embedding_choice,
)
from app.config import Settings
from app.library.local import Library
from app.ui.header.model_list import ModelEntry
from app.ui.settings.embedding_choice import EmbeddingChoice
from tests.helpers.gguf_writer import write_gguf


def entry(path: str, name: str) -> ModelEntry:
    return ModelEntry(path=path, name=name, size=1, detail="Q8_0 · 30 MB")


def test_choosing_an_embedding_gguf_is_saved_and_used_for_the_next_question(
    qtbot: QtBot, tmp_path: Path
) -> None:
    settings = Settings(tmp_path / "settings.json")
    choice = EmbeddingChoice(settings)
    qtbot.addWidget(choice)
    choice.set_models([entry("/m/nomic.gguf", "nomic-embed"), entry("/m/chat.gguf", "chat")])
    labels = [choice.combo.itemText(i) for i in range(choice.combo.count())]
    assert labels[:2] == ["Automatic: an embedding model from the library", "The loaded model"]
    assert labels[-1] == "Off: words alone"
    assert "nomic-embed  (Q8_0 · 30 MB)" in labels
    assert choice.combo.currentData() == AUTO  # the default
    assert choice.combo.findData(LOADED) == 1

    with qtbot.waitSignal(choice.choice_changed) as changed:
        choice.combo.setCurrentIndex(choice.combo.findData("/m/nomic.gguf"))
    assert changed.args == ["/m/nomic.gguf"]
    again = Settings(tmp_path / "settings.json")  # written at once
    assert embedding_choice(again) == "/m/nomic.gguf"
    embedders = Embedders()
    embedder = embedders.get(embedding_choice(again), None, None)
    assert isinstance(embedder, GgufEmbedder) and embedder.path == "/m/nomic.gguf"
    embedders.close()

    choice.set_models([])  # the file left the library: the choice stays, listed by its path
    assert choice.combo.currentData() == "/m/nomic.gguf"
    choice.combo.setCurrentIndex(choice.combo.findData(OFF))
    assert embedding_choice(Settings(tmp_path / "settings.json")) == OFF
    assert Embedders().get(OFF, None, None) is None


def test_automatic_uses_the_smallest_embedding_gguf_in_the_library_else_words_alone(
    tmp_path: Path,
) -> None:
    models = tmp_path / "models"
    library = Library(
        models_dir=models,
        hf_cache_dir=tmp_path / "hf",
        lmstudio_dirs=(),
        cache_path=tmp_path / "c.json",
    )
    embedders = Embedders(library)
    write_gguf(models / "chat" / "chat-Q4_K_M.gguf", arch="llama")
    library.scan()
    assert embedders.get(AUTO, None, None) is None  # a chat model only: words alone

    small = write_gguf(models / "bge" / "bge-small-Q8_0.gguf", arch="bert", payload=1000)
    write_gguf(models / "nomic" / "nomic-embed-F16.gguf", arch="nomic-bert", payload=90000)
    library.scan()
    embedder = embedders.get(AUTO, None, None)
    assert isinstance(embedder, GgufEmbedder) and embedder.path == str(small)
    embedders.close()
