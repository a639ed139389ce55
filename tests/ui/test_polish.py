"""What a new user tripped over: the chat search (Esc, snippets), counts, the welcome card's
model names and the Download button of files that will not fit. No model is loaded here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetricsF
from PySide6.QtWidgets import QLabel, QWidget
from pytestqt.qtbot import QtBot

from app.engine.worker import EngineWorker
from app.ui.main_window import MainWindow
from app.ui.sidebar.conversation_list import ELLIPSIS, fit_snippet


@pytest.fixture
def engine_worker() -> Iterator[EngineWorker]:
    """No model: these tests only look at the window."""
    worker = EngineWorker()
    yield worker
    worker.shutdown()


def _search(qtbot: QtBot, window: MainWindow, text: str, hits: int) -> None:
    qtbot.keyClick(window, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(window.sidebar.search, text)
    found = window.sidebar.list

    def shown() -> bool:  # the hits, under their "N results" heading
        heading = found.item(0).text() if found.count() else ""
        return "result" in heading and len(found.conversation_ids()) == hits

    qtbot.waitUntil(shown)


def test_esc_clears_the_chat_search(qtbot: QtBot, window: MainWindow) -> None:
    store = window.services.store
    for title in ("Pasta recipes", "Rust lifetimes"):
        store.create_conversation(title)
    window.sidebar.refresh()
    _search(qtbot, window, "pasta", 1)
    qtbot.keyClick(window.sidebar.search, Qt.Key.Key_Escape)
    assert window.sidebar.search.text() == ""
    assert len(window.sidebar.list.conversation_ids()) == 2  # every chat again, at once
    assert window.sidebar.search.hasFocus()


def test_the_search_heading_says_1_result_and_2_results(qtbot: QtBot, window: MainWindow) -> None:
    store = window.services.store
    for title in ("Pasta recipes", "Pasta sauces", "Rust lifetimes"):
        store.create_conversation(title)
    window.sidebar.refresh()
    _search(qtbot, window, "rust", 1)
    assert window.sidebar.list.item(0).text() == "1 result"
    window.sidebar.search.clear()
    _search(qtbot, window, "pasta", 2)
    assert window.sidebar.list.item(0).text() == "2 results"


def _metrics() -> tuple[QFontMetricsF, QFontMetricsF]:
    font = QFont()
    font.setPointSizeF(9)
    bold = QFont(font)
    bold.setWeight(QFont.Weight.Bold)
    return QFontMetricsF(font), QFontMetricsF(bold)


def test_a_search_snippet_is_cut_at_words_around_the_match(ember_app: object) -> None:
    plain, bold = _metrics()
    text = (
        "Yesterday we talked about many vegetables for the garden and then tomatoes like full "
        "sun and warm soil most of all when they flower"
    )
    start = text.index("tomatoes")
    match = ((start, start + len("tomatoes")),)
    width = int(plain.horizontalAdvance("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"))
    shown, spans = fit_snippet(text, match, width, plain, bold)
    assert shown.startswith(ELLIPSIS) and shown.endswith(ELLIPSIS)
    inner = shown.strip(ELLIPSIS)
    assert f" {inner} " in f" {text} ", "cut inside a word"
    ((a, b),) = spans
    assert shown[a:b] == "tomatoes"
    assert shown.index("tomatoes") > 1  # some words before the match too
    measured = plain.horizontalAdvance(shown) + bold.horizontalAdvance("tomatoes")
    assert measured - plain.horizontalAdvance("tomatoes") <= width
    # Short enough: the snippet as it is.
    assert fit_snippet("tomatoes", ((0, 8),), width, plain, bold) == ("tomatoes", ((0, 8),))


def test_search_rows_show_a_whole_word_snippet(qtbot: QtBot, window: MainWindow) -> None:
    store = window.services.store
    conversation = store.create_conversation("Garden")
    answer = (
        "In the garden the tomatoes like full sun, deep watering every few days and a stake "
        "to climb on when the fruit gets heavy, and the basil likes the same."
    )
    store.add_message(conversation.id, "assistant", answer)
    window.sidebar.refresh()
    _search(qtbot, window, "watering", 1)
    shown = window.sidebar.list.shown_snippet(conversation.id)
    assert "watering" in shown and shown.endswith(ELLIPSIS)
    words = shown.strip(ELLIPSIS).split()
    assert words and all(word in answer.split() for word in words), shown


def test_the_welcome_card_ends_a_long_model_name_with_an_ellipsis(
    qtbot: QtBot, window: MainWindow
) -> None:
    from PySide6.QtWidgets import QApplication

    from app.ui.header.model_list import ModelEntry

    name = "Meta-Llama-3.1-70B-Instruct-abliterated-uncensored-imatrix-IQ2_XXS-00001-of-00003"
    empty = window.chat.empty
    empty.set_models([ModelEntry(f"/models/{name}.gguf", name, 10**9, "IQ2_XXS · 1.0 GB")])
    window.resize(window.minimumSize())
    QApplication.processEvents()
    (row,) = [w for w in empty.welcome.findChildren(QWidget) if w.objectName() == "ModelRow"]
    label = row.findChild(QLabel, "ModelRowName")
    assert isinstance(label, QLabel)
    shown = label.text()
    assert shown.endswith(ELLIPSIS) and name.startswith(shown[:-1])
    assert label.fontMetrics().horizontalAdvance(shown) <= label.width()
    card = row.parentWidget()
    assert card is not None
    right = row.mapTo(card, row.rect().topRight()).x()
    assert right <= card.width(), "the row runs out of its card"


def test_new_chats_cap_the_answer_length_and_unlimited_stays_a_choice(tmp_path: Path) -> None:
    """A rambling model stops after 2,048 tokens in a new chat instead of filling the context;
    "Unlimited" (0) is still there for those who want it."""
    from app.config import Settings
    from app.ui.settings import presets

    settings = Settings(tmp_path / "settings.json")  # nothing chosen yet
    values = presets.global_defaults(settings)
    assert values["max_tokens"] == presets.DEFAULT_MAX_TOKENS == 2048
    assert presets.default_values()["max_tokens"] == 2048
    assert presets.to_sampling_params(values).max_tokens == 2048
    for name in presets.PRESETS:  # a preset keeps the length the user chose
        assert "max_tokens" not in presets.PRESETS[name]
    values["max_tokens"] = 0
    assert presets.to_sampling_params(values).max_tokens is None
    settings.set("sampling.max_tokens", 0)  # chosen in Settings: kept
    assert presets.global_defaults(settings)["max_tokens"] == 0
