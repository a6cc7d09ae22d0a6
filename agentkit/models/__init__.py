"""Model adapters behind the :class:`ChatModel` port, and :func:`get_model`."""

from __future__ import annotations

from .base import (
    ChatModel,
    FinishEvent,
    FinishReason,
    ModelRequest,
    ModelSettings,
    ReasoningDelta,
    ReasoningDone,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    ToolChoice,
    ToolSpec,
    UsageEvent,
)
from .registry import get_model
from .scripted import FunctionModel, ScriptedModel, ToolCall, Turn

__all__ = [
    "ChatModel",
    "FinishEvent",
    "FinishReason",
    "FunctionModel",
    "ModelRequest",
    "ModelSettings",
    "ReasoningDelta",
    "ReasoningDone",
    "ScriptedModel",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallEvent",
    "ToolChoice",
    "ToolSpec",
    "Turn",
    "UsageEvent",
    "get_model",
]
