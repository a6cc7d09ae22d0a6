"""One model call: the model's stream, read through the one reader
(:class:`~agentkit._threads.ModelStream`: it closes the stream and checks cancel), into
the assistant message's content, its usage and finish reason; text, reasoning and
tool-call events are emitted as they come."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .._json import json_problem
from .._threads import ModelStream
from ..errors import CancelledError
from ..messages import ContentPart, ReasoningPart, TextPart, ToolCallPart
from ..models.base import (
    ChatModel,
    FinishEvent,
    ModelRequest,
    ReasoningDelta,
    ReasoningDone,
    TextDelta,
    ToolCallEvent,
    UsageEvent,
)
from ..streaming._events import Emit, MessageStartEvent, ReasoningDeltaEvent, TextDeltaEvent, ToolCallRequestedEvent
from ..usage import Usage

__all__ = ["Inference", "infer"]


@dataclass
class Inference:
    """What one model call answered."""

    content: tuple[ContentPart, ...]
    usage: Usage
    finish_reason: str


def infer(model: ChatModel, request: ModelRequest, emit: Emit | None,
          record: Callable[[ToolCallPart], ToolCallPart], index: int = 0) -> Inference:
    """Call ``model`` with ``request`` and read its stream to the end; a tool call is
    emitted as ``record`` makes it (redacted, as it is committed). A tool call whose
    arguments are not plain JSON keeps no input and carries an ``input_error`` (it gets
    an error result). ``message-start`` (step ``index``) comes before the message's first
    delta or call (at the end for an empty one); the loop emits ``message-end``."""
    parts: list[ContentPart] = []
    text: list[str] = []
    reasoning: list[str] = []
    usage = Usage()
    finish = "stop"
    cancel = request.cancel
    started = False  # message-start: once, before the first delta or call

    def flush_text() -> None:
        if text:
            parts.append(TextPart(text="".join(text)))
            text.clear()

    def flush_reasoning() -> None:
        if reasoning:
            parts.append(ReasoningPart(text="".join(reasoning)))
            reasoning.clear()

    with ModelStream(model, request) as stream:
        for ev in stream:
            if isinstance(ev, TextDelta):
                if reasoning:
                    flush_reasoning()
                text.append(ev.text)
                if emit is not None:
                    started = started or _start(emit, index)
                    emit(TextDeltaEvent(text=ev.text))
            elif isinstance(ev, ToolCallEvent):
                flush_reasoning()
                flush_text()
                call_input, error = ev.input, ev.input_error
                problem = json_problem(call_input) if error is None else None
                if problem is not None:  # it could not be recorded: answer with an error result
                    call_input, error = {}, f"the arguments are not plain JSON: {problem}"
                call = ToolCallPart(
                    tool_call_id=ev.tool_call_id,
                    tool_name=ev.tool_name,
                    input=call_input,
                    input_error=error,
                )
                parts.append(call)
                if emit is not None:
                    started = started or _start(emit, index)
                    emit(ToolCallRequestedEvent(call=record(call)))
            elif isinstance(ev, UsageEvent):
                usage = usage + ev.usage
            elif isinstance(ev, FinishEvent):
                finish = ev.reason
            elif isinstance(ev, ReasoningDelta):
                flush_text()
                reasoning.append(ev.text)
                if emit is not None:
                    started = started or _start(emit, index)
                    emit(ReasoningDeltaEvent(text=ev.text))
            elif isinstance(ev, ReasoningDone):
                flush_text()
                part = ev.part
                if not part.text and reasoning:
                    part = ReasoningPart(
                        text="".join(reasoning), signature=part.signature, redacted_data=part.redacted_data
                    )
                reasoning.clear()
                parts.append(part)
    if cancel.cancelled:
        raise CancelledError(cancel.reason)
    if emit is not None and not started:
        _start(emit, index)  # the model said nothing at all
    flush_reasoning()
    flush_text()
    return Inference(content=tuple(parts), usage=usage, finish_reason=finish)


def _start(emit: Emit, index: int) -> bool:
    """Emit ``message-start`` for step ``index``; True (it started)."""
    emit(MessageStartEvent(index=index))
    return True
