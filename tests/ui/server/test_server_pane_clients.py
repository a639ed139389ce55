"""The Server page's "Connect a client" list: each coding agent's settings for the running
server, the key hidden on screen and copied whole, and the Claude Code one used as Claude Code
uses it (its variables given to the `anthropic` SDK, against the GUI's own server)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from pytestqt.qtbot import QtBot

from app.server.clients import NAMES
from app.ui.main_window import MainWindow
from tests.helpers.net import free_port
from tests.helpers.server_page import WAIT_MS, serving_with_a_new_key, show_server_page, start


def test_each_client_is_listed_and_claude_codes_settings_work(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window, key, root = serving_with_a_new_key(qtbot, make_window)
    page = window.server_pane
    view = page.clients
    assert view.combo is not None
    assert [view.combo.itemText(i) for i in range(view.combo.count())] == list(NAMES)
    assert view.combo.accessibleName() == "Connect a client"

    view.combo.setCurrentText("Codex")
    assert view.current == "Codex"
    assert f'base_url = "{root}/v1"' in view.shown_text() and 'wire_api = "responses"' in (
        view.shown_text()
    )

    view.combo.setCurrentText("Claude Code")
    code = view.text()
    assert key in code and key not in view.shown_text()  # hidden on screen, copied whole
    qtbot.mouseClick(view.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == code

    env = dict(re.findall(r"^export (\w+)=(.*)$", code, flags=re.M))
    assert env["ANTHROPIC_BASE_URL"] == root
    with anthropic.Anthropic(
        base_url=env["ANTHROPIC_BASE_URL"],
        auth_token=env["ANTHROPIC_AUTH_TOKEN"],
        max_retries=0,
        timeout=WAIT_MS / 1000,
    ) as client:
        model = env["ANTHROPIC_MODEL"]
        if model == "MODEL_ID":  # no model loaded in the app: name one the server lists
            model = client.models.list().data[0].id
        message = client.messages.create(
            model=model, max_tokens=3, messages=[{"role": "user", "content": "Hi"}]
        )
    assert message.type == "message" and message.stop_reason

    # Codex's provider entry against the same server: the Responses API
    view.combo.setCurrentText("Codex")
    base_url = re.search(r'^base_url = "(.*)"$', view.text(), flags=re.M)
    assert base_url is not None
    with openai.OpenAI(
        base_url=base_url.group(1), api_key=key, max_retries=0, timeout=WAIT_MS / 1000
    ) as openai_client:
        response = openai_client.responses.create(model=model, input="Hi", max_output_tokens=3)
    assert response.object == "response" and response.output_text


def test_a_model_alias_set_on_the_page_names_a_model_for_claude_code(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    port = free_port()
    window = show_server_page(make_window, port)
    form = window.server_pane.form
    assert not form.aliases_box.isVisibleTo(form)  # folded away until asked for
    qtbot.mouseClick(form.aliases_toggle, Qt.MouseButton.LeftButton)
    assert form.aliases_box.isVisibleTo(form)
    start(qtbot, window)
    root = f"http://127.0.0.1:{port}"
    hi: Any = [{"role": "user", "content": "Hi"}]
    with anthropic.Anthropic(base_url=root, api_key="x", max_retries=0) as client:
        model = client.models.list().data[0].id
        with pytest.raises(anthropic.NotFoundError) as missing:
            client.messages.create(model="claude-sonnet-4-5", max_tokens=2, messages=hi)
        assert "Model aliases" in missing.value.message
        form.aliases.setPlainText(f"claude-sonnet-*={model}\nhalf-typed=")
        form.flush()
        assert window.services.settings.get("server.model_aliases") == {"claude-sonnet-*": model}
        assert form.aliases_toggle.text() == "Model aliases · 1"
        page = window.server_pane
        qtbot.waitUntil(lambda: page.restart_notice.isVisibleTo(page), timeout=WAIT_MS)
        qtbot.mouseClick(page.restart_button, Qt.MouseButton.LeftButton)
        restarted = (("claude-sonnet-*", model),)
        qtbot.waitUntil(
            lambda: getattr(window.server.running_config, "model_aliases", ()) == restarted,
            timeout=WAIT_MS,
        )
        answer = client.messages.create(model="claude-sonnet-4-5", max_tokens=2, messages=hi)
    assert answer.model == "claude-sonnet-4-5" and answer.type == "message"
