"""Agent events: what a running generation does, as it does it, and their JSON form.

A generation emits them through one event path (:data:`Emit`): the ``on_token`` /
``on_tool_call_*`` callbacks (``_sinks.py``) and :class:`~agentkit.AgentStream`
(``_stream.py``) consume the same events.

Event types, in the order a generation produces them::

    generation-start
      [approval-decided, tool-*]      open calls a stopped generation left, settled
      [compacted]                     auto-compaction, before a model call
      step-start                      one per model call
        [retry]                       a failed attempt of the call, tried again
        [compacted]                   the context overflowed: compacted, step-start again
        message-start                 the assistant message begins
          text-delta / reasoning-delta  as the model writes
          tool-call                   the model asked for a call (complete input)
        message-end                   the message is committed
        usage                         the call's tokens, and the generation's so far
        [approval-requested, approval-decided]   calls the approval policy asks about
      tool-start, tool-update, tool-end   per call, results in model order
      step-end
      [handoff]                       a handoff: another agent answers from the next step on
    [budget-exceeded]                 a limit stopped the generation
    [compacted]                       retention, after the last step
    guardrail-tripped                 a guardrail tripped (agentkit.guardrails)
    generation-end                    .result or .error
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..approvals._policy import ApprovalRequest
from ..messages import Message, ToolCallPart, _output_to_dict, content_to_dict
from ..results import RunResult, Step, ToolCallRecord
from ..usage import Usage

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
    "MessageStartEvent",
    "MessageEndEvent",
    "StepUsageEvent",
    "ApprovalRequestedEvent",
    "ApprovalDecidedEvent",
    "BudgetExceededEvent",
    "CompactedEvent",
    "RetryEvent",
    "GuardrailTrippedEvent",
    "HandoffEvent",
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


# -- the assistant message, usage, and what the log records beside the conversation -----
# (message-start/-end, usage, approval-requested/-decided, budget-exceeded, compacted,
# retry: see docs/streaming.md; the loop's commits are announced by ``_control.py``)


@dataclass(frozen=True, kw_only=True)
class MessageStartEvent(AgentEvent):
    """The model began its assistant message of step ``index`` (before its first text,
    reasoning or tool call; also for a message that holds only tool calls)."""

    type: ClassVar[str] = "message-start"
    index: int

    def _payload(self) -> dict[str, Any]:
        return {"index": self.index}


@dataclass(frozen=True, kw_only=True)
class MessageEndEvent(AgentEvent):
    """The assistant message of step ``index`` is complete and committed (as recorded:
    its tool calls redacted), before any of its tool calls runs."""

    type: ClassVar[str] = "message-end"
    index: int
    message: Message
    finish_reason: str = "stop"

    def _payload(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "message": self.message.to_dict(),
            "text": self.message.text,
            "tool_calls": [_call_dict(c) for c in self.message.tool_calls],
            "finish_reason": self.finish_reason,
        }


@dataclass(frozen=True, kw_only=True)
class StepUsageEvent(AgentEvent):
    """The tokens model call ``index`` used, and the generation's ``total`` so far
    (with what its tools reported, e.g. subagents)."""

    type: ClassVar[str] = "usage"
    index: int
    usage: Usage
    total: Usage

    def _payload(self) -> dict[str, Any]:
        return {"index": self.index, "usage": self.usage.to_dict(), "total": self.total.to_dict()}


@dataclass(frozen=True, kw_only=True)
class ApprovalRequestedEvent(AgentEvent):
    """The approval policy asks about a tool call: the in-process ``approver`` answers it
    now (``approver`` True), or it waits for ``Session.approve``/``deny`` (the
    generation ends ``approval-required``). Never shown to the model."""

    type: ClassVar[str] = "approval-requested"
    request: ApprovalRequest
    approver: bool = False

    def _payload(self) -> dict[str, Any]:
        r = self.request
        return {"request_id": r.id, "tool_call_id": r.tool_call_id, "tool_name": r.tool_name,
                "input": _json_safe(r.input), "reason": r.reason, "requested_at": r.requested_at,
                "generation_id": r.generation_id, "approver": self.approver}


@dataclass(frozen=True, kw_only=True)
class ApprovalDecidedEvent(AgentEvent):
    """A request was decided: by the in-process approver (``source`` ``approver``, or
    ``timeout``), or by a host (``host``: ``Session.approve``/``deny``, announced by the
    generation that goes on with the call). Never shown to the model."""

    type: ClassVar[str] = "approval-decided"
    request_id: str
    tool_call_id: str
    tool_name: str
    approved: bool
    reason: str | None = None
    remember: bool = False
    note: str | None = None
    source: str = "approver"

    def _payload(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "tool_call_id": self.tool_call_id, "tool_name": self.tool_name,
                "approved": self.approved, "reason": self.reason, "remember": self.remember,
                "note": self.note, "source": self.source}


@dataclass(frozen=True, kw_only=True)
class BudgetExceededEvent(AgentEvent):
    """A :class:`~agentkit.Limits` limit was reached: no further model call is made
    (the generation ends ``budget-exceeded``; a planning run goes to its synthesizer)."""

    type: ClassVar[str] = "budget-exceeded"
    limit: str
    maximum: int
    used: int

    def _payload(self) -> dict[str, Any]:
        return {"limit": self.limit, "maximum": self.maximum, "used": self.used}


@dataclass(frozen=True, kw_only=True)
class CompactedEvent(AgentEvent):
    """The head of the log was summarised (``reason``: ``auto``, ``context-overflow`` or
    ``retention``): the model now sees ``summary`` instead of the ``covered`` events up
    to ``covered_through``."""

    type: ClassVar[str] = "compacted"
    reason: str
    covered: int
    covered_through: str
    summary: tuple[Message, ...] = ()
    compaction_id: str = ""
    """The id of the ``compaction`` event in the log."""

    def _payload(self) -> dict[str, Any]:
        return {"reason": self.reason, "covered": self.covered, "covered_through": self.covered_through,
                "summary": [m.to_dict() for m in self.summary], "compaction_id": self.compaction_id}


@dataclass(frozen=True, kw_only=True)
class RetryEvent(AgentEvent):
    """A model call's attempt ``attempt`` failed with a transient ``error`` (429, 5xx,
    a dropped connection...); the next attempt follows in ``delay`` seconds."""

    type: ClassVar[str] = "retry"
    attempt: int
    delay: float
    error: BaseException = field(compare=False)
    retry_after: float | None = None
    """What the server asked for (``Retry-After``), if it said."""

    def _payload(self) -> dict[str, Any]:
        error: dict[str, Any] = {"type": type(self.error).__name__, "message": str(self.error)}
        for name in ("provider", "status_code"):
            value = getattr(self.error, name, None)
            if value is not None:
                error[name] = value
        return {"attempt": self.attempt, "delay": self.delay, "retry_after": self.retry_after, "error": error}
@dataclass(frozen=True, kw_only=True)
class GuardrailTrippedEvent(AgentEvent):
    """A guardrail tripped (:mod:`agentkit.guardrails`): ``guardrail`` names it, ``kind``
    is ``input``, ``output``, ``tool-input`` or ``tool-output`` and ``output`` is what its
    function returned. An input or output trip (and a tool trip with ``action="raise"``)
    ends the generation; a blocking tool trip answers the call with an error result."""

    type: ClassVar[str] = "guardrail-tripped"
    guardrail: str
    kind: str
    output: Any = None

    def _payload(self) -> dict[str, Any]:
        return {"guardrail": self.guardrail, "kind": self.kind, "output": _output_json(self.output)}


@dataclass(frozen=True, kw_only=True)
class HandoffEvent(AgentEvent):
    """The conversation was handed over (a handoff tool call's result is committed): the
    ``target`` agent answers from the next step on."""

    type: ClassVar[str] = "handoff"
    tool_call_id: str
    """The handoff call's id."""
    tool_name: str
    """The handoff tool's name (``transfer_to_<name>``)."""
    source: str | None
    """The name of the agent that handed over (None for a session's agent without a name)."""
    target: str
    """The name of the agent that answers now (its name, else the handoff tool's name)."""

    def _payload(self) -> dict[str, Any]:
        return {"tool_call_id": self.tool_call_id, "tool_name": self.tool_name, "source": self.source,
                "target": self.target}
