"""Which model a chat uses, kept in step with the engine's.

A chat remembers its model (``Conversation.model``: a file path or a remote ``provider::model``
id). ``ChatModelSync`` keeps the open chat's model and the engine's choice in step:

- loading a local model (the picker, "Load" on the Models page) makes it the open chat's model,
  unless the chat is remote; if that model fails to load, the chat gets its model back;
- choosing a remote model in the picker (or the local one again) does the same;
- opening a chat selects its remote model, or loads its model file when another model is in
  use and no other chat is answering with a different one (otherwise its next message loads
  it); at start-up ``load_chat_model`` loads it before the last model would be restored.

The answer itself records the model it was written with (ConversationController).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Slot

from app.chats.models import ChatStoreError
from app.engine.provider_ids import is_remote_id

if TYPE_CHECKING:
    from app.ui.chat.conversation import ConversationController


def remote_model(model: str | None) -> str | None:
    """``model`` if it is a remote id (``provider::model``)."""
    return model if is_remote_id(model) else None


def model_file(model: str | None) -> str | None:
    """``model`` if it is a local model file that is there."""
    if model and not is_remote_id(model) and Path(model).is_file():
        return model
    return None


class ChatModelSync(QObject):
    """See the module docstring. GUI thread; owned by the controller."""

    def __init__(self, controller: ConversationController) -> None:
        super().__init__(controller)
        self.controller = controller
        self.engine = controller.engine
        self._following_engine = False
        # (conversation id, its model before, the model it followed) while that one loads
        self._undo: tuple[str | None, str | None, str] | None = None
        self.engine.load_started.connect(self._on_load_started)
        self.engine.load_failed.connect(self._on_load_failed)
        self.engine.remote_selected.connect(self._on_remote_selected)

    def _chat_model(self) -> str | None:
        model, _, _ = self.controller.conversation_settings()
        return model

    def select_engine_model(self) -> None:
        """Make the engine's remote selection match the chat (None: the local model)."""
        if not self._following_engine:
            self.engine.select_remote(remote_model(self._chat_model()))

    def load_chat_model(self) -> bool:
        """Load the open chat's own model file when no model is loaded or loading; False
        when there is nothing to do."""
        path = model_file(self._chat_model())
        if path is None or self.engine.loaded is not None or self.engine.loading_path:
            return False
        self.engine.load(path)
        return True

    def pick_chat_model(self) -> None:
        """On opening a chat: load its model file if another one is in use (loaded or
        loading) and no other chat is answering with a different one."""
        path = model_file(self._chat_model())
        engine = self.engine
        if path is None or (engine.loaded is None and not engine.loading_path):
            return  # nothing in use: the next message loads it
        if path in (engine.loading_path, engine.loaded.path if engine.loaded else None):
            return
        if self.controller.answers.local_models_in_use() - {path}:
            return  # it would wait for them; the next message loads it
        engine.load(path)

    @Slot(object)
    def _on_remote_selected(self, model_id: str | None) -> None:
        """The picker chose a remote model (or the local one): the chat follows."""
        if self._following_engine:
            return
        self._following_engine = True
        try:
            model = self._chat_model()
            if model_id is not None and model != model_id:
                self.controller.set_model(model_id)
            elif model_id is None and is_remote_id(model):
                self.controller.set_model(None)
            self.controller.refresh_context()
        finally:
            self._following_engine = False

    @Slot(str)
    def _on_load_started(self, path: str) -> None:
        model = self._chat_model()
        self._undo = None
        if not is_remote_id(model) and model != path:
            self._undo = (self.controller.conversation_id, model, path)
            self.controller.set_model(path)

    @Slot(str, object)
    def _on_load_failed(self, path: str, _error: object) -> None:
        undo, self._undo = self._undo, None
        if undo is None or undo[2] != path:
            return
        conversation_id, previous, _ = undo
        if conversation_id == self.controller.conversation_id:
            if self._chat_model() == path:
                self.controller.set_model(previous)
            return
        store = self.controller.store
        try:
            if (
                conversation_id is not None
                and store.get_conversation(conversation_id).model == path
            ):
                store.update_conversation_settings(conversation_id, model=previous)
        except ChatStoreError:
            pass  # the chat is gone
