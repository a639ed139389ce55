"""The words of tool use, in a module light enough for the app's start-up to import."""

from __future__ import annotations

from typing import Literal

ToolChoice = Literal["auto", "required", "none"]  # how tools are offered to the model
Decision = Literal["once", "always", "deny"]  # a person's answer to a call

TOOL_CHOICES: tuple[ToolChoice, ...] = ("auto", "required", "none")
DECISIONS: tuple[Decision, ...] = ("once", "always", "deny")
