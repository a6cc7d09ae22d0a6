"""Model adapters behind the :class:`ChatModel` port, and :func:`get_model`.

The provider adapters ``OpenAIChatModel``, ``AnthropicModel`` and ``BedrockModel`` are importable from
here but load lazily (they import their SDKs), so they are not in ``__all__``; the
provider table in :mod:`agentkit.models.registry` says where each lives. ``EchoModel``
(spec ``"echo"``) is the offline demo model the ``agentkit chat`` docs use. A new adapter
builds on :mod:`agentkit.models.adapter`. :func:`~agentkit.get_model` and the test models
(``ScriptedModel``, ``FunctionModel``, ``ToolCall``) are imported from ``agentkit``.
"""

from __future__ import annotations

from ._retry import RetryInfo, RetryPolicy
from .base import (
    ChatModel,
    FinishEvent,
    FinishReason,
    ModelRequest,
    ModelSettings,
    OutputMode,
    OutputSpec,
    ReasoningDelta,
    ReasoningDone,
    ReasoningEffort,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    ToolChoice,
    ToolSpec,
    UsageEvent,
)
from .echo import EchoModel
from .scripted import Turn

__all__ = [
    "ChatModel",
    "EchoModel",
    "FinishEvent",
    "FinishReason",
    "ModelRequest",
    "ModelSettings",
    "OutputMode",
    "OutputSpec",
    "ReasoningDelta",
    "ReasoningDone",
    "ReasoningEffort",
    "RetryInfo",
    "RetryPolicy",
    "StreamEvent",
    "TextDelta",
    "ToolCallEvent",
    "ToolChoice",
    "ToolSpec",
    "Turn",
    "UsageEvent",
]


def __getattr__(name: str) -> object:
    # the provider adapters import their SDKs, so they load only when first used
    from .registry import _ADAPTERS, _adapter_class

    if name in _ADAPTERS:
        return _adapter_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
