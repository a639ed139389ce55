"""Driving the Server page: a window on a free port, the switch, waiting for the server's
state, and whether anything still listens."""

from __future__ import annotations

import socket
from collections.abc import Callable

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from app.ui.nav_rail import SERVER
from app.ui.server.controller import ServerController
from app.ui.server.pane import ServerPane
from tests.helpers.net import free_port

START_TIMEOUT = 20_000


def nothing_listens(port: int) -> bool:
    """No server accepts connections on the port (a closed connection's TIME_WAIT may still
    hold it, which is why this connects instead of binding)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(5)
        try:
            probe.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            return True
    return False


def pane(window: MainWindow) -> ServerPane:
    return window.server_pane


def click_switch(qtbot: QtBot, window: MainWindow) -> None:
    qtbot.mouseClick(pane(window).switch, Qt.MouseButton.LeftButton)


def wait_state(qtbot: QtBot, controller: ServerController, state: str) -> None:
    qtbot.waitUntil(lambda: controller.state == state, timeout=START_TIMEOUT)


def start(qtbot: QtBot, window: MainWindow) -> str:
    click_switch(qtbot, window)
    wait_state(qtbot, window.server, "running")
    url = window.server.base_url
    assert url is not None
    return url


def start_with_a_new_key(qtbot: QtBot, window: MainWindow) -> str:
    """Make an API key with the form's button, then start the server; the key."""
    qtbot.mouseClick(pane(window).form.generate_button, Qt.MouseButton.LeftButton)
    key = window.services.settings.get("server.api_key")
    assert isinstance(key, str) and key
    start(qtbot, window)
    return key


def serving_with_a_new_key(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> tuple[MainWindow, str, str]:
    """A window on the Server page for a free port, its server started with a new API key: the
    window, the key and the server's root URL."""
    port = free_port()
    window = show_server_page(make_window, port)
    key = start_with_a_new_key(qtbot, window)
    return window, key, f"http://127.0.0.1:{port}"


WAIT_MS = 120_000  # a failsafe for a busy machine, never reached when it works


def show_server_page(make_window: Callable[[], MainWindow], port: int) -> MainWindow:
    window = make_window()
    window.server_pane.form.port.setValue(port)
    window.server_pane.form.flush()
    window.show_page(SERVER)
    return window
