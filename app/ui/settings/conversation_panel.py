"""Per-chat settings, in a drawer beside the chat: model, thinking (for a model whose template
thinks: Off / Low / Medium / High / the model's default, app/ui/chat/thinking.py), system
prompt, sampling with presets; and, for every chat, the embedding model attached files use
(embedding_choice.py).

Edits are saved to the conversation (or the draft of a new chat) shortly after typing stops.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chats.models import Conversation
from app.engine.provider_ids import parse_remote_id
from app.ui import icons, theme
from app.ui.chat.conversation import ConversationController
from app.ui.chat.thinking import EFFORTS, supports_thinking, thinking_choice
from app.ui.header.model_list import ModelChoices, ModelEntry
from app.ui.settings import presets
from app.ui.settings.embedding_choice import EmbeddingChoice
from app.ui.settings.sampling_form import SamplingForm

SAVE_DELAY_MS = 400
LOADED_MODEL = ""  # the combo's data for "whatever model is loaded"


def _section(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName("SectionTitle")
    return label


class ConversationPanel(QFrame):
    """Signals: ``close_requested()``."""

    close_requested = Signal()

    def __init__(
        self,
        controller: ConversationController,
        catalog: ModelChoices,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ConversationPanel")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setMinimumWidth(300)
        self.controller = controller
        self.catalog = catalog
        self._loading = False

        title = QLabel("Chat settings", self)
        title.setObjectName("PanelTitle")
        close = QToolButton(self)
        close.setAutoRaise(True)
        close.setToolTip("Close")
        close.setAccessibleName(icons.spoken("Close"))
        icons.set_icon(close, "close", size=16)
        close.clicked.connect(self.close_requested)
        head = QHBoxLayout()
        head.setContentsMargins(18, 14, 12, 6)
        head.addWidget(title)
        head.addStretch(1)
        head.addWidget(close)

        body = QWidget(self)
        body.setObjectName("PanelBody")
        self.model_combo = QComboBox(body)
        self.model_combo.setObjectName("ModelCombo")
        theme.shrinking_combo(self.model_combo)
        self.model_combo.currentIndexChanged.connect(self._on_changed)
        model_help = QLabel(
            "A chat remembers the model it answers with and loads it again when you open it or "
            "send a message. Remote models are listed under their provider.",
            body,
        )
        model_help.setObjectName("FieldHelp")
        model_help.setWordWrap(True)
        self.thinking_combo = QComboBox(body)
        self.thinking_combo.setObjectName("ThinkingCombo")
        self.thinking_combo.setAccessibleName("Thinking")
        for value, label in EFFORTS:
            self.thinking_combo.addItem(label, value)
        self.thinking_combo.currentIndexChanged.connect(self._on_changed)
        thinking_help = QLabel(
            "How much the model thinks before it answers. Its thoughts are folded above "
            "the answer.",
            body,
        )
        thinking_help.setObjectName("FieldHelp")
        thinking_help.setWordWrap(True)
        self.thinking_box = QWidget(body)
        thinking_column = QVBoxLayout(self.thinking_box)
        thinking_column.setContentsMargins(0, 8, 0, 0)
        thinking_column.setSpacing(10)
        thinking_column.addWidget(_section("Thinking", self.thinking_box))
        thinking_column.addWidget(self.thinking_combo)
        thinking_column.addWidget(thinking_help)
        self.system_prompt = QPlainTextEdit(body)
        self.system_prompt.setObjectName("SystemPrompt")
        self.system_prompt.setAccessibleName("System prompt")
        self.system_prompt.setPlaceholderText(
            "e.g. You are a concise assistant. Answer in English."
        )
        self.system_prompt.setFixedHeight(110)
        self.system_prompt.textChanged.connect(self._on_changed)
        self.form = SamplingForm(parent=body)
        self.form.values_changed.connect(self._on_changed)
        reset = QPushButton("Reset to defaults", body)
        reset.setObjectName("SecondaryButton")
        reset.clicked.connect(self._on_reset_clicked)
        self.embedding = EmbeddingChoice(controller.settings, body)
        self.embedding.set_models(catalog.models)

        column = QVBoxLayout(body)
        column.setContentsMargins(18, 4, 18, 18)
        column.setSpacing(10)
        column.addWidget(_section("Model", body))
        column.addWidget(self.model_combo)
        column.addWidget(model_help)
        column.addWidget(self.thinking_box)
        column.addSpacing(8)
        column.addWidget(_section("System prompt", body))
        column.addWidget(self.system_prompt)
        column.addSpacing(8)
        column.addWidget(_section("Sampling", body))
        column.addWidget(self.form)
        column.addSpacing(8)
        column.addWidget(reset, 0, Qt.AlignmentFlag.AlignLeft)
        column.addSpacing(8)
        column.addWidget(_section("Attached files", body))
        column.addWidget(self.embedding)
        column.addStretch(1)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(body)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(head)
        layout.addWidget(scroll, 1)

        self._save_timer = QTimer(self)
        self._save_timer.setSingleShot(True)
        self._save_timer.setInterval(SAVE_DELAY_MS)
        self._save_timer.timeout.connect(self.save)
        controller.conversation_opened.connect(self._on_conversation_opened)
        controller.settings_flush_requested.connect(self.flush)
        catalog.models_changed.connect(self._on_models_changed)
        self.remote = controller.engine.remote_catalog
        if self.remote is not None:
            self.remote.changed.connect(self._on_remote_models_changed)
        controller.settings_changed.connect(self._on_model_changed)
        controller.engine.model_loaded.connect(self._refresh_thinking)
        self.load_from_controller()

    # -- load / save ----------------------------------------------------------------------

    def load_from_controller(self) -> None:
        self._loading = True
        model, system_prompt, blob = self.controller.conversation_settings()
        self._fill_models(self.catalog.models, model)
        choice = self.thinking_combo.findData(thinking_choice(blob))
        self.thinking_combo.setCurrentIndex(max(0, choice))
        self.system_prompt.setPlainText(system_prompt)
        self.form.set_values(self.controller.sampling_values())
        self._loading = False

    @Slot()
    def save(self) -> None:
        self._save_timer.stop()
        data = self.model_combo.currentData()
        model = str(data) if data else None
        values = self.form.values()
        blob: dict[str, Any] = {"preset": presets.preset_matching(values), "sampling": values}
        blob["thinking"] = self.thinking_combo.currentData()
        self.controller.update_settings(model, self.system_prompt.toPlainText(), blob)

    def _fill_models(self, models: list[ModelEntry], selected: str | None) -> None:
        self.model_combo.blockSignals(True)
        self.model_combo.clear()
        self.model_combo.addItem("The loaded model", LOADED_MODEL)
        for entry in models:
            self.model_combo.addItem(f"{entry.name}  ({entry.detail})", entry.path)
        for provider in self.remote.providers if self.remote is not None else []:
            if provider.models:
                self.model_combo.insertSeparator(self.model_combo.count())
            for name in provider.models:
                self.model_combo.addItem(f"{name}  ({provider.name})", provider.remote_id(name))
        if selected and self.model_combo.findData(selected) < 0:
            remote = parse_remote_id(selected)
            label = f"{remote.model}  ({remote.provider})" if remote else selected
            self.model_combo.addItem(label, selected)
        index = self.model_combo.findData(selected or LOADED_MODEL)
        self.model_combo.setCurrentIndex(max(0, index))
        self.model_combo.blockSignals(False)
        self.model_combo.setToolTip(self.model_combo.currentText())  # cut when narrow
        self._refresh_thinking()

    @Slot()
    def _refresh_thinking(self, *_args: object) -> None:
        """The thinking control, for a chat whose model's template thinks."""
        data = self.model_combo.currentData()
        if data:
            thinks = any(m.thinks for m in self.catalog.models if m.path == data)
        else:
            loaded = self.controller.engine.loaded
            thinks = loaded is not None and supports_thinking(loaded.chat_template)
        self.thinking_box.setVisible(thinks)

    # -- events ---------------------------------------------------------------------------

    @Slot()
    def _on_changed(self) -> None:
        self._refresh_thinking()
        if not self._loading:
            self._save_timer.start()

    @Slot()
    def _on_reset_clicked(self) -> None:
        self.form.set_values(presets.global_defaults(self.controller.settings))
        self.system_prompt.setPlainText(self.controller.settings.get("chat.system_prompt"))
        self.save()

    @Slot()
    def flush(self) -> None:
        """Save edits still waiting for the typing pause."""
        if self._save_timer.isActive():
            self.save()

    @Slot(object)
    def _on_conversation_opened(self, _conversation: Conversation | None) -> None:
        self.load_from_controller()

    @Slot(list)
    def _on_models_changed(self, models: list[ModelEntry]) -> None:
        data = self.model_combo.currentData()
        self._fill_models(models, str(data) if data else None)
        self.embedding.set_models(models)

    @Slot()
    def _on_remote_models_changed(self) -> None:
        self._on_models_changed(self.catalog.models)

    @Slot()
    def _on_model_changed(self) -> None:
        # The chat's model changed elsewhere (the picker, an answer); our edits were saved.
        model, _, _ = self.controller.conversation_settings()
        self._fill_models(self.catalog.models, model)
