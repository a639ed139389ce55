"""An answer whose model is still loading says so in its message ("Loading NAME…", not
"Thinking"), then thinks and streams once the model is there. A fake engine whose load waits
for the test."""

from __future__ import annotations

import threading
from pathlib import Path

from pytestqt.qtbot import QtBot

from app.engine.types import Finished, LoadRequest
from app.engine.worker import Job
from app.ui.chat.waiting_label import THINKING
from app.ui.main_window import MainWindow
from tests.helpers.fake_app import WAIT_MS, FakeEngine, model_file
from tests.helpers.parallel_fake import ParallelFakeWorker
from tests.helpers.window import widget


class GatedLoads(ParallelFakeWorker):
    """Loads of ``gated`` wait until ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.gated = ""
        self.gate = threading.Event()
        self.loading = threading.Event()

    def _control_job(self, job: Job) -> Finished:
        request = job.request
        if isinstance(request, LoadRequest) and request.path == self.gated:
            self.loading.set()
            self.gate.wait(WAIT_MS / 1000)
        return super()._control_job(job)

    def shutdown(self, timeout: float = 10.0) -> None:
        self.gate.set()
        super().shutdown(timeout)


FAKE_ENGINE = FakeEngine(worker=GatedLoads, model="first-model.gguf")


def test_an_answer_waiting_for_its_model_says_it_is_loading(
    qtbot: QtBot, window: MainWindow, fake_worker: GatedLoads, tmp_path: Path
) -> None:
    controller = window.controller
    fake_worker.gated = model_file(tmp_path, "second-model.gguf")
    controller.new_conversation()
    controller.set_model(fake_worker.gated)  # the chat's model, not the one loaded
    window.chat.composer.set_text("Hello?")
    window.chat.composer.send_button.click()
    answer = controller.answer
    assert answer is not None and answer.waiting_for_model
    qtbot.waitUntil(fake_worker.loading.is_set, timeout=WAIT_MS)
    label = widget(window, answer.message_id).thinking
    qtbot.waitUntil(label.isVisible, timeout=WAIT_MS)
    assert label.text() == "Loading second-model…" and not label.moving

    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS) as finished:
        fake_worker.gate.set()
        qtbot.waitUntil(lambda: label.text().startswith(THINKING) or not label.isVisible())
    message = finished.args[0]
    assert message.status == "complete" and message.content
    assert message.metadata["model"] == "second-model"
