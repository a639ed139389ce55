"""The issue's "an image reaches a model that has a projector, in the app": the real test model
loaded with the tiny Gemma 3 projector of tests/helpers/projector.py, a PNG attached in the
window, a question sent, and the answer streams. What this proves: the app's image path (the
chip, the stored copy, the media marker and the bytes in the chat request) drives the real
engine through image -> projector -> embeddings -> decode, the message keeps the image, and a
new window on the same EMBER_HOME shows it again. What it cannot: whether the answer describes
the picture (the projector's weights are random noise, and the model is tiny)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.attachments.store import stored_path
from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.ui.chat.attaching import forget_thumbnails
from app.ui.main_window import MainWindow
from tests.helpers.images import png
from tests.helpers.projector import IMAGE_SIZE, write_projector
from tests.helpers.window import ANSWER_TIMEOUT, TEST_CTX, loaded_worker, send, widget


@pytest.fixture(scope="module")
def vision_worker(
    gemma_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EngineWorker]:
    mmproj = write_projector(tmp_path_factory.mktemp("mmproj") / "mmproj-test.gguf")
    params = LoadParams(n_ctx=TEST_CTX, flash_attn=False, mmproj=str(mmproj))
    yield from loaded_worker(gemma_path, params)


ENGINE_WORKER = "vision_worker"  # the model with its projector


def test_an_attached_png_reaches_the_real_model_and_a_restart_shows_it(
    qtbot: QtBot, make_window: Callable[[], MainWindow], tmp_path: Path
) -> None:
    window = make_window()
    assert window.services.engine.loaded is not None and window.services.engine.loaded.vision
    picture = tmp_path / "tiles.png"
    picture.write_bytes(png(IMAGE_SIZE, IMAGE_SIZE, seed=3))
    window.chat.composer.attach_files([picture])
    tray = window.controller.attachments
    qtbot.waitUntil(lambda: not tray.reading, timeout=ANSWER_TIMEOUT)
    (chip,) = window.chat.composer.attachments_bar.chips.values()
    assert chip.property("state") == "ready"  # not refused: this model reads images

    answer = send(qtbot, window, "What is in this picture?")
    assert answer.status == "complete" and answer.content, answer.metadata
    assert "attachments_left_out" not in answer.metadata  # the image went in, not a note
    question = next(m for m in window.controller.branch if m.role == "user")
    (entry,) = question.metadata["attachments"]
    assert entry["kind"] == "image" and entry["name"] == "tiles.png"
    assert stored_path(entry["sha256"], ".png").read_bytes() == picture.read_bytes()
    conversation_id = question.conversation_id
    window.close()

    forget_thumbnails()  # as a restart would: the thumbnail comes from the stored copy
    reopened = make_window()
    reopened.controller.open_conversation(conversation_id)
    shown = widget(reopened, question.id)
    chips = shown.attachment_chips
    assert chips is not None
    qtbot.waitUntil(
        lambda: any(not label.pixmap().isNull() for label in chips.images.values()),
        timeout=ANSWER_TIMEOUT,
    )
