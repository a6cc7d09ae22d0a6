"""Model adapters behind the :class:`ChatModel` port, and :func:`get_model`.

The provider adapters ``OpenAIChatModel`` and ``AnthropicModel`` are importable from
here but load lazily (they import their SDKs), so they are not in ``__all__``.
"""

from __future__ import annotations

from ._retry import RetryInfo, RetryPolicy
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
    "RetryInfo",
    "RetryPolicy",
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


_LAZY = {
    "OpenAIChatModel": ("agentkit.models.openai", "openai"),
    "AnthropicModel": ("agentkit.models.anthropic", "anthropic"),
}


def __getattr__(name: str) -> object:
    # the provider adapters import their SDKs, so they load only when first used
    if name in _LAZY:
        import importlib

        from ..errors import MissingDependencyError

        module_name, package = _LAZY[name]
        try:
            importlib.import_module(package)
        except ImportError:
            raise MissingDependencyError(package, package, name) from None
        return getattr(importlib.import_module(module_name), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
