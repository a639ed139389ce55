"""The main window: composes the navigation rail, the pages (Chats: sidebar, header, chat
pane and chat settings; Models; Server) and the status bar.

No business logic here: the panes, the ``ConversationController`` and ``app/chats`` own it.
The window wires pane signals together, owns the shortcuts, and saves/restores its geometry,
splitter sizes and the last open conversation.

Start-up: only the Chats page is built before the window is shown. The Models page (which also
resumes unfinished downloads) and the Server page, and their modules, are built on the first use
of ``models_pane``/``server_pane``: ``run_gui`` asks for them once the window has been painted.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import QByteArray, Qt, QTimer, Slot
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QResizeEvent, QShortcut, QShowEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QMainWindow,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.chats.models import Conversation
from app.ui import theme
from app.ui.chat.chat_pane import ChatPane
from app.ui.chat.conversation import ConversationController
from app.ui.header.header_bar import HeaderBar
from app.ui.machine_monitor import MachineMonitor
from app.ui.nav_rail import CHATS, MODELS, PAGES, SERVER, NavRail
from app.ui.server.controller import ServerController
from app.ui.services import Services
from app.ui.settings.conversation_panel import ConversationPanel
from app.ui.sidebar.sidebar import Sidebar
from app.ui.single_instance import raise_window
from app.ui.status_bar import StatusBar
from app.ui.theme import ThemeManager

if TYPE_CHECKING:
    from app.ui.models.pane import ModelsPane
    from app.ui.server.pane import ServerPane
    from app.ui.settings.settings_dialog import SettingsDialog

GEOMETRY_KEY = "ui.geometry"
PAGE_KEY = "ui.page"
SPLITTER_KEY = "ui.splitter"
SIDEBAR_NARROW_KEY = "ui.sidebar_narrow"  # the user keeps the sidebar in narrow windows too
DEFAULT_SIZE = (1280, 820)
# Half of a 1366-pixel laptop screen still holds the window; each page fits in it.
MIN_SIZE = (640, 480)
# Narrower than this, the sidebar folds away (Ctrl+B still shows it) and the chat keeps the room.
SIDEBAR_COLLAPSE_WIDTH = 900


class MainWindow(QMainWindow):
    """The app's window. ``services`` stay owned by the caller (close them after the window)."""

    def __init__(
        self,
        services: Services,
        themes: ThemeManager | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("MainWindow")
        self.setWindowTitle("Ember")
        self.services = services
        self.themes = themes
        self.settings_dialog: SettingsDialog | None = None
        self.shortcuts_dialog: QWidget | None = None  # the last one opened (F1)
        self._pending_sizes: list[int] | None = None
        self._narrow = False  # below SIDEBAR_COLLAPSE_WIDTH: the sidebar is folded away
        self._sidebar_gave_way = False  # hidden to make room for the chat settings
        s = services
        self.controller = ConversationController(
            s.store, s.engine, s.settings, self, embedders=s.embedders
        )

        self.sidebar = Sidebar(s.store, self)
        self.header = HeaderBar(s.engine, s.catalog, self)
        self.chat = ChatPane(self.controller, s.engine, s.catalog, self)
        self.panel = ConversationPanel(self.controller, s.catalog, self)
        self.server = ServerController(s, self)
        self.monitor = MachineMonitor(self)  # RAM, CPU, GPUs over time (Settings → Hardware)
        self.status = StatusBar(s.engine, self, monitor=self.monitor)
        self.status.attach_server(self.server)
        self.status.attach_residency(s.residency)
        self.status.attach_answers(self.controller.answers)  # also between tool calls
        self.setStatusBar(self.status)
        self.rail = NavRail(self)
        self._models_pane: ModelsPane | None = None  # built on first use (see models_pane)
        self._server_pane: ServerPane | None = None

        center = QWidget(self)
        center.setObjectName("Center")
        center_layout = QVBoxLayout(center)
        center_layout.setContentsMargins(0, 0, 0, 0)
        center_layout.setSpacing(0)
        center_layout.addWidget(self.header)
        center_layout.addWidget(self.chat, 1)
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.setObjectName("MainSplitter")
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setHandleWidth(1)
        self.splitter.addWidget(self.sidebar)
        self.splitter.addWidget(center)
        self.splitter.addWidget(self.panel)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setStretchFactor(2, 0)
        self.pages = QStackedWidget(self)
        self.pages.setObjectName("Pages")
        self._page_widgets: dict[str, QWidget] = {CHATS: self.splitter}
        self.pages.addWidget(self.splitter)
        root = QWidget(self)
        root.setObjectName("Root")
        root_layout = QHBoxLayout(root)
        root_layout.setContentsMargins(0, 0, 0, 0)
        root_layout.setSpacing(0)
        root_layout.addWidget(self.rail)
        root_layout.addWidget(self.pages, 1)
        self.setCentralWidget(root)
        self.setMinimumSize(*MIN_SIZE)

        self._connect()
        self._add_shortcuts()
        self._add_quit()
        self._restore_state()
        if services.history_notice:
            self._on_history_recovered(services.history_notice)

    # -- wiring ---------------------------------------------------------------------------

    def _connect(self) -> None:
        c, sb, h = self.controller, self.sidebar, self.header
        sb.conversation_selected.connect(c.open_conversation)
        sb.conversation_selected.connect(self._on_conversation_chosen)
        sb.new_chat_requested.connect(self.new_chat)
        sb.conversation_deleted.connect(self._on_conversation_deleted)
        sb.conversation_restored.connect(c.open_conversation)
        sb.conversation_renamed.connect(self._on_conversation_renamed)
        sb.conversation_imported.connect(c.open_conversation)
        sb.history_recovered.connect(self._on_history_recovered)
        self.rail.page_requested.connect(self.show_page)
        self.rail.settings_requested.connect(self.open_settings)
        self.status.hardware_page_requested.connect(self.open_hardware)
        self.rail.help_requested.connect(self.open_shortcuts)
        c.conversation_opened.connect(self._on_conversation_opened)
        c.conversations_changed.connect(sb.request_refresh)
        # the chats writing an answer get a dot in the list (several may answer at once)
        c.answers.finished.connect(self._refresh_answering)
        self.services.engine.answers_changed.connect(self._refresh_answering)
        h.sidebar_toggle_requested.connect(self.toggle_sidebar)
        h.conversation_settings_toggled.connect(self._on_panel_toggled)
        h.conversation_action_requested.connect(self._on_conversation_action)
        self.panel.close_requested.connect(self._on_panel_close_requested)
        self.chat.model_menu_requested.connect(h.picker.open_menu)
        h.picker.manage_providers_requested.connect(self.open_providers)
        self.status.server_page_requested.connect(lambda: self.show_page(SERVER))
        self.chat.open_model_requested.connect(h.picker.open_file)
        self.chat.browse_models_requested.connect(lambda: self.show_page(MODELS))
        if self.themes is not None:
            self.themes.theme_changed.connect(self._on_theme_changed)

    @Slot()
    def _refresh_answering(self, *_args: object) -> None:
        answering = {a.conversation_id for a in self.controller.answers.all()}
        self.sidebar.list.set_answering(answering)

    def _add_shortcuts(self) -> None:
        for keys, slot in (
            ("Ctrl+N", self.new_chat),
            ("Ctrl+K", self.sidebar_search),
            ("Ctrl+,", self.open_settings),
            ("Ctrl+Shift+C", self.chat.copy_last_answer),
            ("Esc", self.controller.stop),
            ("Ctrl+L", self.header.picker.open_menu),
            ("Ctrl+B", self.toggle_sidebar),
            ("Ctrl+1", lambda: self.show_page(CHATS)),
            ("Ctrl+2", lambda: self.show_page(MODELS)),
            ("Ctrl+3", lambda: self.show_page(SERVER)),
            ("F1", self.open_shortcuts),
        ):
            shortcut = QShortcut(QKeySequence(keys), self)
            shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
            shortcut.activated.connect(slot)

    def _add_quit(self) -> None:
        """Quit Ember (Ctrl+Q; Cmd+Q on macOS, where it sits in the application menu): closes
        the window as its close button does (state saved, an answer being written saved as
        stopped), which ends the app."""
        action = QAction(theme.icon("close"), "Quit Ember", self)
        action.setShortcut(QKeySequence("Ctrl+Q"))  # Qt reads Ctrl as Cmd on macOS
        action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        action.setMenuRole(QAction.MenuRole.QuitRole)
        action.triggered.connect(self.close)
        self.addAction(action)
        self.quit_action = action
        self.header.add_app_action(action)
        if sys.platform == "darwin":  # the native menu bar takes no room in the window
            self.menuBar().addMenu("File").addAction(action)

    # -- pages ----------------------------------------------------------------------------

    @property
    def models_pane(self) -> ModelsPane:
        """The Models page, built on first use (building it resumes unfinished downloads)."""
        if self._models_pane is None:
            from app.ui.models.pane import ModelsPane

            pane = ModelsPane(self.services, self)
            pane.load_requested.connect(self.load_model_into_chat)
            pane.downloads_active.connect(lambda n: self.rail.set_badge(MODELS, n))
            self._add_page(MODELS, pane)
            self._models_pane = pane
        return self._models_pane

    @property
    def server_pane(self) -> ServerPane:
        """The Server page, built on first use."""
        if self._server_pane is None:
            from app.ui.server.pane import ServerPane

            pane = ServerPane(self.server, self)
            self._add_page(SERVER, pane)
            self._server_pane = pane
        return self._server_pane

    def _add_page(self, page: str, widget: QWidget) -> None:
        self._page_widgets[page] = widget
        self.pages.insertWidget(PAGES.index(page), widget)
        self._update_minimum_size()

    def _page_widget(self, page: str) -> QWidget | None:
        if page == MODELS:
            return self.models_pane
        if page == SERVER:
            return self.server_pane
        return self._page_widgets.get(page)

    # -- actions --------------------------------------------------------------------------

    @Slot(str)
    def show_page(self, page: str) -> None:
        """Show Chats, Models or Server (``nav_rail.PAGES``)."""
        widget = self._page_widget(page)
        if widget is None:
            return
        self.pages.setCurrentWidget(widget)
        self.rail.set_page(page)
        if page == CHATS:
            self.chat.focus_composer()
        elif page == MODELS:
            self.models_pane.activate()
        elif page == SERVER:
            self.server_pane.activate()

    @property
    def current_page(self) -> str:
        current = self.pages.currentWidget()
        return next((p for p, w in self._page_widgets.items() if w is current), CHATS)

    @Slot(str)
    def load_model_into_chat(self, path: str) -> None:
        """ "Load" from the Models page: load the model and go back to chatting."""
        self.header.picker.load(path)
        self.show_page(CHATS)

    @Slot()
    def new_chat(self) -> None:
        self.show_page(CHATS)
        self.controller.new_conversation()
        self.chat.focus_composer()

    @Slot()
    def sidebar_search(self) -> None:
        if not self.sidebar.isVisible():
            self.toggle_sidebar()
        self.sidebar.focus_search()

    @Slot()
    def toggle_sidebar(self) -> None:
        """Show or hide the sidebar, and remember it. Hidden, it stays hidden at any width;
        shown in a narrow window, it stays shown in narrow windows too (else it folds away
        there, and comes back in a wide one)."""
        visible = not self.sidebar.isVisible()
        settings = self.services.settings
        settings.set("ui.sidebar_visible", visible)
        if self._narrow or not visible:
            settings.set(SIDEBAR_NARROW_KEY, visible)
        self._show_sidebar(visible, asked=True)

    def _show_sidebar(self, visible: bool, asked: bool = False) -> None:
        """``asked``: by the person (Ctrl+B); chat settings with no room beside it close."""
        self._sidebar_gave_way = False
        self.sidebar.setVisible(visible)
        crowded = not self.panel.isHidden() and not self._fits(self.sidebar, self.panel)
        if visible and asked and crowded:
            self.header.settings_button.setChecked(False)
        self._update_minimum_size()

    def _update_minimum_size(self) -> None:
        """MIN_SIZE, whatever is shown: the window never grows past the size the person gave it
        (it grew past a small screen when a side pane opened). A side pane that leaves the chat
        too little room takes the chat's place instead (``_fit_panes``)."""
        others = [_minimum_width(w) for w in self._page_widgets.values() if w is not self.splitter]
        needed = self.rail.minimumWidth() + max([0, *others])
        self.setMinimumSize(max(MIN_SIZE[0], needed), MIN_SIZE[1])
        self._fit_panes()

    def _fits(self, *panes: QWidget) -> bool:
        """Whether the chat keeps its minimum width beside ``panes`` in this window."""
        center = self.splitter.widget(1)
        needed = self.rail.minimumWidth() + (_minimum_width(center) if center else 0)
        needed += sum(_minimum_width(p) + self.splitter.handleWidth() for p in panes)
        return needed <= self.width()

    def _fit_panes(self) -> None:
        """Side panes never squeeze the chat below its minimum width: with no room for both,
        the sidebar gives way to the chat settings (and comes back when they close or the
        window widens); with no room for one, it takes the chat's place until it closes."""
        center = self.splitter.widget(1)
        if center is None:
            return
        panel_open = not self.panel.isHidden()
        if self._sidebar_gave_way and (not panel_open or self._fits(self.sidebar, self.panel)):
            self._sidebar_gave_way = False
            self.sidebar.show()
        if panel_open and not self.sidebar.isHidden() and not self._fits(self.sidebar, self.panel):
            self.sidebar.hide()
            self._sidebar_gave_way = True
        panes = [p for p in (self.sidebar, self.panel) if not p.isHidden()]
        center.setVisible(self._fits(*panes))

    def _fold_sidebar_to_width(self) -> None:
        narrow = self.width() < SIDEBAR_COLLAPSE_WIDTH
        if narrow == self._narrow:
            return
        self._narrow = narrow
        settings = self.services.settings
        wanted = settings.get("ui.sidebar_visible")
        if narrow:
            wanted = wanted and settings.get(SIDEBAR_NARROW_KEY)
        self._show_sidebar(wanted)

    @Slot()
    def open_settings(self) -> None:
        from app.ui.settings.settings_dialog import SettingsDialog

        if self.settings_dialog is not None and self.settings_dialog.isVisible():
            self.settings_dialog.raise_()
            return
        # A closed dialog deletes itself (WA_DeleteOnClose): forget it then, not only when the
        # next one replaces it (asking a deleted one isVisible() raised, and Settings was dead).
        dialog = SettingsDialog(
            self.services.settings,
            self.services.engine.loaded,
            self,
            providers=self.services.providers,
            remote_catalog=self.services.engine.remote_catalog,
            # Test in Settings → Tools and the chats share the servers' processes
            tool_manager=self.controller.answers.tools.manager,
            monitor=self.monitor,
            library=self.services.library,
        )
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.library_changed.connect(self._on_library_changed)
        if self.themes is not None:
            dialog.theme_chosen.connect(self.themes.set_choice)
        dialog.reload_model_requested.connect(self._on_reload_model_requested)
        dialog.destroyed.connect(self._on_settings_destroyed)
        self.settings_dialog = dialog
        dialog.open()

    @Slot()
    def _on_library_changed(self) -> None:
        """A store switched in Settings → Models: the picker and My Models scan again."""
        self.services.catalog.refresh()
        if self._models_pane is not None:
            self._models_pane.my_models.refresh()

    @Slot()
    def open_hardware(self) -> None:
        """Settings, on the Hardware page (from the status bar's memory figure)."""
        self.open_settings()
        if self.settings_dialog is not None:
            self.settings_dialog.show_page("Hardware")

    @Slot()
    def _on_settings_destroyed(self) -> None:
        self.settings_dialog = None

    @Slot()
    def open_shortcuts(self) -> None:
        """Help: the keyboard shortcuts (F1)."""
        from app.ui.shortcuts import ShortcutsDialog

        dialog = ShortcutsDialog(self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.shortcuts_dialog = dialog
        dialog.open()

    @Slot()
    def open_providers(self) -> None:
        """Settings, on the Providers page (from the model picker's "Add a remote provider…")."""
        self.open_settings()
        if self.settings_dialog is not None:
            self.settings_dialog.show_page("Providers")

    @Slot(list)
    def on_instance_message(self, arguments: list[str]) -> None:
        """Another launch of Ember handed over: come to the front; load a model it named."""
        raise_window(self)
        self.open_files([a for a in arguments if isinstance(a, str)])

    def open_files(self, files: list[str]) -> bool:
        """Load the first ``.gguf`` of ``files`` into the chat; False if there was none."""
        for path in files:
            if path.lower().endswith(".gguf"):
                self.load_model_into_chat(path)
                return True
        return False

    def start_background_services(self, files: Sequence[str] = ()) -> None:
        """After the window is shown: the model it was opened with (else the last one), and
        the API server if it was on."""
        if not self.open_files(list(files)):
            self.restore_last_model()
        self.server.restore()

    def restore_last_model(self) -> None:
        """Load the model that was loaded when Ember was last closed, if it still exists."""
        from pathlib import Path

        engine = self.services.engine
        path = self.services.settings.get("ui.last_model")
        if path and Path(path).is_file() and engine.loaded is None and not engine.loading_path:
            engine.load(path)

    # -- events ---------------------------------------------------------------------------

    @Slot(object)
    def _on_conversation_opened(self, conversation: Conversation | None) -> None:
        self.header.set_conversation(conversation)
        self.sidebar.set_current(conversation.id if conversation else None)
        title = f"{conversation.title} — Ember" if conversation else "Ember"
        self.setWindowTitle(title)

    @Slot(str)
    def _on_conversation_chosen(self, _conversation_id: str) -> None:
        """A chat picked in a sidebar that hid the chat (a narrow window): show the chat."""
        center = self.splitter.widget(1)
        if center is not None and center.isHidden() and self.sidebar.isVisible():
            self.sidebar.hide()
            self._fit_panes()

    @Slot(str)
    def _on_history_recovered(self, text: str) -> None:
        self.chat.banner.show_message("warning", text)

    @Slot(str)
    def _on_conversation_deleted(self, conversation_id: str) -> None:
        if self.controller.conversation_id == conversation_id:
            self.controller.new_conversation()

    @Slot(str)
    def _on_conversation_renamed(self, conversation_id: str) -> None:
        if self.controller.conversation_id == conversation_id:
            self.controller.reload_conversation()

    @Slot(str)
    def _on_conversation_action(self, action: str) -> None:
        conversation_id = self.controller.conversation_id
        if conversation_id is None:
            return
        if action == "rename":
            if not self.sidebar.isVisible():
                self.toggle_sidebar()
            self.sidebar.rename(conversation_id)
        elif action == "delete":
            self.sidebar.delete(conversation_id)
        elif action in ("export_markdown", "export_json"):
            self.sidebar.export(conversation_id, action.removeprefix("export_"))

    @Slot(bool)
    def _on_panel_toggled(self, visible: bool) -> None:
        self.panel.setVisible(visible)
        self.services.settings.set("ui.chat_settings_visible", visible)
        self._update_minimum_size()

    @Slot()
    def _on_panel_close_requested(self) -> None:
        self.header.settings_button.setChecked(False)

    @Slot()
    def _on_reload_model_requested(self) -> None:
        loaded = self.services.engine.loaded
        if loaded is not None:
            self.services.engine.load(loaded.path)

    @Slot(object)
    def _on_theme_changed(self, palette: theme.Palette) -> None:
        self.chat.apply_theme(palette)
        self.sidebar.list.viewport().update()

    # -- state ----------------------------------------------------------------------------

    def _restore_state(self) -> None:
        settings = self.services.settings
        geometry = settings.extra(GEOMETRY_KEY)
        restored = isinstance(geometry, str) and self.restoreGeometry(
            QByteArray.fromBase64(geometry.encode("ascii"))
        )
        if not restored:
            self._default_geometry()
        sizes = settings.extra(SPLITTER_KEY)
        panel_visible = settings.get("ui.chat_settings_visible")
        self.panel.setVisible(panel_visible)
        self.header.settings_button.setChecked(panel_visible)
        self.sidebar.setVisible(settings.get("ui.sidebar_visible"))
        self._fold_sidebar_to_width()
        self._update_minimum_size()
        if isinstance(sizes, list) and len(sizes) == 3 and all(isinstance(x, int) for x in sizes):
            self._pending_sizes = sizes
        else:
            self._pending_sizes = [272, 900, 340]
        self.splitter.setSizes(self._pending_sizes)
        self.controller.open_conversation(settings.get("ui.last_conversation") or None)
        self.services.catalog.refresh()
        page = settings.extra(PAGE_KEY)
        if isinstance(page, str) and page in PAGES and page != CHATS:
            self.show_page(page)

    def _default_geometry(self) -> None:
        screen = self.screen()
        width, height = DEFAULT_SIZE
        if screen is not None:
            available = screen.availableGeometry()
            width = min(width, int(available.width() * 0.92))
            height = min(height, int(available.height() * 0.92))
            self.resize(width, height)
            frame = self.frameGeometry()
            frame.moveCenter(available.center())
            self.move(frame.topLeft())
        else:
            self.resize(width, height)

    def save_state(self) -> None:
        settings = self.services.settings
        geometry = bytes(self.saveGeometry().toBase64().data()).decode("ascii")
        settings.set_extra(GEOMETRY_KEY, geometry)
        sizes = [int(x) for x in self.splitter.sizes()]
        saved = settings.extra(SPLITTER_KEY)
        for index in (0, 2):  # a folded or closed side pane keeps the width it had
            if sizes[index] == 0 and isinstance(saved, list) and len(saved) == 3:
                sizes[index] = saved[index] if isinstance(saved[index], int) else 0
        settings.set_extra(SPLITTER_KEY, sizes)
        settings.set("ui.last_conversation", self.controller.conversation_id or "")
        settings.set_extra(PAGE_KEY, self.current_page)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._fold_sidebar_to_width()
        self._fit_panes()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        if self._pending_sizes is not None:
            # The splitter knows its real width only once shown; sizes set before are scaled.
            QTimer.singleShot(0, self, self._apply_pending_sizes)

    @Slot()
    def _apply_pending_sizes(self) -> None:
        if self._pending_sizes is not None:
            self.splitter.setSizes(self._pending_sizes)
            self._pending_sizes = None

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        self.save_state()
        self.panel.flush()
        self.controller.shutdown()
        super().closeEvent(event)


def _minimum_width(widget: QWidget) -> int:
    """The width a layout gives ``widget`` at the least (its own minimum, else its hint's)."""
    return widget.minimumWidth() or widget.minimumSizeHint().width()
