"""A form for sampling values with preset buttons (Precise, Balanced, Creative).

Signal: ``values_changed(dict)`` after the user changed a field or picked a preset.
"""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QButtonGroup,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.ui import theme
from app.ui.settings import presets
from app.ui.settings.presets import FIELDS, PRESETS, Field

FieldWidget = QDoubleSpinBox | QSpinBox | QPlainTextEdit | QLineEdit


class SamplingForm(QWidget):
    """See the module docstring. ``basic_only`` hides the advanced fields entirely."""

    values_changed = Signal(dict)

    def __init__(self, basic_only: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("SamplingForm")
        self._values: dict[str, Any] = presets.default_values()
        self._widgets: dict[str, FieldWidget] = {}
        self._loading = False

        preset_row = QHBoxLayout()
        preset_row.setSpacing(0)
        self.preset_group = QButtonGroup(self)
        self.preset_group.setExclusive(True)
        self.preset_buttons: dict[str, QPushButton] = {}
        for index, name in enumerate(PRESETS):
            position = "first" if index == 0 else "last" if index == len(PRESETS) - 1 else "mid"
            button = theme.segment_button(name, position, self)
            button.setToolTip(presets.PRESET_DESCRIPTIONS[name])
            self.preset_group.addButton(button)
            self.preset_buttons[name] = button
            preset_row.addWidget(button)
            button.clicked.connect(self._on_preset_clicked)
        self.preset_note = QLabel(self)
        self.preset_note.setObjectName("FieldHelp")
        self.preset_note.setWordWrap(True)

        basic = QFormLayout()
        advanced = QFormLayout()
        for form in (basic, advanced):
            form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
            form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
            form.setVerticalSpacing(8)
            form.setHorizontalSpacing(12)
        for f in FIELDS:
            if f.advanced and basic_only:
                continue
            widget = self._make_widget(f)
            self._widgets[f.name] = widget
            label = theme.form_label(f.label, widget, self)
            label.setToolTip(f.help)
            (advanced if f.advanced else basic).addRow(label, widget)

        self.advanced_toggle = QToolButton(self)
        self.advanced_toggle.setObjectName("DisclosureButton")
        self.advanced_toggle.setText("Advanced sampling")
        self.advanced_toggle.setCheckable(True)
        self.advanced_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.advanced_toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.advanced_box = QWidget(self)
        self.advanced_box.setLayout(advanced)
        self.advanced_box.hide()
        self.advanced_toggle.toggled.connect(self._on_advanced_toggled)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(10)
        layout.addLayout(preset_row)
        layout.addWidget(self.preset_note)
        layout.addLayout(basic)
        if basic_only:
            self.advanced_toggle.hide()
        else:
            layout.addWidget(self.advanced_toggle, 0, Qt.AlignmentFlag.AlignLeft)
            layout.addWidget(self.advanced_box)
        self._refresh_preset()

    # -- public ---------------------------------------------------------------------------

    def values(self) -> dict[str, Any]:
        return dict(self._values)

    def preset(self) -> str:
        return presets.preset_matching(self._values)

    def set_values(self, values: dict[str, Any]) -> None:
        self._loading = True
        self._values.update(values)
        for name, widget in self._widgets.items():
            self._show_value(widget, self._values.get(name))
        self._loading = False
        self._refresh_preset()

    def apply_preset(self, name: str) -> None:
        self.set_values(PRESETS[name])
        self.values_changed.emit(self.values())

    # -- widgets --------------------------------------------------------------------------

    def _make_widget(self, f: Field) -> FieldWidget:
        widget: FieldWidget
        if f.kind == "float":
            spin = QDoubleSpinBox(self)
            spin.setDecimals(2 if f.step >= 0.01 else 3)
            spin.setRange(f.minimum, f.maximum)
            spin.setSingleStep(f.step)
            spin.valueChanged.connect(self._on_field_changed)
            widget = spin
        elif f.kind in ("int", "optional_int"):
            ispin = QSpinBox(self)
            ispin.setRange(int(f.minimum), int(f.maximum))
            ispin.setSingleStep(int(f.step) or 1)
            if f.kind == "optional_int":
                ispin.setSpecialValueText("Unlimited" if f.name == "max_tokens" else "Random")
            ispin.valueChanged.connect(self._on_field_changed)
            widget = ispin
        elif f.kind in ("lines", "text") or f.name == "json_schema":
            edit = QPlainTextEdit(self)
            edit.setFixedHeight(64)
            edit.setPlaceholderText(f.help)
            edit.textChanged.connect(self._on_field_changed)
            widget = edit
        else:
            line = QLineEdit(self)
            line.setPlaceholderText(f.help)
            line.textChanged.connect(self._on_field_changed)
            widget = line
        widget.setObjectName(f"field_{f.name}")
        widget.setToolTip(f.help)
        if isinstance(widget, QAbstractSpinBox):
            widget.setMinimumWidth(110)
            widget.setMaximumWidth(200)
        return widget

    def _show_value(self, widget: FieldWidget, value: Any) -> None:
        if isinstance(widget, QDoubleSpinBox):
            widget.setValue(float(value or 0.0))
        elif isinstance(widget, QSpinBox):
            number = int(value) if value is not None else widget.minimum()
            widget.setValue(max(widget.minimum(), number))
        elif isinstance(widget, QPlainTextEdit):
            if isinstance(value, list):
                widget.setPlainText("\n".join(str(v) for v in value))
            elif isinstance(value, dict):
                widget.setPlainText(json.dumps(value, indent=2))
            else:
                widget.setPlainText(str(value or ""))
        else:
            widget.setText(json.dumps(value) if isinstance(value, dict) and value else "")

    def _read_value(self, f: Field, widget: FieldWidget) -> Any:
        if isinstance(widget, QDoubleSpinBox):
            return round(widget.value(), 4)
        if isinstance(widget, QSpinBox):
            return widget.value()
        text = widget.toPlainText() if isinstance(widget, QPlainTextEdit) else widget.text()
        if f.kind == "lines":
            return [line for line in text.split("\n") if line]
        if f.kind == "json":
            if not text.strip():
                return None
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                return self._values.get(f.name)  # keep the last valid value while typing
        return text

    @Slot()
    def _on_field_changed(self) -> None:
        if self._loading:
            return
        for f in FIELDS:
            widget = self._widgets.get(f.name)
            if widget is not None:
                self._values[f.name] = self._read_value(f, widget)
        self._refresh_preset()
        self.values_changed.emit(self.values())

    @Slot()
    def _on_preset_clicked(self) -> None:
        button = self.sender()
        for name, candidate in self.preset_buttons.items():
            if candidate is button:
                self.apply_preset(name)

    @Slot(bool)
    def _on_advanced_toggled(self, shown: bool) -> None:
        self.advanced_box.setVisible(shown)
        self.advanced_toggle.setArrowType(
            Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow
        )

    def _refresh_preset(self) -> None:
        current = self.preset()
        self.preset_group.setExclusive(False)
        for name, button in self.preset_buttons.items():
            button.setChecked(name == current)
        self.preset_group.setExclusive(True)
        self.preset_note.setText(presets.PRESET_DESCRIPTIONS[current])
