"""Big conversations open fast; themes switch; shortcuts; settings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import (
    QApplication,
    QFormLayout,
    QLabel,
    QPushButton,
    QToolButton,
    QWidget,
)
from pytestqt.qtbot import QtBot

from app.ui import theme
from app.ui.chat.chat_view import INITIAL
from app.ui.main_window import MainWindow
from app.ui.theme import ThemeManager
from tests.helpers.window import settings_by_shortcut

BODY = "Some **markdown** with `code`.\n\n```python\nprint('hello')\n```\n\n- a\n- b\n"


def test_a_500_message_conversation_opens_with_one_page_and_renders_lazily(
    qtbot: QtBot, window: MainWindow
) -> None:
    store = window.services.store
    conversation = store.create_conversation("Huge")
    for i in range(250):
        store.add_message(conversation.id, "user", f"Question {i}")
        store.add_message(conversation.id, "assistant", f"Answer {i}. {BODY}")
    window.controller.open_conversation(conversation.id)
    view = window.chat.view
    assert len(view.messages) == 500
    assert view.rendered_count == INITIAL  # opening renders one page, whatever the machine's speed
    assert view.widgets()[-1].message.content.startswith("Answer 249")
    assert view.older_label.isVisible()

    view.verticalScrollBar().setValue(0)  # scrolling to the top renders older messages
    qtbot.waitUntil(lambda: view.rendered_count > INITIAL)
    while view.render_older(100):
        pass
    assert view.rendered_count == 500
    assert view.widgets()[0].message.content == "Question 0"


@pytest.fixture
def themed_window(
    qtbot: QtBot, window: MainWindow, ember_app: QApplication
) -> Iterator[tuple[MainWindow, ThemeManager]]:
    manager = ThemeManager(ember_app, "light")
    manager.theme_changed.connect(window._on_theme_changed)
    window.themes = manager
    yield window, manager
    manager.set_choice("light")


def test_theme_switch(
    themed_window: tuple[MainWindow, ThemeManager], ember_app: QApplication
) -> None:
    window, manager = themed_window
    manager.set_choice("dark")
    assert theme.current() is theme.DARK
    assert theme.DARK.window in ember_app.styleSheet()
    assert window.chat.renderer.palette is theme.DARK
    manager.set_choice("light")
    assert theme.current() is theme.LIGHT
    assert window.chat.renderer.palette is theme.LIGHT


def test_settings_dialog_changes_settings_and_theme(
    qtbot: QtBot, themed_window: tuple[MainWindow, ThemeManager]
) -> None:
    window, _manager = themed_window
    dialog = settings_by_shortcut(qtbot, window)
    dialog.n_ctx.setValue(4096)
    assert window.services.settings.get("load.n_ctx") == 4096
    dark = dialog.findChild(QToolButton, "theme_dark")
    assert dark is not None
    dark.click()
    assert window.services.settings.get("ui.theme") == "dark"
    assert theme.current() is theme.DARK
    dialog.sampling.apply_preset("Creative")
    assert window.services.settings.get("sampling.temperature") == 1.1
    assert window.services.settings.get("sampling.preset") == "Creative"
    dialog.accept()


def test_new_chat_shortcut(qtbot: QtBot, window: MainWindow) -> None:
    conversation = window.services.store.create_conversation("Existing")
    window.controller.open_conversation(conversation.id)
    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert window.controller.conversation_id is None
    assert window.chat.empty.mode == "ready"  # the test model is loaded
    assert window.chat.stack.currentWidget() is window.chat.empty_scroll


def test_conversation_settings_are_saved_per_chat(qtbot: QtBot, window: MainWindow) -> None:
    store = window.services.store
    conversation = store.create_conversation("Tuned")
    window.controller.open_conversation(conversation.id)
    window.header.settings_button.setChecked(True)
    assert window.panel.isVisible()
    window.panel.system_prompt.setPlainText("You are terse.")
    window.panel.form.preset_buttons["Precise"].click()
    window.panel.flush()
    saved = store.get_conversation(conversation.id)
    assert saved.system_prompt == "You are terse."
    assert saved.settings["preset"] == "Precise"
    assert window.controller.sampling_params().temperature == 0.2

    other = store.create_conversation("Other")
    window.controller.open_conversation(other.id)
    assert window.panel.system_prompt.toPlainText() == ""
    window.controller.open_conversation(conversation.id)
    assert window.panel.system_prompt.toPlainText() == "You are terse."
    assert window.panel.form.preset() == "Precise"


def test_a_checked_segment_never_clips_its_bold_label(
    qtbot: QtBot, themed_window: tuple[MainWindow, ThemeManager]
) -> None:
    """A segment's label turns semi-bold when checked; at the smallest window size the
    server's "who can connect" and the settings' presets still show every letter."""
    window, _manager = themed_window
    window.resize(window.minimumSizeHint())
    window.show()
    window.show_page("server")
    dialog = settings_by_shortcut(qtbot, window)
    segments = [
        *window.findChildren(QPushButton, "Segment"),
        *dialog.findChildren(QPushButton, "Segment"),
    ]
    assert len(segments) >= 5  # two hosts, three or more presets
    for button in segments:
        button.setChecked(True)
        QApplication.processEvents()
        bold = QFont(button.font())
        bold.setWeight(QFont.Weight.DemiBold)
        needed = QFontMetrics(bold).horizontalAdvance(button.text()) + theme.SEGMENT_PADDING
        assert button.width() >= needed, (button.text(), button.width(), needed)
    dialog.reject()


def test_settings_labels_are_centred_on_their_fields(
    qtbot: QtBot, themed_window: tuple[MainWindow, ThemeManager]
) -> None:
    """Each form label's text lines up with the field it names (not a few pixels above)."""
    window, _manager = themed_window
    dialog = settings_by_shortcut(qtbot, window)
    fields = [
        dialog.n_ctx,
        dialog.n_threads,
        dialog.n_gpu_layers,
        dialog.n_batch,
        dialog.cache_type,
    ]
    dialog.show_page("Model loading")
    QApplication.processEvents()
    page = fields[0].parentWidget()
    assert page is not None
    form = page.findChild(QFormLayout)
    assert isinstance(form, QFormLayout)
    labels: dict[QWidget, QLabel] = {}
    for row in range(form.rowCount()):
        label_item = form.itemAt(row, QFormLayout.ItemRole.LabelRole)
        field_item = form.itemAt(row, QFormLayout.ItemRole.FieldRole)
        if label_item is not None and field_item is not None:
            label_widget, field_widget = label_item.widget(), field_item.widget()
            if isinstance(label_widget, QLabel) and field_widget is not None:
                labels[field_widget] = label_widget
    for field in fields:
        label = labels[field]
        label_centre = label.mapTo(dialog, label.contentsRect().center()).y()
        field_centre = field.mapTo(dialog, field.rect().center()).y()
        assert abs(label_centre - field_centre) <= 1, (label.text(), label_centre, field_centre)
    dialog.reject()
