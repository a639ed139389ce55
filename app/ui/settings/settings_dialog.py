"""The Settings dialog: appearance, model loading, default sampling, remote providers, tools
(MCP servers), data.

Every change is saved at once (atomically, by ``Settings``; providers by their registry). Load
parameters apply to the next model load; the dialog offers to reload the current model.

Signals: ``theme_chosen(str)``, ``reload_model_requested()``, ``providers_changed()``,
``tools_changed()``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from PySide6.QtCore import QRectF, QSize, Qt, QTimer, QUrl, Signal, Slot
from PySide6.QtGui import (
    QColor,
    QDesktopServices,
    QGuiApplication,
    QIcon,
    QPainter,
    QPainterPath,
    QPixmap,
    QResizeEvent,
    QValidator,
)
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.config import Settings, paths
from app.engine.load_settings import KV_CACHE_CHOICES
from app.engine.providers import ProviderRegistry
from app.engine.sizing import AUTO_GPU_LAYERS
from app.engine.speculation import MAX_DRAFT_ROWS
from app.engine.types import LoadedModel
from app.library.local import Library
from app.library.user_library import default_library
from app.tools.manager import ToolManager
from app.ui import theme
from app.ui.header.remote_models import RemoteCatalog
from app.ui.machine_monitor import MachineMonitor
from app.ui.settings import presets
from app.ui.settings.draft_choice import DraftModelChoice
from app.ui.settings.hardware_page import HardwarePage
from app.ui.settings.models_page import ModelsPage
from app.ui.settings.providers_page import ProvidersPage
from app.ui.settings.sampling_form import SamplingForm
from app.ui.settings.tools_page import ToolsPage

PAGES = (
    ("Appearance", "sliders"),
    ("Model loading", "chip"),
    ("Chat defaults", "chat"),
    ("Providers", "cloud"),
    ("Tools", "spark"),
    ("Hardware", "gpu"),
    ("Models", "box"),
    ("Data", "folder"),
)
MAX_PARALLEL = 16
NAV_WIDTH = 190
NAV_COMPACT = 64  # the page list in a narrow dialog: icons (names in tooltips)
COMPACT_WIDTH = 700


class GpuLayersSpin(QSpinBox):
    """GPU layers: -2 reads "Automatic", -1 "All layers" (typed in either case too)."""

    LABELS: ClassVar[dict[int, str]] = {AUTO_GPU_LAYERS: "Automatic", -1: "All layers"}

    def textFromValue(self, value: int) -> str:  # noqa: N802 (Qt's name)
        return self.LABELS.get(value, str(value))

    def valueFromText(self, text: str) -> int:  # noqa: N802 (Qt's name)
        for value, label in self.LABELS.items():
            if text.strip().lower() == label.lower():
                return value
        try:
            return int(text.strip())
        except ValueError:
            return self.value()

    def validate(self, text: str, pos: int) -> tuple[QValidator.State, str, int]:
        typed = text.strip().lower()
        for label in self.LABELS.values():
            if typed == label.lower():
                return QValidator.State.Acceptable, text, pos
            if typed and label.lower().startswith(typed):
                return QValidator.State.Intermediate, text, pos
        return super().validate(text, pos)


def _page(title: str, subtitle: str) -> tuple[QWidget, QVBoxLayout]:
    page = QWidget()
    layout = QVBoxLayout(page)
    layout.setContentsMargins(28, 22, 28, 22)
    layout.setSpacing(12)
    heading = QLabel(title, page)
    heading.setObjectName("PageTitle")
    sub = QLabel(subtitle, page)
    sub.setObjectName("FieldHelp")
    sub.setWordWrap(True)
    layout.addWidget(heading)
    layout.addWidget(sub)
    layout.addSpacing(6)
    return page, layout


# Three cards side by side fit the dialog's smallest page (720 px wide dialog: 458 px inside
# the page's margins); the drawing is made on a 150x94 grid and scaled to the card.
PREVIEW_W, PREVIEW_H = 120, 75
_GRID_W, _GRID_H = 150, 94


def theme_preview(choice: str, ratio: float = 1.0) -> QPixmap:
    """A small drawing of the window in a theme ("system": half light, half dark)."""
    image = QPixmap(round(PREVIEW_W * ratio), round(PREVIEW_H * ratio))
    image.setDevicePixelRatio(ratio)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.scale(PREVIEW_W / _GRID_W, PREVIEW_H / _GRID_H)
    halves = [theme.LIGHT, theme.DARK] if choice == "system" else [theme.resolve(choice)]
    for index, p in enumerate(halves):
        painter.save()
        outline = QPainterPath()
        outline.addRoundedRect(QRectF(0.5, 0.5, _GRID_W - 1, _GRID_H - 1), 9, 9)
        if len(halves) == 2:
            half = QPainterPath()
            x = 0 if index == 0 else _GRID_W / 2
            half.addRect(QRectF(x, 0, _GRID_W / 2, _GRID_H))
            outline = outline.intersected(half)
        painter.setClipPath(outline)
        painter.fillRect(QRectF(0, 0, _GRID_W, _GRID_H), QColor(p.window))
        painter.fillRect(QRectF(0, 0, 40, _GRID_H), QColor(p.sidebar))
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(p.border_strong))
        for y in (14, 24, 34):
            painter.drawRoundedRect(QRectF(8, y, 24, 5), 2.5, 2.5)
        painter.setBrush(QColor(p.user_bubble))
        painter.drawRoundedRect(QRectF(92, 12, 48, 14), 7, 7)
        painter.setBrush(QColor(p.accent))
        painter.drawEllipse(QRectF(50, 34, 9, 9))
        painter.setBrush(QColor(p.faint))
        for y, w in ((36, 70), (48, 82), (60, 60)):
            painter.drawRoundedRect(QRectF(64, y, w, 4.5), 2.25, 2.25)
        painter.setBrush(QColor(p.surface))
        painter.setPen(QColor(p.border_strong))
        painter.drawRoundedRect(QRectF(50, 74, 90, 12), 6, 6)
        painter.restore()
    painter.resetTransform()  # the frame: a crisp 1 px line at the card's own size
    painter.setPen(QColor(theme.current().border_strong))
    painter.setBrush(Qt.BrushStyle.NoBrush)
    painter.drawRoundedRect(QRectF(0.5, 0.5, PREVIEW_W - 1, PREVIEW_H - 1), 8, 8)
    painter.end()
    return image


def _fitted(size: QSize, parent: QWidget | None) -> QSize:
    """``size``, no larger than the screen the dialog opens on."""
    screen = parent.screen() if parent is not None else QGuiApplication.primaryScreen()
    if screen is None:
        return size
    return size.boundedTo(screen.availableGeometry().size())


def _form() -> QFormLayout:
    form = QFormLayout()
    form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
    form.setHorizontalSpacing(18)
    form.setVerticalSpacing(10)
    return form


class SettingsDialog(QDialog):
    """See the module docstring."""

    theme_chosen = Signal(str)
    reload_model_requested = Signal()
    providers_changed = Signal()
    tools_changed = Signal()
    library_changed = Signal()  # a model store switched, a hidden model shown again

    def __init__(
        self,
        settings: Settings,
        loaded: LoadedModel | None,
        parent: QWidget | None = None,
        *,
        providers: ProviderRegistry | None = None,
        remote_catalog: RemoteCatalog | None = None,
        tool_manager: ToolManager | None = None,
        monitor: MachineMonitor | None = None,
        library: Library | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("SettingsDialog")
        self.setWindowTitle("Settings")
        self.setMinimumSize(QSize(600, 420))  # fits a 640x480 screen
        self.resize(_fitted(QSize(820, 600), parent))
        self.settings = settings
        self._loaded = loaded
        # The registry re-reads its file on every call: a fresh one sees the app's providers.
        self.providers_page = ProvidersPage(providers or ProviderRegistry(), remote_catalog)
        self.providers_page.providers_changed.connect(self.providers_changed)
        if remote_catalog is not None:
            self.providers_changed.connect(remote_catalog.refresh)
        self.models_page = ModelsPage(settings, library or default_library(settings))
        self.models_page.sources_changed.connect(self.library_changed)
        self.tools_page = ToolsPage(manager=tool_manager)
        self.tools_page.tools_changed.connect(self.tools_changed)

        self.nav = QListWidget(self)
        self.nav.setObjectName("SettingsNav")
        self.nav.setAccessibleName("Settings pages")
        self.nav.setFixedWidth(NAV_WIDTH)
        self.nav.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.pages = QStackedWidget(self)
        for name, icon in PAGES:
            item = QListWidgetItem(theme.icon(icon), name, self.nav)
            item.setData(Qt.ItemDataRole.AccessibleTextRole, name)
            item.setToolTip(name)
        for page in (
            self._appearance_page(),
            self._loading_page(),
            self._defaults_page(),
            self.providers_page,
            self.tools_page,
            HardwarePage(self.settings, monitor=monitor),
            self.models_page,
            self._data_page(),
        ):
            scroll = QScrollArea(self.pages)
            scroll.setWidgetResizable(True)
            scroll.setFrameShape(QFrame.Shape.NoFrame)
            scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            scroll.setWidget(page)
            self.pages.addWidget(scroll)
        self.nav.currentRowChanged.connect(self.pages.setCurrentIndex)
        # Tab as the form shows them (the KV cache box was made after the RAM field, the draft
        # model box on another parent); only here are they all in one window
        QWidget.setTabOrder(self.parallel, self.cache_type)
        QWidget.setTabOrder(self.cache_type, self.cache_ram)
        QWidget.setTabOrder(self.cache_ram, self.draft_model)
        QWidget.setTabOrder(self.draft_model, self.draft_max)
        self.nav.setCurrentRow(0)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        close = buttons.button(QDialogButtonBox.StandardButton.Close)
        if close is not None:
            close.setIcon(QIcon())  # some platform themes add one; nothing else here has
        buttons.rejected.connect(self.accept)
        buttons.accepted.connect(self.accept)
        right = QVBoxLayout()
        right.setContentsMargins(0, 0, 16, 14)
        right.addWidget(self.pages, 1)
        right.addWidget(buttons)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.nav)
        layout.addLayout(right, 1)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        # Narrow (a small screen), the page list shows its icons only: with their names it
        # left the pages too little room and cut their content
        compact = self.width() < COMPACT_WIDTH
        if compact != (self.nav.width() == NAV_COMPACT):
            self.nav.setFixedWidth(NAV_COMPACT if compact else NAV_WIDTH)
            for row, (name, _icon) in enumerate(PAGES):
                item = self.nav.item(row)
                if item is not None:
                    item.setText("" if compact else name)

    def show_page(self, name: str) -> None:
        """Open the page called ``name`` (one of PAGES), e.g. "Providers"."""
        names = [page for page, _icon in PAGES]
        if name in names:
            self.nav.setCurrentRow(names.index(name))

    # -- pages ----------------------------------------------------------------------------

    def _appearance_page(self) -> QWidget:
        page, layout = _page(
            "Appearance",
            "Ember follows your system's light or dark mode unless you pick one here.",
        )
        self.theme_group = QButtonGroup(self)
        row = QHBoxLayout()
        row.setSpacing(12)
        current = self.settings.get("ui.theme")
        for value, label in (("system", "Match system"), ("light", "Light"), ("dark", "Dark")):
            card = QToolButton(page)
            card.setObjectName(f"theme_{value}")
            card.setProperty("theme", value)
            card.setProperty("class", "ThemeCard")
            card.setText(label)
            card.setCheckable(True)
            card.setChecked(current == value)
            card.setCursor(Qt.CursorShape.PointingHandCursor)
            card.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextUnderIcon)
            card.setIcon(QIcon(theme_preview(value, self.devicePixelRatioF())))
            card.setIconSize(QSize(PREVIEW_W, PREVIEW_H))
            self.theme_group.addButton(card)
            row.addWidget(card)
        row.addStretch(1)
        self.theme_group.buttonClicked.connect(self._on_theme_clicked)
        layout.addLayout(row)
        layout.addStretch(1)
        return page

    def _loading_page(self) -> QWidget:
        page, layout = _page(
            "Model loading",
            "How models are loaded. Changes apply the next time a model loads.",
        )
        form = _form()
        self.n_ctx = self._spin("load.n_ctx", 0, 1_048_576, 512, "Automatic (up to 8,192)")
        self.n_threads = self._spin("load.n_threads", 0, 256, 1, "Automatic (one per core)")
        self.n_gpu_layers = self._spin("load.n_gpu_layers", -2, 1000, 1, None, kind=GpuLayersSpin)
        self.n_gpu_layers.setToolTip(
            "Automatic: as many layers as fit in the GPU's free memory (none without a GPU). "
            "Settings → Hardware chooses which GPU, or the CPU only. Applies the next time a "
            "model loads."
        )
        self.n_batch = self._spin("load.n_batch", 32, 8192, 32, None)
        self.parallel = self._spin("load.parallel", 1, MAX_PARALLEL, 1, "1 (one at a time)")
        self.parallel.setToolTip(
            "How many answers the loaded model writes at the same time, for your chats and API "
            "clients together; more wait their turn. Applies the next time a model loads."
        )
        self.cache_ram = self._spin("load.cache_ram_mb", 0, 1_048_576, 256, "Off")
        self.cache_ram.setSuffix(" MiB")
        self.cache_ram.setToolTip(
            "Conversations pushed out of the model's context by newer ones are kept in this much "
            "RAM, so going back to one resumes at once instead of reading it again. "
            "Applies the next time a model loads."
        )
        self.cache_type = QComboBox(page)
        self.cache_type.setObjectName("load_cache_type")
        for value, label in KV_CACHE_CHOICES.items():
            self.cache_type.addItem(label, value)
        self.cache_type.setCurrentIndex(
            max(0, self.cache_type.findData(self.settings.get("load.cache_type")))
        )
        self.cache_type.currentIndexChanged.connect(self._on_cache_type_changed)
        self.cache_type.setMaximumWidth(320)
        form.addRow(theme.form_label("Context length", self.n_ctx, page), self.n_ctx)
        form.addRow(theme.form_label("CPU threads", self.n_threads, page), self.n_threads)
        form.addRow(theme.form_label("GPU layers", self.n_gpu_layers, page), self.n_gpu_layers)
        form.addRow(theme.form_label("Batch size", self.n_batch, page), self.n_batch)
        form.addRow(theme.form_label("Parallel answers", self.parallel, page), self.parallel)
        form.addRow(theme.form_label("KV cache", self.cache_type, page), self.cache_type)
        form.addRow(theme.form_label("Conversations in RAM", self.cache_ram, page), self.cache_ram)
        self.draft_model = DraftModelChoice(self.settings, page)
        self.draft_model.setMaximumWidth(320)
        form.addRow(theme.form_label("Draft model", self.draft_model, page), self.draft_model)
        self.draft_max = self._spin("load.draft_max", 0, MAX_DRAFT_ROWS, 1, "Off")
        self.draft_max.setSuffix(" tokens")
        self.draft_max.setToolTip(
            "Speculative decoding: up to this many tokens are guessed ahead (from the draft "
            "model, or from the conversation itself: code being edited, quoted text) and checked "
            "in one step, so answers that repeat what came before are written faster. The answer "
            "is the model's either way. Off writes one token a step. Applies the next time a "
            "model loads."
        )
        form.addRow(theme.form_label("Speculation", self.draft_max, page), self.draft_max)
        layout.addLayout(form)
        for key, label in (
            ("load.flash_attn", "Flash attention"),
            ("load.use_mmap", "Memory-map the model file (faster loading)"),
            ("load.use_mlock", "Keep the model in RAM (never swap it out)"),
        ):
            layout.addWidget(self._check(key, label))
        reload_row = QHBoxLayout()
        self.reload_button = QPushButton("Reload the model now", page)
        self.reload_button.setObjectName("SecondaryButton")
        self.reload_button.setEnabled(self._loaded is not None)
        self.reload_button.clicked.connect(self.reload_model_requested)
        reload_row.addWidget(self.reload_button)
        reload_row.addStretch(1)
        layout.addSpacing(6)
        layout.addLayout(reload_row)
        layout.addStretch(1)
        return page

    def _defaults_page(self) -> QWidget:
        page, layout = _page(
            "Chat defaults",
            "New chats start with these. Each chat can change them in its own settings.",
        )
        prompt_label = QLabel("Default system prompt", page)
        prompt_label.setObjectName("SectionTitle")
        self.system_prompt = QPlainTextEdit(page)
        self.system_prompt.setObjectName("DefaultSystemPrompt")
        self.system_prompt.setAccessibleName("Default system prompt")
        self.system_prompt.setFixedHeight(84)
        self.system_prompt.setPlainText(self.settings.get("chat.system_prompt"))
        self._prompt_timer = QTimer(self)
        self._prompt_timer.setSingleShot(True)
        self._prompt_timer.setInterval(400)
        self._prompt_timer.timeout.connect(self._save_system_prompt)
        self.system_prompt.textChanged.connect(self._prompt_timer.start)
        self.sampling = SamplingForm(basic_only=True, parent=page)
        self.sampling.set_values(presets.global_defaults(self.settings))
        self.sampling.values_changed.connect(self._on_sampling_changed)
        layout.addWidget(prompt_label)
        layout.addWidget(self.system_prompt)
        sampling_label = QLabel("Sampling", page)
        sampling_label.setObjectName("SectionTitle")
        layout.addWidget(sampling_label)
        layout.addWidget(self.sampling)
        layout.addStretch(1)
        return page

    def _data_page(self) -> QWidget:
        page, layout = _page(
            "Data",
            "Everything Ember keeps lives in one folder. Set EMBER_HOME before starting Ember "
            "to use another one.",
        )
        p = paths()
        form = _form()
        for label, path in (
            ("Data folder", p.home),
            ("Chat history", p.chats_db),
            ("Models", p.models_dir),
            ("Logs", p.logs_dir),
        ):
            field = QLineEdit(str(path), page)
            field.setReadOnly(True)
            field.setToolTip(str(path))  # a long path is cut at the field's end
            field.setCursorPosition(0)
            field.setObjectName(f"path_{label.split()[0].lower()}")
            open_button = QPushButton("Open", page)
            open_button.setObjectName("SecondaryButton")
            folder = path if path.suffix == "" else path.parent
            open_button.setProperty("folder", str(folder))
            open_button.clicked.connect(self._on_open_folder_clicked)
            row = QHBoxLayout()
            row.setSpacing(8)  # the button does not touch its field
            row.addWidget(field, 1)
            row.addWidget(open_button)
            form.addRow(theme.form_label(label, field, page), row)
        layout.addLayout(form)
        layout.addStretch(1)
        return page

    # -- helpers --------------------------------------------------------------------------

    def _spin(
        self,
        key: str,
        minimum: int,
        maximum: int,
        step: int,
        special: str | None,
        *,
        kind: type[QSpinBox] = QSpinBox,
    ) -> QSpinBox:
        spin = kind(self)
        spin.setObjectName(key.replace(".", "_"))
        spin.setRange(minimum, maximum)
        spin.setSingleStep(step)
        spin.setMinimumWidth(220)
        spin.setMaximumWidth(320)
        if special:
            spin.setSpecialValueText(special)
        spin.setValue(int(self.settings.get(key)))
        spin.setProperty("settingKey", key)
        spin.valueChanged.connect(self._on_spin_changed)
        return spin

    def _check(self, key: str, label: str) -> QCheckBox:
        check = QCheckBox(label, self)
        check.setObjectName(key.replace(".", "_"))
        check.setChecked(bool(self.settings.get(key)))
        check.setProperty("settingKey", key)
        check.toggled.connect(self._on_check_toggled)
        return check

    # -- events ---------------------------------------------------------------------------

    @Slot()
    def _on_theme_clicked(self) -> None:
        button = self.theme_group.checkedButton()
        if button is not None:
            value = str(button.property("theme"))
            self.settings.set("ui.theme", value)
            self.theme_chosen.emit(value)

    @Slot(int)
    def _on_spin_changed(self, value: int) -> None:
        key = self.sender().property("settingKey")
        self.settings.set(str(key), int(value))

    @Slot(bool)
    def _on_check_toggled(self, value: bool) -> None:
        key = self.sender().property("settingKey")
        self.settings.set(str(key), bool(value))

    @Slot(int)
    def _on_cache_type_changed(self, _index: int) -> None:
        self.settings.set("load.cache_type", str(self.cache_type.currentData()))

    @Slot()
    def _save_system_prompt(self) -> None:
        self._prompt_timer.stop()
        self.settings.set("chat.system_prompt", self.system_prompt.toPlainText())

    def done(self, result: int) -> None:
        if self._prompt_timer.isActive():
            self._save_system_prompt()
        self.tools_page.shutdown()
        super().done(result)

    @Slot(dict)
    def _on_sampling_changed(self, values: dict[str, Any]) -> None:
        self.settings.set("sampling.preset", presets.preset_matching(values))
        for name in ("temperature", "top_p", "min_p", "repeat_penalty"):
            self.settings.set(f"sampling.{name}", float(values[name]))
        for name in ("top_k", "max_tokens"):
            self.settings.set(f"sampling.{name}", int(values[name]))

    @Slot()
    def _on_open_folder_clicked(self) -> None:
        folder = str(self.sender().property("folder"))
        QDesktopServices.openUrl(QUrl.fromLocalFile(folder))
