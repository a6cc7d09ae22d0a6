"""User code as a type checker sees it: every front door's result type (``assert_type``)
and the calls that must be type errors (``# type: ignore[code]``: with
``warn_unused_ignores`` an error that stops happening fails the check).

Checked by ``mypy --strict`` (tox's typecheck env, the mypy config's ``files``, and
tests/test_typing.py) and by pyright when it is installed; never run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from typing_extensions import assert_type

from agentkit import (
    Agent,
    AgentStream,
    GenerateResult,
    PlanningAgent,
    PlanResult,
    RunResult,
    ScriptedModel,
    Session,
    ToolContext,
    run_agent,
    run_agent_stream,
    tool,
)
from agentkit.events import Event


class City(BaseModel):
    name: str
    country: str


@dataclass
class Db:
    cities: dict[str, str]

    def get(self, name: str) -> str:
        return self.cities[name]


@dataclass
class Deps:
    db: Db
    user: str


@tool
def country_of(name: str, ctx: ToolContext[Deps]) -> str:
    """The country a city is in."""
    assert_type(ctx.deps, Deps)
    return ctx.deps.db.get(name)


@tool
def untyped_context(ctx: ToolContext) -> str:
    """A bare ToolContext: its deps are Any."""
    return str(ctx.deps)


@tool
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


@tool(read_only=True)
def shout(text: str) -> str:
    """Shout."""
    return text.upper()


# -- a tool is called as its function (users unit-test tools this way) -------------------
assert_type(add(1) + add(1, 2) + add(a=1, b=2), int)
assert_type(shout("a"), str)
add("one")  # type: ignore[arg-type]
lost: str = add(1)  # type: ignore[assignment]

model = ScriptedModel(["Paris"])
deps = Deps(db=Db({"Paris": "France"}), user="ada")

# -- run_agent / run_agent_stream --------------------------------------------------------
assert_type(run_agent(model, "hi"), RunResult[None])
assert_type(run_agent(model, "hi").output, None)
assert_type(run_agent(model, "hi").text, str)
assert_type(run_agent(model, "hi", output_type=City), RunResult[City])
assert_type(run_agent(model, "hi", output_type=City).output, City)
assert_type(run_agent(model, "hi", output_type=int, max_steps=3, system="be brief"), RunResult[int])
assert_type(run_agent_stream(model, "hi"), AgentStream[None])
assert_type(run_agent_stream(model, "hi", output_type=City).result.output, City)

run_agent(model, "hi", max_stepz=3)  # type: ignore[call-overload]
run_agent(model, "hi", max_steps="3")  # type: ignore[call-overload]
run_agent_stream(model, "hi", systen="x")  # type: ignore[call-overload]
run_agent(model, "hi", _emit=print)  # type: ignore[call-overload]

# -- Agent -------------------------------------------------------------------------------
agent = Agent(model, tools=[country_of], deps_type=Deps, output_type=City, system="answer with a city")
assert_type(agent, Agent[Deps, City])
assert_type(agent.run("hi", deps=deps), RunResult[City])
assert_type(agent.run("hi", deps=deps).output, City)
assert_type(agent.run("hi", deps=deps, output_type=int).output, int)
assert_type(agent.stream("hi", deps=deps), AgentStream[City])
assert_type(agent.stream("hi", deps=deps).result.output, City)
assert_type(agent.output_type, type[City] | None)
assert_type(agent.deps_type, type[Deps] | None)

plain = Agent(model)
assert_type(plain, Agent[Any, None])
assert_type(plain.run("hi").output, None)
assert_type(plain.run("hi", deps=123).text, str)  # no deps_type: any deps

assert_type(agent.with_options(max_steps=3), Agent[Deps, City])
assert_type(agent.with_options(output_type=int), Agent[Deps, int])
assert_type(agent.with_options(deps_type=str), Agent[str, City])
assert_type(agent.with_options(deps_type=str, output_type=int), Agent[str, int])
assert_type(agent.with_options(output_type=None), Agent[Deps, None])
assert_type(agent.with_options(output_type=None, deps_type=str), Agent[str, None])

agent.run("hi", deps=123)  # type: ignore[call-overload]
agent.run("hi", deps=deps, max_stepz=3)  # type: ignore[call-overload]
agent.run("hi", deps=deps, max_steps="3")  # type: ignore[call-overload]
agent.stream("hi", deps=deps, _emit=print)  # type: ignore[call-overload]
agent.with_options(max_stepz=3)  # type: ignore[call-overload]
Agent(model, max_stepz=3)  # type: ignore[call-arg]
Agent(model, max_steps="3")  # type: ignore[arg-type]
Agent(model, deps_type=Deps, _options=None)  # type: ignore[call-arg]

# -- Session -----------------------------------------------------------------------------
session = Session(model, deps_type=Deps, deps=deps)
assert_type(session, Session[Deps, None])
assert_type(session.ask("hi"), GenerateResult[None])
assert_type(session.ask("hi", output_type=City), GenerateResult[City])
assert_type(session.ask("hi", output_type=City).output, City)
assert_type(session.generate(), GenerateResult[None])
assert_type(session.generate(output_type=City).output, City)
assert_type(session.stream(), AgentStream[None])
assert_type(session.stream(output_type=City).result.output, City)
assert_type(session.ask_stream("hi", output_type=City).result.output, City)

typed_session = Session(model, output_type=City)
assert_type(typed_session, Session[Any, City])
assert_type(typed_session.ask("hi").output, City)
assert_type(agent.session(deps=deps), Session[Deps, City])
assert_type(agent.session(deps=deps).ask("hi").output, City)
assert_type(agent.session(deps=deps, output_type=int).ask("hi").output, int)

session.ask("hi", deps=123)  # type: ignore[call-overload]
session.ask("hi", max_stepz=3)  # type: ignore[call-overload]
session.generate(max_steps="3")  # type: ignore[call-overload]
session.generate(_prompt=None)  # type: ignore[call-overload]
session.stream(_emit=print)  # type: ignore[call-overload]
Session(model, max_stepz=3)  # type: ignore[call-arg]
Session(model, _seed_if_new=True)  # type: ignore[call-arg]


async def asking(s: Session[Deps, City]) -> None:
    assert_type(await s.ask_async("hi"), GenerateResult[City])
    assert_type((await s.ask_async("hi", output_type=int)).output, int)


# -- bounded runs and a live configuration (issue #30) ---------------------------------
capped = Agent(model, max_concurrent_runs=2, queue_timeout=5.0)
assert_type(capped.active_runs, int)
assert_type(capped.max_concurrent_runs, int | None)
assert_type(capped.close(timeout=1.0), int)
assert_type(capped.with_options(system="x").active_runs, int)
Agent(model, max_concurrent_runs="2")  # type: ignore[arg-type]
live = Session(model, max_concurrent_runs=1, queue_timeout=5.0)
assert_type(live.active_runs, int)
assert_type(live.configure(system="shorter", tools=[country_of]), Event)
live.configure(system=3)  # type: ignore[arg-type]
live.close(timeout=1.0)

# -- PlanningAgent.stream: an AgentStream whose result holds the PlanResult ---------------

planning = PlanningAgent(model)
assert_type(planning.stream("a goal"), AgentStream[PlanResult])
assert_type(planning.stream("a goal").result.output, PlanResult)
assert_type(planning.stream("a goal").result.text, str)
planning.stream("a goal", max_stepz=3)  # type: ignore[call-arg]
