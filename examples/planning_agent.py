"""A planning agent: plan -> execute each step with tools -> replan on failure -> answer.

Runs on a real provider when one is configured, otherwise on scripted stage models:
  AGENTKIT_MODEL=openai:gpt-4.1-mini        (any get_model spec), or
  OPENAI_API_KEY / ANTHROPIC_API_KEY in the environment.
The run is recorded in a durable session (in <tmp>/agentkit-planning-demo); interrupt it
(Ctrl-C) and run it again with --resume <session-id> to continue from the saved plan.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import uuid

from _pick_model import pick_model

from agentkit import FileEventStore, FunctionModel, PlanningAgent, Session, ToolCall, tool

POPULATION = {"Lisbon": 545_000, "Porto": 232_000, "Braga": 193_000}


@tool
def population(city: str) -> int:
    """The population of a Portuguese city.

    Args:
        city: The city's name, e.g. "Lisbon".
    """
    if city not in POPULATION:
        raise LookupError(f"no figures for {city!r}; known cities: {', '.join(POPULATION)}")
    return POPULATION[city]


GOAL = "Which is larger, Lisbon or Oporto, and by how many people?"


# -- the scripted stage models (used when no provider is configured) ---------------------

def _final(value: dict) -> ToolCall:
    """A stage's structured answer: scripted models give it through the output tool."""
    return ToolCall(name="final_answer", input=value)


def _planner(request):
    return _final({"thought": "Look both cities up, then compare.",
                   "steps": [{"description": "Find the population of Lisbon", "tools": ["population"]},
                             {"description": "Find the population of Oporto", "tools": ["population"]},
                             {"description": "Compare the two figures"}]})


def _executor(request):
    step = re.search(r"now: (.*)", request.messages[0].content[0].text).group(1)
    last = request.messages[-1]
    city = step.rsplit(" ", 1)[-1]
    if last.role == "user" and city in ("Lisbon", "Oporto", "Porto"):
        return ToolCall(name="population", input={"city": city})
    if last.role == "tool":
        out = last.content[0].output
        return _final({"success": not out.is_error, "result": out.as_text()})
    figures = re.findall(r"result: (\d+)", request.messages[0].content[0].text)
    a, b = map(int, figures[:2])
    return _final({"success": True, "result": f"Lisbon is larger by {a - b:,} people ({a:,} vs {b:,})."})


def _replanner(request):
    return _final({"decision": "revise", "reason": "Oporto is listed as Porto",
                   "steps": [{"description": "Find the population of Porto", "tools": ["population"]},
                             {"description": "Compare the two figures"}]})


def _synthesizer(request):
    return re.findall(r"\[done\] Compare the two figures\n   result: (.*)", request.messages[0].content[0].text)[-1]


def build_agent() -> tuple[PlanningAgent, str]:
    model, label = pick_model(FunctionModel(_executor))
    if isinstance(model, FunctionModel):
        return PlanningAgent(model, tools=[population], planner=FunctionModel(_planner),
                             replanner=FunctionModel(_replanner), synthesizer=FunctionModel(_synthesizer)), label
    return PlanningAgent(model, tools=[population]), label


def main(argv: list[str]) -> int:
    agent, label = build_agent()
    print(f"model: {label}")
    resume = argv[argv.index("--resume") + 1] if "--resume" in argv else None
    root = os.path.join(tempfile.gettempdir(), "agentkit-planning-demo")
    store = FileEventStore(root)
    with Session.open(resume or f"demo-{uuid.uuid4().hex[:12]}", store=store) as session:
        result = agent.run(GOAL, session=session)
        print(f"session: {session.session_id} in {root}{' (resumed)' if result.resumed else ''}")
    print(f"plan: {result.plan.thought}")
    for step in result.steps:
        mark = "ok" if step.ok else "FAILED"
        print(f"  {step.index + 1}. [{mark}] {step.description}: {step.error or step.result}")
    print(f"revisions: {result.revisions}, tokens: {result.usage.total_tokens}")
    print(f"answer: {result.text}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
