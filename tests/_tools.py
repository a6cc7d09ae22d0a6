"""Small tools and model replies the tests share: the ``add`` tool a scripted model calls,
its spec, and a reply that calls a tool with the prompt and reports what it said."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentkit import ToolCall, tool
from agentkit.models import ToolSpec


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


ADD_SPEC = ToolSpec(
    name="add",
    description="Add two integers.",
    input_schema={"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
)
"""A model adapter's view of an ``add`` tool, written out as the wire tests expect it."""


def outputs(message: Any) -> str:
    """What the tool results of a tool message say, joined by `` | ``."""
    return " | ".join(p.output.as_text() for p in message.content)


def calls_then_answers(tool_name: str, prefix: str = "the tool said: ") -> Callable[[Any], Any]:
    """A FunctionModel reply: a user message becomes a call of ``tool_name`` with
    ``{"text": <its text>}``; after the call, the answer is ``prefix`` + its output."""

    def reply(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "user":
            return ToolCall(tool_name, {"text": last.text})
        return prefix + outputs(last)

    return reply
