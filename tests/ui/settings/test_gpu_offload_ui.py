"""Offloading in the app: the GPU layers spin box reads "Automatic" (-2) and "All layers" (-1),
Settings → Hardware chooses the back-end (Automatic, CPU only, each GPU) for the next load, and
a load where the CPU took over from a failed GPU says so in the chat's banner."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.config import Settings
from app.engine import backends
from app.engine.backends import Device, Hardware
from app.engine.load_settings import load_params
from app.engine.sizing import AUTO_GPU_LAYERS
from app.engine.types import LoadedModel
from app.ui.main_window import MainWindow
from app.ui.settings.hardware_page import HardwarePage
from app.ui.settings.settings_dialog import SettingsDialog
from tests.helpers.gpu import GIB, failing_gpu, fake_gpu

VULKAN0 = Device("Vulkan0", "AMD Radeon RX 7600", "Vulkan", "gpu", 7 * GIB, 8 * GIB)
CPU = Device("CPU", "Test CPU", "CPU", "cpu", 16 * GIB, 24 * GIB)


def _hardware(*gpus: Device) -> Hardware:
    return Hardware("/lib", True, ("CPU", "Vulkan"), (*gpus, CPU), "haswell", ("AVX2",), "CPU")


@pytest.fixture
def settings(ember_home: Path) -> Settings:
    return Settings()


@pytest.fixture
def dialog(qtbot: QtBot, ember_app: QApplication, settings: Settings) -> Iterator[SettingsDialog]:
    dialog = SettingsDialog(settings, None)
    qtbot.addWidget(dialog)
    dialog.show()
    yield dialog
    dialog.done(0)


def test_the_gpu_layers_box_reads_automatic_and_all_layers(
    qtbot: QtBot, dialog: SettingsDialog, settings: Settings
) -> None:
    spin = dialog.n_gpu_layers
    assert (spin.value(), spin.text()) == (AUTO_GPU_LAYERS, "Automatic")  # the default
    qtbot.keyClick(spin, Qt.Key.Key_Up)
    assert (spin.text(), settings.get("load.n_gpu_layers")) == ("All layers", -1)
    qtbot.keyClick(spin, Qt.Key.Key_Up)
    assert (spin.text(), settings.get("load.n_gpu_layers")) == ("0", 0)
    spin.lineEdit().selectAll()
    qtbot.keyClicks(spin, "automatic")
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    assert settings.get("load.n_gpu_layers") == AUTO_GPU_LAYERS


def _page(qtbot: QtBot, dialog: SettingsDialog) -> HardwarePage:
    page = dialog.findChild(HardwarePage)
    assert page is not None
    with qtbot.waitSignal(page.hardware_read, timeout=60_000):
        dialog.show_page("Hardware")
    return page


def _items(page: HardwarePage) -> list[tuple[str, str]]:
    combo = page.backend
    return [(combo.itemText(i), combo.itemData(i)) for i in range(combo.count())]


def test_the_hardware_page_chooses_the_back_end_for_the_next_load(
    qtbot: QtBot,
    dialog: SettingsDialog,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(backends, "hardware", lambda *a: _hardware(VULKAN0))
    page = _page(qtbot, dialog)
    assert _items(page) == [
        ("Automatic (the GPU, else the CPU)", "auto"),
        ("CPU only", "cpu"),
        ("Vulkan0: AMD Radeon RX 7600", "Vulkan0"),
    ]
    assert page.backend.currentData() == "auto"
    page.backend.setCurrentIndex(2)
    assert settings.get("load.device") == "Vulkan0"
    assert load_params(settings).device == "Vulkan0"
    page.backend.setCurrentIndex(1)
    assert load_params(settings).device == "cpu"
    with qtbot.waitSignal(page.hardware_read, timeout=60_000):
        page.refresh_button.click()  # refilled: the choice stays
    assert page.backend.currentData() == "cpu"


def test_a_device_chosen_before_but_gone_stays_chosen(
    qtbot: QtBot, dialog: SettingsDialog, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.set("load.device", "Vulkan1")
    monkeypatch.setattr(backends, "hardware", lambda *a: _hardware(VULKAN0))
    page = _page(qtbot, dialog)
    assert page.backend.currentText() == "Vulkan1 (not found)"
    assert settings.get("load.device") == "Vulkan1"  # never changed behind the person's back


ENGINE_WORKER = "idle_worker"  # a worker of its own with no model: these tests load one


def _load(qtbot: QtBot, window: MainWindow, gemma_path: Path) -> LoadedModel:
    window.services.settings.set("load.n_ctx", 512)
    window.services.settings.set("load.parallel", 1)
    with qtbot.waitSignal(window.services.engine.model_loaded, timeout=120_000) as loaded:
        window.services.engine.load(str(gemma_path))  # as Settings' "Reload the model now"
    result = loaded.args[0]
    assert isinstance(result, LoadedModel)
    return result


def test_the_chat_says_when_the_cpu_took_over_from_the_gpu(
    qtbot: QtBot,
    make_window: Callable[[], MainWindow],
    gemma_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failing_gpu(monkeypatch)
    window = make_window()
    loaded = _load(qtbot, window, gemma_path)
    banner = window.chat.banner
    assert banner.isVisible() and banner.kind == "warning"
    assert banner.text.text() == (
        f"Loading {gemma_path.name} on the GPU (Vulkan0) failed, so it runs on the CPU instead."
    )
    assert loaded.n_gpu_layers == 0


def test_cpu_only_in_settings_applies_to_the_next_load(
    qtbot: QtBot,
    make_window: Callable[[], MainWindow],
    gemma_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_gpu(monkeypatch)
    window = make_window()
    window.services.settings.set("load.device", "cpu")
    loaded = _load(qtbot, window, gemma_path)
    assert (loaded.params.device, loaded.n_gpu_layers, loaded.placement) == ("cpu", 0, "cpu")
    banner = (
        window.chat.banner
    )  # nothing about the GPU (the test model's base-model notice may show)
    assert loaded.notice is None and (banner.isHidden() or "base model" in banner.text.text())
    window.services.settings.set("load.device", "auto")
    loaded = _load(qtbot, window, gemma_path)  # the next load: every layer to the (fake) GPU
    assert (loaded.n_gpu_layers, loaded.gpu_devices) == (19, ("Vulkan0",))
