"""The API server settings' switch for http(s) image URLs: off by default, saved when turned
on, and applied by the next start of the real server (uvicorn on 127.0.0.1): a running server
says it needs a restart until then. The same for the switch that lets image URLs reach local
addresses, which is greyed out while image URLs are off."""

from __future__ import annotations

from collections.abc import Callable

from pytestqt.qtbot import QtBot

from app.server.config import image_urls_allowed
from app.ui.main_window import MainWindow
from tests.helpers.net import free_port
from tests.helpers.server_page import START_TIMEOUT, show_server_page, start, wait_state


def test_the_image_urls_switch_is_off_saved_and_applied_on_restart(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window = show_server_page(make_window, free_port())
    form, controller = window.server_pane.form, window.server
    assert not form.image_urls.isChecked() and not controller.config().image_urls

    start(qtbot, window)
    running = controller.running_config
    assert running is not None and not running.image_urls
    assert not window.server_pane.restart_notice.isVisible()

    form.image_urls.click()
    assert image_urls_allowed(window.services.settings) and controller.config().image_urls
    assert window.server_pane.restart_notice.isVisible()  # the running server still refuses

    controller.restart()
    qtbot.waitUntil(
        lambda: controller.running_config is not None and controller.running_config.image_urls,
        timeout=START_TIMEOUT,
    )
    assert not window.server_pane.restart_notice.isVisible()
    controller.set_enabled(False)
    wait_state(qtbot, controller, "stopped")


def test_the_local_addresses_switch_is_off_needs_image_urls_and_is_applied_on_restart(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window = show_server_page(make_window, free_port())
    form, controller = window.server_pane.form, window.server
    local = form.image_urls_local
    assert not local.isChecked() and not local.isEnabled()
    assert not controller.config().image_urls_local

    form.image_urls.click()
    assert local.isEnabled() and not local.isChecked()
    start(qtbot, window)
    running = controller.running_config
    assert running is not None and running.image_urls and not running.image_urls_local

    local.click()
    assert window.services.settings.get("server.image_urls_local") is True
    assert controller.config().image_urls_local
    assert window.server_pane.restart_notice.isVisible()  # the running server still refuses

    controller.restart()
    qtbot.waitUntil(
        lambda: (
            controller.running_config is not None and controller.running_config.image_urls_local
        ),
        timeout=START_TIMEOUT,
    )
    assert not window.server_pane.restart_notice.isVisible()
    form.image_urls.click()  # image URLs off: the local switch waits, greyed out
    assert not local.isEnabled() and local.isChecked()
    controller.set_enabled(False)
    wait_state(qtbot, controller, "stopped")
