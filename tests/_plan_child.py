"""Scripted stage models for the planning tests, and a child process that is SIGKILLed
in the middle of a planning run.

    python tests/_plan_child.py <store-root> <session-id> <marker-file>
        runs a three-step plan in a durable session; the tool of step 2 appends to the
        marker file, prints "step-2-running" and sleeps until killed.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import _child  # noqa: F401 - puts the checkout first on sys.path

from agentkit import FunctionModel, ToolCall, tool

GOAL = "Collect alpha, beta and gamma, then report."
STEP_RE = re.compile(r"Carry out step (\d+) of (\d+) now: (.*)", re.S)


def answer(value: dict) -> ToolCall:
    """The structured-output call a scripted stage model ends with (tool mode)."""
    return ToolCall(name="final_answer", input=value)


def planner(steps: list[str], thought: str = "one thing at a time") -> FunctionModel:
    return FunctionModel(lambda r: answer({"thought": thought,
                                           "steps": [{"description": s, "tools": ["work"]} for s in steps]}))


def current_step(request) -> str:
    match = STEP_RE.search(request.messages[0].content[0].text)
    assert match, request.messages[0].content[0].text
    return match.group(3)


def executor() -> FunctionModel:
    """Calls ``work(step=<the step's description>)``, then reports the tool's result:
    success unless the tool failed."""

    def run(request):
        last = request.messages[-1]
        if last.role == "user":
            return ToolCall(name="work", input={"step": current_step(request)})
        result = last.content[0].output
        return answer({"success": not result.is_error, "result": result.as_text()})

    return FunctionModel(run)


def synthesizer() -> FunctionModel:
    def run(request):
        prompt = request.messages[0].content[0].text
        done = re.findall(r"\[done\] (.*)", prompt)
        return "Report: " + "; ".join(done)

    return FunctionModel(run)


def work_tool(marker: Path, *, block_on: str | None = None, fail_on: tuple[str, ...] = ()):
    @tool
    def work(step: str) -> str:
        """Do one piece of work."""
        with marker.open("a") as f:
            f.write(step + "\n")
        if step == block_on:
            sys.stdout.write("step-2-running\n")
            sys.stdout.flush()
            time.sleep(600)
        if step in fail_on:
            raise RuntimeError(f"{step} is unavailable")
        return f"result of {step}"

    return work


def main() -> None:
    from agentkit import FileEventStore, PlanningAgent, Session

    root, sid, marker = sys.argv[1:4]
    steps = ["collect alpha", "collect beta", "collect gamma"]
    agent = PlanningAgent(
        executor(),
        tools=[work_tool(Path(marker), block_on="collect beta")],
        planner=planner(steps),
        synthesizer=synthesizer(),
    )
    with Session.open(sid, store=FileEventStore(root)) as session:
        agent.run(GOAL, session=session)


if __name__ == "__main__":
    main()
