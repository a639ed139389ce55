"""The live view of the machine: the monitor samples off the GUI thread, the Hardware page
graphs its history (Ember's share too), and the status bar's memory figure opens that page."""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.config import Settings
from app.engine.monitor import GpuSample, Sampler
from app.ui.machine_monitor import IDLE_INTERVAL_MS, WATCH_INTERVAL_MS, MachineMonitor
from app.ui.settings.hardware_page import HardwarePage
from app.ui.settings.settings_dialog import SettingsDialog
from tests.helpers.fake_app import own_fake_window
from tests.helpers.machine import GB, FakeClock, FakeMachine


class ThreadRecordingMachine(FakeMachine):
    threads: set[str]

    def memory(self) -> tuple[int, int]:
        self.threads.add(threading.current_thread().name)
        return super().memory()


def _monitor(machine: FakeMachine, clock: FakeClock) -> MachineMonitor:
    return MachineMonitor(None, Sampler(machine, clock))


def test_samples_are_read_off_the_gui_thread_and_kept(
    qtbot: QtBot, ember_app: QApplication
) -> None:
    machine, clock = ThreadRecordingMachine(), FakeClock()
    machine.threads = set()
    monitor = _monitor(machine, clock)
    qtbot.waitUntil(lambda: len(monitor.history) == 1)
    for _ in range(3):
        clock.now += 1.0
        with qtbot.waitSignal(monitor.sampled) as got:
            monitor.sample_now()
        assert got.args[0].time == clock.now
    assert len(monitor.history) == 4
    assert machine.threads and threading.main_thread().name not in machine.threads
    monitor.deleteLater()


def test_the_hardware_page_graphs_ram_cpu_swap_and_gpus(
    qtbot: QtBot, ember_app: QApplication
) -> None:
    machine, clock = FakeMachine(gpu=(GpuSample("Vulkan0", 3 * GB, 8 * GB),)), FakeClock()
    monitor = _monitor(machine, clock)
    qtbot.waitUntil(lambda: len(monitor.history) == 1)
    page = HardwarePage(Settings(), monitor=monitor)
    qtbot.addWidget(page)
    page.show()
    qtbot.waitExposed(page)
    assert monitor._timer.interval() == WATCH_INTERVAL_MS  # watched: every second
    clock.now += 2.0
    machine.busy += 4.0
    machine.total += 8.0
    machine.process_seconds += 1.0
    with qtbot.waitSignal(monitor.sampled):
        monitor.sample_now()
    ram, cpu = page.graphs["RAM"], page.graphs["CPU"]
    assert ram.caption.text() == "RAM · 38% of 16.0 GB · Ember 2.0 GB"
    assert cpu.caption.text() == "CPU · 50% · Ember 12%"
    assert page.graphs["Swap"].caption.text() == "Swap · 1.0 GB of 4.0 GB"
    gpu = page.graphs["Vulkan0 memory"]
    assert gpu.caption.text() == "Vulkan0 memory · 3.0 GB of 8.0 GB"
    assert list(cpu.plot.total) == [0.0, 0.5] and list(cpu.plot.ember) == [0.0, 0.125]
    # what a screen reader says is what the picture shows
    assert cpu.plot.accessibleDescription() == cpu.caption.text()
    assert cpu.plot.accessibleName() == "CPU over the last minutes"
    page.grab()  # paints with a history of two points without failing
    page.hide()
    assert monitor._timer.interval() == IDLE_INTERVAL_MS
    monitor.deleteLater()


def test_the_memory_figure_opens_settings_on_the_hardware_page(
    qtbot: QtBot, tmp_path: Path, ember_app: QApplication
) -> None:
    with own_fake_window(qtbot, tmp_path, "small.gguf") as window:
        bar = window.status
        qtbot.waitUntil(lambda: bar.memory_label.text().startswith("Memory "))
        assert bar.monitor is window.monitor
        qtbot.mouseClick(bar.memory_label, Qt.MouseButton.LeftButton)
        dialog = window.settings_dialog
        assert isinstance(dialog, SettingsDialog)
        qtbot.waitUntil(dialog.isVisible)
        page = dialog.findChild(HardwarePage)
        assert page is not None and page.monitor is window.monitor
        qtbot.waitUntil(lambda: page.graphs["RAM"].caption.text().startswith("RAM · "))
        dialog.close()
