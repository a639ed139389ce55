"""The chat pane: a banner for problems, the messages (or the empty state), the composer.

It wires the ``ConversationController`` to the widgets; the logic lives in the controller.
Signals: ``model_menu_requested()``, ``open_model_requested()``, ``load_requested(str path)``
(the empty state's and the banner's actions, handled by the header's model picker);
``browse_models_requested()`` (the empty state's "Browse models": show the Models page).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QScrollArea,
    QSizePolicy,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.chats.models import Conversation, Message
from app.engine.load_settings import load_params
from app.engine.types import (
    FORCE_HINT,
    EngineError,
    LoadedModel,
    LoadParams,
    ModelTooLargeError,
    OutOfMemoryError,
)
from app.ui import theme
from app.ui.banner import Banner
from app.ui.chat.chat_view import COLUMN_WIDTH, ChatView
from app.ui.chat.composer import Composer
from app.ui.chat.conversation import ConversationController
from app.ui.chat.empty_state import EmptyState
from app.ui.chat.markdown import MarkdownRenderer
from app.ui.chat.tool_panel import ToolPanel
from app.ui.engine_session import EngineSession, model_name
from app.ui.header.model_list import BASE_NOTICE, ModelChoices
from app.ui.toast import Toast


class ChatPane(QWidget):
    """See the module docstring."""

    model_menu_requested = Signal()
    open_model_requested = Signal()
    browse_models_requested = Signal()

    def __init__(
        self,
        controller: ConversationController,
        engine: EngineSession,
        catalog: ModelChoices,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ChatPane")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.controller = controller
        self.engine = engine
        self.catalog = catalog
        self.renderer = MarkdownRenderer(theme.current())

        self.banner = Banner(self)
        self.view = ChatView(self.renderer, self)
        self.empty = EmptyState(self)
        self.empty_scroll = QScrollArea(self)
        self.empty_scroll.setObjectName("EmptyScroll")
        self.empty_scroll.setAccessibleName("Welcome")
        self.empty_scroll.setWidgetResizable(True)
        self.empty_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.empty_scroll.setWidget(self.empty)
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.empty_scroll)
        self.stack.addWidget(self.view)
        # the messages give way first in a short window (a tool card above the composer was
        # squeezed at 480 px): they keep whatever height is left
        self.stack.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Ignored)
        self.composer = Composer(self, attachments=controller.attachments)
        self.tool_panel = ToolPanel(self, controller.answers.tools.known_tools)

        banner_row = QHBoxLayout()
        banner_row.setContentsMargins(24, 12, 24, 0)
        banner_row.addWidget(self.banner)
        self.banner.setMaximumWidth(COLUMN_WIDTH)
        tools_row = QHBoxLayout()
        tools_row.setContentsMargins(24, 0, 24, 0)
        self.tool_panel.setMaximumWidth(COLUMN_WIDTH)
        tools_row.addWidget(self.tool_panel)
        composer_row = QHBoxLayout()
        composer_row.setContentsMargins(24, 4, 24, 18)
        self.composer.setMaximumWidth(COLUMN_WIDTH)
        composer_row.addWidget(self.composer)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(banner_row)
        layout.addWidget(self.stack, 1)
        layout.addLayout(tools_row)
        layout.addLayout(composer_row)

        c = controller
        c.branch_changed.connect(self._on_branch_changed)
        c.message_added.connect(self._on_message_added)
        c.message_changed.connect(self._on_message_changed)
        c.stream_text.connect(self._on_stream_text)
        c.context_notice.connect(self._on_context_notice)
        c.answer_waiting.connect(self.view.set_waiting)
        c.busy_changed.connect(self.composer.set_busy)
        c.context_changed.connect(self.composer.set_context)
        c.problem.connect(self._on_problem)
        c.conversation_opened.connect(self._on_conversation_opened)
        c.draft_restored.connect(self._on_draft_restored)
        c.tool_approval_requested.connect(self.tool_panel.show_request)
        c.tool_call_running.connect(self.tool_panel.show_running)
        c.tool_call_finished.connect(self.tool_panel.show_result)
        c.busy_changed.connect(self._on_busy_changed)
        c.settings_changed.connect(self._on_chat_settings_changed)
        self.tool_panel.decided.connect(c.decide_tool)
        self.tool_panel.setup_changed.connect(c.set_tool_setup)
        self.composer.send_requested.connect(self._on_send_requested)
        self.composer.stop_requested.connect(c.stop)
        self.composer.draft_changed.connect(c.set_draft)
        self.view.action_requested.connect(self._on_message_action)
        self.view.edit_submitted.connect(c.edit_and_resend)
        self.empty.model_chosen.connect(self._on_model_chosen)
        self.empty.open_file_requested.connect(self.open_model_requested)
        self.empty.browse_models_requested.connect(self.browse_models_requested)
        self.empty.suggestion_chosen.connect(self._on_suggestion_chosen)
        engine.load_started.connect(self._on_load_started)
        engine.model_loaded.connect(self._on_model_loaded)
        engine.load_failed.connect(self._on_load_failed)
        engine.model_unloaded.connect(self._refresh_empty_state)
        engine.remote_selected.connect(self._refresh_empty_state)
        engine.engine_failed.connect(self._on_engine_failed)
        catalog.models_changed.connect(self.empty.set_models)
        self.empty.set_models(catalog.models)
        self._refresh_empty_state()

    # -- public ---------------------------------------------------------------------------

    def focus_composer(self) -> None:
        self.composer.focus_input()

    def copy_last_answer(self) -> bool:
        text = self.controller.last_answer_text()
        if not text:
            return False
        QGuiApplication.clipboard().setText(text)
        Toast.show_in(self, "Last answer copied", timeout_ms=2500)
        return True

    def apply_theme(self, palette: theme.Palette) -> None:
        self.renderer = MarkdownRenderer(palette)
        self.view.set_renderer(self.renderer)

    # -- controller -> widgets ------------------------------------------------------------

    @Slot(object)
    def _on_conversation_opened(self, _conversation: Conversation | None) -> None:
        self.banner.hide()
        self.tool_panel.clear()
        self.tool_panel.set_setup(self.controller.tool_setup())

    @Slot(bool)
    def _on_busy_changed(self, busy: bool) -> None:
        self.view.set_answering(busy)  # its messages offer only what works meanwhile: copy
        if busy:  # a new answer (or a chat that is answering): its own cards only
            self.tool_panel.clear()

    @Slot()
    def _on_chat_settings_changed(self) -> None:
        self.tool_panel.set_setup(self.controller.tool_setup())

    @Slot(str)
    def _on_draft_restored(self, text: str) -> None:
        if text != self.composer.text:
            self.composer.set_text(text)

    @Slot(list, object)
    def _on_branch_changed(self, messages: list[Message], streaming_id: str | None) -> None:
        self.view.set_messages(messages, streaming_id)
        self._show_view(bool(messages))

    @Slot(object, bool)
    def _on_message_added(self, message: Message, streaming: bool) -> None:
        self.view.append_message(message, streaming)
        self._show_view(True)

    @Slot(object)
    def _on_message_changed(self, message: Message) -> None:
        self.view.update_message(message)

    @Slot(str, str)
    def _on_stream_text(self, message_id: str, text: str) -> None:
        self.view.append_stream(message_id, text)

    @Slot(str, int, int)
    def _on_context_notice(self, message_id: str, dropped: int, n_ctx: int) -> None:
        widget = self.view.widget_for(message_id)
        if widget is not None:
            widget.set_context_notice(dropped, n_ctx)

    @Slot(str, str)
    def _on_problem(self, kind: str, text: str) -> None:
        if kind == "need_model":
            actions = [("Choose a model", self.model_menu_requested.emit)]
            actions.append(("Open file…", self.open_model_requested.emit))
            self.banner.show_message("warning", text, actions)
        elif kind == "busy":
            self.banner.show_message("info", text, [("Stop", self.controller.stop)])
        else:
            self.banner.show_message("error", text)

    # -- user actions ---------------------------------------------------------------------

    @Slot(str)
    def _on_send_requested(self, text: str) -> None:
        self.controller.sent_context = self.composer.meter.used  # its files counted too
        if self.controller.send(text):
            self.composer.clear()
            self.banner.hide()

    @Slot(str, str)
    def _on_message_action(self, action: str, message_id: str) -> None:
        c = self.controller
        if action == "copy":
            widget = self.view.widget_for(message_id)
            if widget is not None:
                QGuiApplication.clipboard().setText(widget.plain_text)
                Toast.show_in(self, "Message copied", timeout_ms=2000)
        elif action == "regenerate":
            c.regenerate(message_id)
        elif action == "delete":
            c.delete_message(message_id)
        elif action in ("previous", "next"):
            c.switch_sibling(message_id, -1 if action == "previous" else 1)

    @Slot(str)
    def _on_suggestion_chosen(self, text: str) -> None:
        self.composer.set_text(text)
        self.composer.focus_input()

    @Slot(str)
    def _on_model_chosen(self, path: str) -> None:
        self.engine.select_remote(None)
        self.engine.load(path)

    # -- engine ---------------------------------------------------------------------------

    @Slot(str)
    def _on_load_started(self, _path: str) -> None:
        self.banner.hide()
        self._refresh_empty_state()

    @Slot(object)
    def _on_model_loaded(self, loaded: LoadedModel) -> None:
        self._refresh_empty_state()
        self.composer.focus_input()
        if loaded.notice:  # the GPU failed and the CPU took over: said, never silent
            self.banner.show_message("warning", loaded.notice)
        elif not loaded.chat_template:  # said once per load, not under every answer
            self.banner.show_message(
                "info",
                f"{model_name(loaded.path)} is a {BASE_NOTICE}.",
                [("Choose a model", self.model_menu_requested.emit)],
            )

    @Slot(str, object)
    def _on_load_failed(self, path: str, error: EngineError) -> None:
        self._refresh_empty_state()
        name = model_name(path) if path else "The model"
        text = f"{name} could not be loaded. {error}"
        loaded = self.engine.loaded
        if loaded is not None and loaded.path != path:
            text += f" Still using {model_name(loaded.path)}."
        actions = []
        if isinstance(error, OutOfMemoryError) and error.fits_n_ctx:
            fits = error.fits_n_ctx
            actions.append((f"Load with {fits:,} tokens", lambda: self._load_with_ctx(path, fits)))
        if isinstance(error, ModelTooLargeError) and path:
            # the estimate refused it: the person may know better (the same override as
            # ember run --force and "force": true on the API)
            text = text.replace(f" {FORCE_HINT}", "")
            actions.append(("Load anyway", lambda: self._load_anyway(path)))
        actions.append(("Choose another model", self.model_menu_requested.emit))
        self.banner.show_message("error", text, actions)

    def _load_anyway(self, path: str) -> None:
        from dataclasses import replace

        self.engine.load(path, replace(load_params(self.engine.settings), force=True))

    def _load_with_ctx(self, path: str, n_ctx: int) -> None:
        from dataclasses import replace

        params: LoadParams = replace(load_params(self.engine.settings), n_ctx=n_ctx)
        self.engine.load(path, params)

    @Slot(object)
    def _on_engine_failed(self, error: EngineError) -> None:
        self.banner.show_message(
            "error",
            f"The engine ran into a problem: {error} Your chats are saved. Try loading the "
            "model again; if it keeps happening, restart Ember.",
            [("Choose a model", self.model_menu_requested.emit)],
        )

    @Slot()
    def _refresh_empty_state(self) -> None:
        if self.engine.remote_model:
            self.empty.show_ready_remote(self.engine.remote_model)
        elif self.engine.loading_path:
            self.empty.show_loading(self.engine.loading_path)
        elif self.engine.loaded is not None:
            self.empty.show_ready(self.engine.loaded)
        else:
            self.empty.show_welcome()

    def _show_view(self, has_messages: bool) -> None:
        self.stack.setCurrentWidget(self.view if has_messages else self.empty_scroll)
