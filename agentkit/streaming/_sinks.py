"""The classic callbacks (``on_token``, ``on_tool_call_*``...) as consumers of the one
agent-event path, and several consumers as one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..messages import ToolCallPart
from ..results import ToolCallRecord
from ._events import (
    AgentEvent,
    Emit,
    ReasoningDeltaEvent,
    TextDeltaEvent,
    ToolEndEvent,
    ToolStartEvent,
    ToolUpdateEvent,
)

__all__ = ["callback_sink", "fan_out"]


def callback_sink(
    *,
    on_token: Callable[[str], Any] | None = None,
    on_reasoning: Callable[[str], Any] | None = None,
    on_tool_call_start: Callable[[ToolCallPart], Any] | None = None,
    on_tool_call_update: Callable[[str, Any], Any] | None = None,
    on_tool_call_finish: Callable[[ToolCallRecord], Any] | None = None,
) -> Emit | None:
    """The classic callbacks as a consumer of the one event path (None when all are None)."""
    table: dict[type[AgentEvent], Callable[[Any], Any]] = {}
    if on_token is not None:
        table[TextDeltaEvent] = lambda e: on_token(e.text)
    if on_reasoning is not None:
        table[ReasoningDeltaEvent] = lambda e: on_reasoning(e.text)
    if on_tool_call_start is not None:
        table[ToolStartEvent] = lambda e: on_tool_call_start(e.call)
    if on_tool_call_update is not None:
        table[ToolUpdateEvent] = lambda e: on_tool_call_update(e.tool_call_id, e.update)
    if on_tool_call_finish is not None:
        table[ToolEndEvent] = lambda e: on_tool_call_finish(e.record)
    if not table:
        return None

    def sink(event: AgentEvent) -> None:
        handler = table.get(type(event))
        if handler is not None:
            handler(event)

    return sink


def fan_out(*sinks: Emit | None) -> Emit | None:
    """One emit function calling each sink in order (None when there is none)."""
    live = [s for s in sinks if s is not None]
    if not live:
        return None
    if len(live) == 1:
        return live[0]

    def emit(event: AgentEvent) -> None:
        for sink in live:
            sink(event)

    return emit
