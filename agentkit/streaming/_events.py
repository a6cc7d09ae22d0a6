"""Agent events: what a running generation does, as it does it, and their JSON form.

A generation emits them through one event path (:data:`Emit`): the ``on_token`` /
``on_tool_call_*`` callbacks (``_sinks.py``) and :class:`~agentkit.AgentStream`
(``_stream.py``) consume the same events.

Event types, in the order a generation produces them::

    generation-start
      step-start                      one per model call
        text-delta / reasoning-delta  as the model writes
        tool-call                     the model asked for a call (complete input)
      tool-start, tool-update, tool-end   per call, results in model order
      step-end
    generation-end                    .result or .error
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..messages import Message, ToolCallPart, _output_to_dict, content_to_dict
from ..results import RunResult, Step, ToolCallRecord

__all__ = [
    "AgentEvent",
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
]


def _json_safe(value: Any) -> Any:
    """``value`` if JSON can carry it, else its ``repr`` (progress updates are free-form)."""
    import json

    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _output_json(value: Any) -> Any:
    """A structured output as JSON (pydantic serialises models, dataclasses...)."""
    from pydantic_core import PydanticSerializationError, to_jsonable_python

    try:
        return to_jsonable_python(value)
    except PydanticSerializationError:
        return _json_safe(value)


def _call_dict(call: ToolCallPart) -> dict[str, Any]:
    return {"tool_call_id": call.tool_call_id, "tool_name": call.tool_name, "input": _json_safe(call.input)}


def _record_dict(record: ToolCallRecord) -> dict[str, Any]:
    return {
        "tool_call_id": record.tool_call_id,
        "tool_name": record.tool_name,
        "input": _json_safe(record.input),
        "output": _output_to_dict(record.output),
        "is_error": record.is_error,
        "reused": record.reused,
        **({} if record.cache is None else {"cache": record.cache}),
    }


def _messages_json(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """A transcript as JSON: role and content of each message."""
    return [{"role": m.role, "content": content_to_dict(m.content)} for m in messages]


def _step_dict(step: Step) -> dict[str, Any]:
    return {
        "index": step.index,
        "text": step.text,
        "finish_reason": step.finish_reason,
        "usage": step.usage.to_dict(),
        "tool_calls": [_record_dict(r) for r in step.tool_calls],
    }


@dataclass(frozen=True, kw_only=True)
class AgentEvent:
    """Base class of the events an :class:`AgentStream` yields; ``type`` names the kind."""

    type: ClassVar[str] = "agent-event"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``{"type": ..., ...}``), e.g. for Server-Sent Events."""
        return {"type": self.type, **self._payload()}

    def _payload(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True, kw_only=True)
class GenerationStartEvent(AgentEvent):
    """The generation holds the gate and is about to make its first model call."""

    type: ClassVar[str] = "generation-start"
    session_id: str | None = None

    def _payload(self) -> dict[str, Any]:
        return {"session_id": self.session_id}


@dataclass(frozen=True, kw_only=True)
class StepStartEvent(AgentEvent):
    """A model call (step ``index``) begins."""

    type: ClassVar[str] = "step-start"
    index: int

    def _payload(self) -> dict[str, Any]:
        return {"index": self.index}


@dataclass(frozen=True, kw_only=True)
class TextDeltaEvent(AgentEvent):
    """A piece of assistant text."""

    type: ClassVar[str] = "text-delta"
    text: str

    def _payload(self) -> dict[str, Any]:
        return {"text": self.text}


@dataclass(frozen=True, kw_only=True)
class ReasoningDeltaEvent(AgentEvent):
    """A piece of the model's reasoning (thinking) text."""

    type: ClassVar[str] = "reasoning-delta"
    text: str

    def _payload(self) -> dict[str, Any]:
        return {"text": self.text}


@dataclass(frozen=True, kw_only=True)
class ToolCallRequestedEvent(AgentEvent):
    """The model asked for a tool call (its input is complete)."""

    type: ClassVar[str] = "tool-call"
    call: ToolCallPart

    def _payload(self) -> dict[str, Any]:
        return _call_dict(self.call)


@dataclass(frozen=True, kw_only=True)
class ToolStartEvent(AgentEvent):
    """A tool call is about to run (or to be answered: reused, unknown, blocked)."""

    type: ClassVar[str] = "tool-start"
    call: ToolCallPart

    def _payload(self) -> dict[str, Any]:
        return _call_dict(self.call)


@dataclass(frozen=True, kw_only=True)
class ToolUpdateEvent(AgentEvent):
    """A running tool reported progress (``ToolContext.report_progress``)."""

    type: ClassVar[str] = "tool-update"
    tool_call_id: str
    update: Any = None

    def _payload(self) -> dict[str, Any]:
        return {"tool_call_id": self.tool_call_id, "update": _json_safe(self.update)}


@dataclass(frozen=True, kw_only=True)
class ToolEndEvent(AgentEvent):
    """A tool call's result was committed."""

    type: ClassVar[str] = "tool-end"
    record: ToolCallRecord

    def _payload(self) -> dict[str, Any]:
        return _record_dict(self.record)


@dataclass(frozen=True, kw_only=True)
class StepEndEvent(AgentEvent):
    """A step (one model call and its tool calls) is complete."""

    type: ClassVar[str] = "step-end"
    step: Step

    def _payload(self) -> dict[str, Any]:
        return _step_dict(self.step)


@dataclass(frozen=True, kw_only=True)
class GenerationEndEvent(AgentEvent):
    """The generation ended: with ``result``, or with ``error``."""

    type: ClassVar[str] = "generation-end"
    result: RunResult | None = None
    error: BaseException | None = field(default=None, compare=False)

    def _payload(self) -> dict[str, Any]:
        if self.error is not None:
            return {"error": {"type": type(self.error).__name__, "message": str(self.error)}}
        assert self.result is not None
        r = self.result
        return {
            "result": {
                "text": r.text,
                "finish_reason": r.finish_reason,
                "usage": r.usage.to_dict(),
                "steps": len(r.steps),
                "tool_calls": [_record_dict(t) for t in r.tool_calls],
                "messages": _messages_json(r.messages),
                **({} if r.output is None else {"output": _output_json(r.output)}),
            }
        }


Emit = Callable[[AgentEvent], None]
"""Where the loop sends agent events."""
