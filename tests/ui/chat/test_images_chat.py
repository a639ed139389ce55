"""Images in the app's chat (issue 13, point 3): a PNG or JPEG attaches like a document (the
paperclip, a drop, a picture pasted from the clipboard), its chip shows a thumbnail, its name
and pixel size, a bad image says why on its chip; the question sends its image with a media
marker in its place, the message records it (stored by hash in EMBER_HOME) and shows its
thumbnail, after a restart too; follow-ups send the earlier images again, the same bytes in
the same places; a model without a projector refuses Send with a sentence that says so; a
remote model gets the image as an OpenAI ``image_url`` part.

On a fake engine that records the requests it gets (what reaches the model is tested here;
tests/ui/chat/test_images_real.py runs the real model with a projector)."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.attachments.store import attachments_dir, stored_path
from app.chats.models import Message
from app.engine.media import MEDIA_MARKER
from app.engine.types import LoadParams
from app.ui.chat.attached_prompt import IMAGE_TOKENS
from app.ui.chat.attaching import forget_thumbnails
from app.ui.chat.attachments_bar import AttachmentChip
from app.ui.engine_session import api_model_id
from app.ui.main_window import MainWindow
from tests.helpers.attaching import RecordingWorker, attach, drop_files, send_and_finish
from tests.helpers.fake_app import WAIT_MS, fake_services, model_file, show_window
from tests.helpers.images import png
from tests.helpers.mcp_config import time_server
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.tool_turn import offer_tools
from tests.helpers.window import on_remote_stub, widget

REFUSAL = "fake-model can't read images; load a vision model."


@pytest.fixture
def text_only_worker(tmp_path: Path) -> Iterator[RecordingWorker]:
    """The recording fake engine with a model loaded without a projector."""
    worker = RecordingWorker()
    path = model_file(tmp_path, "fake-model.gguf")
    worker.load(path, LoadParams(n_ctx=8192), api_model_id(path)).result(10)
    yield worker
    worker.shutdown()


@pytest.fixture
def worker(text_only_worker: RecordingWorker) -> RecordingWorker:
    """The recording fake engine with its model loaded with a projector (``vision``)."""
    (model_id, loaded), *_ = text_only_worker._models.items()
    text_only_worker._models[model_id] = dataclasses.replace(loaded, vision=True)
    return text_only_worker


def open_window(qtbot: QtBot, worker: RecordingWorker) -> Generator[MainWindow, None, None]:
    services = fake_services(worker, max_tokens=8)
    window = show_window(qtbot, services)
    yield window
    window.close()
    services.close()


@pytest.fixture
def window(qtbot: QtBot, ember_app: QApplication, worker: RecordingWorker) -> Iterator[MainWindow]:
    yield from open_window(qtbot, worker)


@pytest.fixture
def text_only_window(
    qtbot: QtBot,
    ember_app: QApplication,
    text_only_worker: RecordingWorker,
) -> Iterator[MainWindow]:
    yield from open_window(qtbot, text_only_worker)


def picture(folder: Path, name: str = "harbour.png", seed: int = 0, size: int = 48) -> Path:
    path = folder / name
    path.write_bytes(png(size, size // 2, seed))
    return path


def the_chip(window: MainWindow) -> AttachmentChip:
    (chip,) = window.chat.composer.attachments_bar.chips.values()
    return chip


def has_picture(chip: AttachmentChip) -> bool:
    return chip.thumbnail is not None and not chip.thumbnail.pixmap().isNull()


def sent_image_shown(window: MainWindow, message: Message) -> bool:
    chips = widget(window, message.id).attachment_chips
    if chips is None:
        return False
    return any(not label.pixmap().isNull() for label in chips.images.values())


def question_of(window: MainWindow) -> Message:
    return next(m for m in reversed(window.controller.branch) if m.role == "user")


def test_an_attached_image_shows_a_thumbnail_and_its_size_and_goes_with_its_question(
    qtbot: QtBot, window: MainWindow, worker: RecordingWorker, tmp_path: Path
) -> None:
    harbour = picture(tmp_path)
    data = harbour.read_bytes()
    attach(qtbot, window, harbour)
    chip = the_chip(window)
    assert chip.name_label.text() == "harbour.png"
    assert chip.detail_label.text() == f"48×24 · {len(data)} B"
    assert has_picture(chip)

    send_and_finish(qtbot, window, "What is in this picture?")
    request = worker.requests[-1]
    assert request.images == (data,)
    assert request.messages[-1]["content"] == f"{MEDIA_MARKER}\nWhat is in this picture?"
    question = question_of(window)
    assert question.content == "What is in this picture?"  # the bubble keeps the user's text
    (entry,) = question.metadata["attachments"]
    assert entry["kind"] == "image" and (entry["width"], entry["height"]) == (48, 24)
    assert stored_path(entry["sha256"], ".png").read_bytes() == data  # kept in EMBER_HOME
    qtbot.waitUntil(lambda: sent_image_shown(window, question), timeout=WAIT_MS)


def test_follow_ups_send_the_earlier_images_again_in_their_places(
    qtbot: QtBot, window: MainWindow, worker: RecordingWorker, tmp_path: Path
) -> None:
    first, second = picture(tmp_path, "a.png", 1), picture(tmp_path, "b.png", 2)
    attach(qtbot, window, first)
    send_and_finish(qtbot, window, "And this one?")
    send_and_finish(qtbot, window, "What colour was it?")  # no image of its own
    attach(qtbot, window, second)
    send_and_finish(qtbot, window, "Compare them.")

    second_request, third = worker.requests[-2], worker.requests[-1]
    assert second_request.images == (first.read_bytes(),)
    assert third.images == (first.read_bytes(), second.read_bytes())
    users = [str(m.get("content")) for m in third.messages if m.get("role") == "user"]
    assert users == [
        f"{MEDIA_MARKER}\nAnd this one?",
        "What colour was it?",
        f"{MEDIA_MARKER}\nCompare them.",
    ]


def test_a_picture_pasted_from_the_clipboard_is_attached_as_png(
    qtbot: QtBot, window: MainWindow, worker: RecordingWorker
) -> None:
    image = QImage(20, 10, QImage.Format.Format_RGB32)
    image.fill(0x3366CC)
    mime = QMimeData()
    mime.setImageData(image)
    QApplication.clipboard().setMimeData(mime)
    composer = window.chat.composer
    composer.input.setFocus()
    composer.input.paste()
    qtbot.waitUntil(lambda: not window.controller.attachments.reading, timeout=WAIT_MS)
    chip = the_chip(window)
    assert chip.name_label.text() == "Pasted image 1.png"
    assert chip.detail_label.text().startswith("20×10 · ")
    assert composer.text == ""  # attached, not written in
    send_and_finish(qtbot, window, "Describe it.")
    (sent,) = worker.requests[-1].images
    assert sent.startswith(b"\x89PNG\r\n\x1a\n")
    assert QImage.fromData(sent).size() == image.size()


def test_a_dropped_image_becomes_a_chip(qtbot: QtBot, window: MainWindow, tmp_path: Path) -> None:
    drop_files(window.chat, [picture(tmp_path, "dropped.png")])
    qtbot.waitUntil(lambda: not window.controller.attachments.reading, timeout=WAIT_MS)
    assert the_chip(window).name_label.text() == "dropped.png"
    assert has_picture(the_chip(window))


def test_a_damaged_image_says_why_on_its_chip_and_is_not_sent(
    qtbot: QtBot, window: MainWindow, worker: RecordingWorker, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    attach(qtbot, window, broken)
    detail = the_chip(window).detail_label.text()
    assert detail.startswith("broken.png: The PNG image is damaged")
    assert detail.endswith("It will be left out when you send.")
    send_and_finish(qtbot, window, "Anything?")
    assert worker.requests[-1].images == ()
    assert "attachments" not in question_of(window).metadata
    assert not any(attachments_dir().rglob("*.png"))  # nothing kept for a refused file


def test_a_model_without_a_projector_says_so_and_send_is_refused(
    qtbot: QtBot,
    text_only_window: MainWindow,
    text_only_worker: RecordingWorker,
    tmp_path: Path,
) -> None:
    window = text_only_window
    attach(qtbot, window, picture(tmp_path))
    chip = the_chip(window)
    assert chip.detail_label.text().endswith(f" · {REFUSAL}")
    assert chip.property("state") == "refused"
    window.chat.composer.set_text("What is in this picture?")
    window.chat.composer.send_button.click()
    banner = window.chat.banner
    qtbot.waitUntil(banner.isVisible, timeout=WAIT_MS)
    assert REFUSAL in banner.text.text()
    assert text_only_worker.requests == []
    assert window.controller.conversation is None  # nothing saved
    assert window.chat.composer.text == "What is in this picture?"  # nothing lost

    window.chat.composer.attachments.remove(chip.key)  # without the image it sends
    send_and_finish(qtbot, window, "What is in this picture?")


def test_a_remote_model_gets_the_image_as_an_image_url_part(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    with on_remote_stub(window) as stub:
        harbour = picture(tmp_path)
        attach(qtbot, window, harbour)
        assert not the_chip(window).detail_label.text().endswith(REFUSAL)
        send_and_finish(qtbot, window, "What is in this picture?")
        chats = [body for _, path, body in stub.hits if path == "/v1/chat/completions"]
        url = "data:image/png;base64," + base64.b64encode(harbour.read_bytes()).decode()
        assert chats[-1]["messages"][-1]["content"] == [
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "text", "text": "What is in this picture?"},
        ]


def test_a_new_window_shows_the_sent_image_from_its_stored_copy(
    qtbot: QtBot, ember_app: QApplication, worker: RecordingWorker, tmp_path: Path
) -> None:
    first = next(open_window_gen := open_window(qtbot, worker))
    attach(qtbot, first, picture(tmp_path))
    send_and_finish(qtbot, first, "What is in this picture?")
    conversation_id = first.controller.conversation.id if first.controller.conversation else ""
    open_window_gen.close()
    forget_thumbnails()  # as a restart would: the thumbnail is made from the stored file

    second = next(reopened := open_window(qtbot, worker))
    try:
        second.controller.open_conversation(conversation_id)
        question = question_of(second)
        chips = widget(second, question.id).attachment_chips
        assert chips is not None
        (label,) = chips.images.values()
        framed = (label.width(), label.height())
        assert framed == (102, 54)  # a 48x24 picture's shape, known before it loads
        qtbot.waitUntil(lambda: sent_image_shown(second, question), timeout=WAIT_MS)
        assert (label.width(), label.height()) == framed  # the message does not jump
    finally:
        reopened.close()


def test_a_follow_up_to_a_model_without_a_projector_names_the_earlier_image_it_leaves_out(
    qtbot: QtBot, window: MainWindow, worker: RecordingWorker, tmp_path: Path
) -> None:
    attach(qtbot, window, picture(tmp_path))
    send_and_finish(qtbot, window, "What is in this picture?")
    engine = window.services.engine
    assert engine.loaded is not None
    engine.loaded = dataclasses.replace(engine.loaded, vision=False)  # as another model loaded
    answer = send_and_finish(qtbot, window, "And the sky?")
    request = worker.requests[-1]
    assert request.images == ()
    assert not any(MEDIA_MARKER in str(m.get("content")) for m in request.messages)
    assert answer.metadata["attachments_left_out"] == [f"harbour.png was left out: {REFUSAL}"]


def test_an_answer_with_tools_leaves_the_images_out_and_says_so(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    scripted = ScriptedEngine(["A harbour."])  # the tool loop's engine: no calls
    offer_tools(window, time_server(), scripted)
    attach(qtbot, window, picture(tmp_path))
    answer = send_and_finish(qtbot, window, "What is in this picture?")
    assert str(scripted.requests[-1].messages[-1].get("content")) == "What is in this picture?"
    (note,) = answer.metadata["attachments_left_out"]
    assert note.startswith("harbour.png was left out: images are not sent while the chat's tools")


def test_the_context_meter_counts_an_attached_image(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    meter = window.chat.composer.meter
    before = meter.attached.tokens
    attach(qtbot, window, picture(tmp_path))
    qtbot.waitUntil(lambda: meter.attached.images == ("harbour.png",), timeout=WAIT_MS)
    assert meter.attached.tokens == before + IMAGE_TOKENS
    assert f"harbour.png is counted as about {IMAGE_TOKENS} tokens" in meter.attached.describe()
