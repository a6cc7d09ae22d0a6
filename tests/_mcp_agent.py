"""The Agent tests/test_mcp_agent_server.py serves with ``agentkit serve-mcp _mcp_agent:agent``
(run with this directory as the working directory): a FunctionModel that calls ``add`` for
a prompt holding "add", ``slow`` for one holding "slow", and answers with what the tool
said; ``slow`` waits for its cancel token (up to 60 s) and says whether it was cancelled,
in the file named by $AGENTKIT_TEST_SLOW_LOG."""

from __future__ import annotations

import os
import re

from agentkit import Agent, FunctionModel, ToolCall, ToolContext, tool
from agentkit.messages import ToolResultPart
from agentkit.models import Turn


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def slow(ctx: ToolContext) -> str:
    """Take a long time (until cancelled)."""
    log = os.environ.get("AGENTKIT_TEST_SLOW_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write("started\n")
    cancelled = ctx.cancel.wait(60)
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write("cancelled\n" if cancelled else "finished\n")
    return "slept"


def reply(request) -> Turn:
    last = request.messages[-1]
    results = [p for p in last.content if isinstance(p, ToolResultPart)]
    if results:
        return Turn(text=f"the tool said {results[0].output.as_text()}")
    prompt = last.content[0].text
    numbers = [int(n) for n in re.findall(r"\d+", prompt)]
    if "add" in prompt:
        return Turn(tool_calls=[ToolCall(name="add", input={"a": numbers[0], "b": numbers[1]})])
    if "slow" in prompt:
        return Turn(tool_calls=[ToolCall(name="slow", input={})])
    return Turn(text=f"you said {prompt!r}")


agent = Agent(FunctionModel(reply), tools=[add, slow])
