"""The app loads a library model with the vision projector in its folder, and says so.

The real test model, linked into a folder beside the tiny built projector
(tests/helpers/projector.py: random weights; what is proved is that the projector is loaded
with the model by the app's own load path, not that it sees anything).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.config import Settings
from app.engine.types import LoadedModel, LoadParams
from app.engine.worker import EngineWorker
from app.ui.engine_session import EngineSession
from tests.helpers.projector import model_folder


def test_the_app_loads_a_model_with_its_projector_and_knows_it_takes_images(
    qtbot: QtBot, gemma_path: Path, tmp_path: Path, ember_app: QApplication
) -> None:
    vision = model_folder(gemma_path, tmp_path / "vision", projector=True)
    plain = model_folder(gemma_path, tmp_path / "plain", projector=False)
    session = EngineSession(Settings(), EngineWorker())
    try:
        assert not session.takes_images
        with qtbot.waitSignal(session.model_loaded, timeout=180_000) as loaded:
            session.load(str(vision), LoadParams(n_ctx=512))
        model: LoadedModel = loaded.args[0]
        assert model.vision
        assert model.params.mmproj == str(tmp_path / "vision" / "mmproj-gemma-f16.gguf")
        assert session.takes_images
        session.select_remote("somewhere::model")  # a remote model gets text only
        assert not session.takes_images
        session.select_remote(None)
        with qtbot.waitSignal(session.model_loaded, timeout=180_000) as loaded:
            session.load(str(plain), LoadParams(n_ctx=512))
        assert not loaded.args[0].vision and not session.takes_images
    finally:
        session.shutdown()
