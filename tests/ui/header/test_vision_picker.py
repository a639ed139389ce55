"""The model picker and My Models mark vision models, and the pill says the loaded one takes
images. The real library over real files (the test model linked twice into Ember's models
folder, once beside the tiny built projector) and the real engine loading them."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.config import Settings, paths
from app.engine.worker import EngineWorker
from app.library.local import Library
from app.ui.engine_session import EngineSession
from app.ui.header.model_list import ModelChoices
from app.ui.header.model_picker import ModelPicker
from app.ui.models.my_models import LocalModelRow
from app.ui.models.widgets import Chip
from tests.helpers.gguf_writer import write_gguf
from tests.helpers.projector import model_folder


def test_vision_models_are_marked_in_the_picker_my_models_and_the_pill(
    qtbot: QtBot, gemma_path: Path, tmp_path: Path, ember_app: QApplication
) -> None:
    models = paths().models_dir
    vision = model_folder(gemma_path, models / "test" / "vision", projector=True)
    # the library lists a file once, whatever links to it: another model for the list
    listed = write_gguf(models / "test" / "tiny" / "tiny-Q4_K_M.gguf")
    plain = model_folder(gemma_path, tmp_path / "plain", projector=False)  # opened as a file
    library = Library()
    catalog = ModelChoices(Settings(), library)
    catalog.refresh()
    qtbot.waitUntil(lambda: len(catalog.models) == 2, timeout=30_000)
    by_path = {m.path: m for m in catalog.models}
    assert by_path[str(vision)].detail.startswith("Base model · Vision · Q4_K_M · ")  # no template
    assert not by_path[str(listed)].detail.startswith("Vision")

    session = EngineSession(Settings(), EngineWorker())
    picker = ModelPicker(session, catalog)
    qtbot.addWidget(picker)
    picker.show()
    try:
        picker.menu.aboutToShow.emit()
        actions = {str(a.data()): a for a in picker.menu.actions() if isinstance(a, QAction)}
        assert " · Vision · " in actions[str(vision)].text()
        assert "Vision: takes images (loads with mmproj-gemma-f16.gguf)" in (
            actions[str(vision)].toolTip()
        )
        assert "Vision" not in actions[str(listed)].text() + actions[str(listed)].toolTip()

        with qtbot.waitSignal(session.model_loaded, timeout=180_000):
            actions[str(vision)].trigger()
        assert picker.vision_icon.isVisible()
        assert "Vision: takes images (mmproj-gemma-f16.gguf)" in picker.button.toolTip()
        with qtbot.waitSignal(session.model_loaded, timeout=180_000):
            picker.load(str(plain))
        assert not picker.vision_icon.isVisible()
        assert "Vision" not in picker.button.toolTip()
    finally:
        session.shutdown()

    rows = {str(m.path): LocalModelRow(m) for m in library.models}
    for row in rows.values():
        qtbot.addWidget(row)
    chips = {
        path: [c for c in row.findChildren(Chip) if c.text() == "Vision"]
        for path, row in rows.items()
    }
    assert not chips[str(listed)]
    (chip,) = chips[str(vision)]
    assert chip.toolTip() == "Takes images: loads with its vision projector mmproj-gemma-f16.gguf"
