"""The Settings choice of embedding model for attached files (the chat settings drawer's
"Attached files" section): saved at once, read by the code choosing passages."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.attachments.embedder import LOADED, OFF, Embedders, GgufEmbedder, embedding_choice
from app.config import Settings
from app.ui.header.model_list import ModelEntry
from app.ui.settings.embedding_choice import EmbeddingChoice


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
    assert labels[0] == "The loaded model" and labels[-1] == "Off: words alone"
    assert "nomic-embed  (Q8_0 · 30 MB)" in labels
    assert choice.combo.currentData() == LOADED

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
