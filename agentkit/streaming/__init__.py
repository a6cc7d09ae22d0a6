"""Agent events and streams: the events a generation emits (``on_event=`` callbacks and
``run_agent_stream`` / ``Session.stream`` consume the same ones).

:class:`~agentkit.AgentEvent` and :class:`~agentkit.AgentStream` are imported from
``agentkit``; this package lists the event kinds.
"""

from __future__ import annotations

from ._events import (
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    BudgetExceededEvent,
    CompactedEvent,
    GenerationEndEvent,
    GenerationStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    ReasoningDeltaEvent,
    RetryEvent,
    StepEndEvent,
    StepStartEvent,
    StepUsageEvent,
    TextDeltaEvent,
    ToolCallRequestedEvent,
    ToolEndEvent,
    ToolStartEvent,
    ToolUpdateEvent,
)

__all__ = [
    "GenerationEndEvent",
    "GenerationStartEvent",
    "ReasoningDeltaEvent",
    "StepEndEvent",
    "StepStartEvent",
    "TextDeltaEvent",
    "ToolCallRequestedEvent",
    "ToolEndEvent",
    "ToolStartEvent",
    "ToolUpdateEvent",
    "MessageStartEvent",
    "MessageEndEvent",
    "StepUsageEvent",
    "ApprovalRequestedEvent",
    "ApprovalDecidedEvent",
    "BudgetExceededEvent",
    "CompactedEvent",
    "RetryEvent",
]
