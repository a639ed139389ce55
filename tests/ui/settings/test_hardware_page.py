"""Settings → Hardware shows what `ember info --hardware` prints, read off the GUI thread."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication, QFormLayout, QLabel
from pytestqt.qtbot import QtBot

from app.config import Settings
from app.engine import backends
from app.engine.backends import BackendError
from app.ui.settings.hardware_page import HardwarePage
from app.ui.settings.settings_dialog import SettingsDialog


@pytest.fixture
def dialog(qtbot: QtBot, ember_app: QApplication, ember_home: Path) -> Iterator[SettingsDialog]:
    dialog = SettingsDialog(Settings(), None)
    qtbot.addWidget(dialog)
    dialog.show()
    yield dialog
    dialog.done(0)


def _page(dialog: SettingsDialog) -> HardwarePage:
    page = dialog.findChild(HardwarePage)
    assert page is not None
    return page


def _rows(page: HardwarePage) -> dict[str, str]:
    rows = {}
    roles = (QFormLayout.ItemRole.LabelRole, QFormLayout.ItemRole.FieldRole)
    for i in range(1, page.form.rowCount()):  # row 0: the back-end choice
        items = [page.form.itemAt(i, role) for role in roles]
        key, value = (item.widget() if item is not None else None for item in items)
        assert isinstance(key, QLabel) and isinstance(value, QLabel)
        rows[key.text()] = value.text()
    return rows


def test_the_hardware_page_shows_the_cpu_its_variant_and_the_devices(
    qtbot: QtBot, dialog: SettingsDialog
) -> None:
    page = _page(dialog)
    assert page.form.rowCount() == 1  # the choice only: nothing is read before it is shown
    with qtbot.waitSignal(page.hardware_read, timeout=60_000) as read:
        dialog.show_page("Hardware")
    assert dialog.nav.currentItem().text() == "Hardware"
    hw = read.args[0]
    assert _rows(page) == dict(backends.describe(hw))
    assert _rows(page)["CPU variant"].startswith(hw.cpu_variant)
    assert "AVX2 = 1" in _rows(page)["System info"]
    assert page.status.isHidden()
    with qtbot.waitSignal(page.hardware_read, timeout=60_000):
        page.refresh_button.click()
    assert _rows(page) == dict(backends.describe(hw))


def test_a_llama_cpp_that_cannot_be_read_says_so(
    qtbot: QtBot, dialog: SettingsDialog, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(lib_dir: Path | None = None) -> Any:
        raise BackendError("libggml.so has no ggml_backend_dev_count: reinstall it.")

    monkeypatch.setattr(backends, "hardware", broken)
    page = _page(dialog)
    dialog.show_page("Hardware")
    qtbot.waitUntil(page.refresh_button.isEnabled, timeout=60_000)
    assert page.status.text() == (
        "llama.cpp's back-ends could not be read: "
        "libggml.so has no ggml_backend_dev_count: reinstall it."
    )
    assert page.form.rowCount() == 1  # the choice only
