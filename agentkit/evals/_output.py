"""What an evaluated run gave, and the same read from a stored session: ``AgentOutput``
(private module; import it from :mod:`agentkit.evals`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..events import AssistantMessageEvent, Event, ToolResultEvent, UserMessageEvent
from ..messages import ToolOutput, text_of
from ..results import RunResult, Step, ToolCallRecord
from ..usage import Usage

__all__ = ["AgentOutput", "first_turn"]

_NO_RESULT = "no result was recorded for this call"


@dataclass(frozen=True, kw_only=True)
class AgentOutput:
    """One agent run as the evaluators see it: the task's output (:func:`agent_task`), and
    a case's ``expected_output`` when the case comes from a stored session
    (:func:`dataset_from_sessions`: the session's first turn as recorded).

    Plain data that pydantic validates and serialises, so a dataset holding it saves to and
    loads from YAML or JSON (``Dataset[str, AgentOutput, dict].from_file(...)``)."""

    text: str = ""
    """The final answer's text."""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    """Every tool call of the run, in the order the model made them, with their results."""
    usage: Usage = field(default_factory=Usage)
    """Tokens summed over the run's model calls."""
    steps: tuple[Step, ...] = ()
    """One entry per model call."""
    output: Any = None
    """The structured output (a run with ``output_type=``), else None."""
    finish_reason: str = "stop"
    """Why the run ended (:attr:`agentkit.RunResult.finish_reason`)."""

    @classmethod
    def from_result(cls, result: RunResult[Any]) -> AgentOutput:
        """The output of a finished run."""
        return cls(text=result.text, tool_calls=result.tool_calls, usage=result.usage, steps=result.steps,
                   output=result.output, finish_reason=result.finish_reason)


def first_turn(events: Sequence[Event]) -> tuple[str, AgentOutput] | None:
    """A session's first prompt (its first user message's text) and what its first turn
    recorded (up to the next user message): the final answer, the tool calls with their
    results, usage and steps. None when the session has no user message."""
    start = next((i for i, e in enumerate(events) if isinstance(e, UserMessageEvent)), None)
    if start is None:
        return None
    prompt = events[start]
    assert isinstance(prompt, UserMessageEvent)
    turn: list[Event] = []
    for event in events[start + 1:]:
        if isinstance(event, UserMessageEvent):
            break
        turn.append(event)
    results = {e.tool_call_id: e.output for e in turn if isinstance(e, ToolResultEvent)}
    answers = [e for e in turn if isinstance(e, AssistantMessageEvent)]
    steps = tuple(_step(i, e, results) for i, e in enumerate(answers))
    usage = sum((s.usage for s in steps), Usage())
    last = answers[-1] if answers else None
    return text_of(prompt.content), AgentOutput(
        text=text_of(last.content) if last else "",
        tool_calls=tuple(call for s in steps for call in s.tool_calls),
        usage=usage,
        steps=steps,
        finish_reason=(last.finish_reason or "stop") if last else "other",
    )


def _step(index: int, event: AssistantMessageEvent, results: dict[str, ToolOutput]) -> Step:
    calls = tuple(
        ToolCallRecord(tool_call_id=c.tool_call_id, tool_name=c.tool_name, input=c.input,
                       output=results.get(c.tool_call_id, ToolOutput.error(_NO_RESULT)))
        for c in event.tool_calls
    )
    return Step(index=index, text=text_of(event.content), tool_calls=calls, usage=event.usage or Usage(),
                finish_reason=event.finish_reason or "stop")
