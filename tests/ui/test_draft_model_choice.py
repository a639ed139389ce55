"""The draft model in the app: the model list suggests a smaller model of the library with the
same tokenizer (its tooltip says so), Settings → Model loading → Draft model chooses none, the
suggestion or a file, and a load from the app carries the chosen draft model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.config import Settings
from app.engine import worker as worker_module
from app.engine.types import LoadedModel
from app.engine.worker import EngineWorker
from app.library.drafts import DRAFT_KEY, DRAFT_SUGGESTED
from app.library.local import Library
from app.ui.engine_session import EngineSession
from app.ui.header.model_list import ModelChoices, scan_models
from app.ui.settings.draft_choice import DraftModelChoice
from tests.helpers.gguf_writer import write_gguf
from tests.helpers.scripted_model import scripted_factory


@pytest.fixture
def library(tmp_path: Path) -> Library:
    models = tmp_path / "models" / "test"
    write_gguf(models / "big" / "big.gguf", vocab_size=300, payload=1 << 20)
    write_gguf(models / "small" / "small.gguf", vocab_size=300, payload=1 << 16)
    return Library(tmp_path / "models", hf_cache_dir=tmp_path / "hf", lmstudio_dirs=())


@pytest.fixture
def session(ember_app: QApplication, monkeypatch: pytest.MonkeyPatch) -> Iterator[EngineSession]:
    monkeypatch.setattr(worker_module, "open_draft", lambda model, params: None)
    worker = EngineWorker(model_factory=scripted_factory())
    yield EngineSession(Settings(), worker)
    worker.shutdown()


def test_the_model_list_suggests_a_draft_and_a_load_takes_the_chosen_one(
    qtbot: QtBot, library: Library, session: EngineSession
) -> None:
    settings = session.settings
    entries = {Path(e.path).stem: e for e in scan_models(settings, library)}
    assert entries["big"].draft is not None and Path(entries["big"].draft).stem == "small"
    assert "Suggested draft model: small.gguf" in entries["big"].tooltip
    assert entries["small"].draft is None
    catalog = ModelChoices(settings, library)
    catalog.models = list(entries.values())
    session.draft_for = catalog.draft_for
    choice = DraftModelChoice(settings)
    qtbot.addWidget(choice)
    assert choice.currentData() == "" and catalog.draft_for(entries["big"].path) is None
    choice.choose(DRAFT_SUGGESTED)
    assert settings.get(DRAFT_KEY) == DRAFT_SUGGESTED
    assert catalog.draft_for(entries["big"].path) == entries["big"].draft
    with qtbot.waitSignal(session.model_loaded, timeout=30_000) as loaded:
        session.load(entries["big"].path)
    result = loaded.args[0]
    assert isinstance(result, LoadedModel)
    assert result.params.draft_model == entries["big"].draft
    choice.choose(entries["small"].path)  # a file chosen: for every model
    assert choice.currentText() == "small.gguf"
    assert catalog.draft_for(entries["big"].path) == entries["small"].path
    choice.choose("")
    assert catalog.draft_for(entries["big"].path) is None
