"""The planning agent's state, as data and as session events (private; pure logic).

A planning run is recorded in its session's log as control events (never shown to a
model): ``plan-created``, ``plan-step-started``, ``plan-step-finished``,
``plan-replanned``, ``plan-budget-exceeded`` and ``plan-synthesized``, each carrying the
run's id. :func:`unfinished_run` folds them back into a :class:`RunState`, so a run
interrupted by a crash continues from its saved plan. The data types here are public
through :mod:`agentkit.planning`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..events import AssistantMessageEvent, ControlEvent, Event
from ..messages import text_of
from ..usage import Usage

PLAN_CREATED = "plan-created"
STEP_STARTED = "plan-step-started"
STEP_FINISHED = "plan-step-finished"
REPLANNED = "plan-replanned"
BUDGET_EXCEEDED = "plan-budget-exceeded"
SYNTHESIZED = "plan-synthesized"
ACTIONS = (PLAN_CREATED, STEP_STARTED, STEP_FINISHED, REPLANNED, BUDGET_EXCEEDED, SYNTHESIZED)

ReplanAfter = Literal["failure", "always", "never"]

_CLIP = 4000
"""Characters of a step's result a later prompt shows."""


# -- public data -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PlanStep:
    """One step of a plan: what to do, and the tools the planner suggests for it."""

    description: str
    tools: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"description": self.description, "tools": list(self.tools)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlanStep:
        """Inverse of :meth:`to_dict`."""
        return cls(description=str(data["description"]), tools=tuple(str(t) for t in data.get("tools", ())))


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The planner's plan: its reasoning (``thought``) and the ordered steps. After a
    revision, ``steps`` holds the steps already run followed by the revised rest."""

    thought: str
    steps: tuple[PlanStep, ...]


@dataclass(frozen=True, kw_only=True)
class StepResult:
    """What came of one executed plan step."""

    index: int
    """The step's place in the plan (0-based)."""
    description: str
    ok: bool
    """False when the step failed (see docs/planning.md, "When a step fails")."""
    result: str
    """The executor's report: what it found or did (or what went wrong)."""
    error: str | None = None
    """Why the step failed, when it did."""
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    """The executor generation's finish reason (``error`` when it raised)."""
    attempt: int = 1
    """1, or more when a crash interrupted earlier attempts of the step."""
    session_id: str | None = None
    """The child session the step ran in, when the run's session is durable."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the ``plan-step-finished`` event's data, less the run id)."""
        return {
            "index": self.index, "description": self.description, "ok": self.ok, "result": self.result,
            "error": self.error, "usage": self.usage.to_dict(), "finish_reason": self.finish_reason,
            "attempt": self.attempt, "session_id": self.session_id,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepResult:
        """Inverse of :meth:`to_dict`."""
        return cls(
            index=int(data["index"]), description=str(data["description"]), ok=bool(data["ok"]),
            result=str(data.get("result", "")), error=data.get("error"),
            usage=Usage.from_dict(data.get("usage") or {}), finish_reason=str(data.get("finish_reason", "stop")),
            attempt=int(data.get("attempt", 1)), session_id=data.get("session_id"),
        )


@dataclass(frozen=True, kw_only=True)
class PlanResult:
    """The outcome of :meth:`PlanningAgent.run`."""

    plan: Plan
    """The plan as it stood at the end (after any revision)."""
    steps: tuple[StepResult, ...]
    """The steps executed, in order (a resumed run includes those run before the crash)."""
    text: str
    """The synthesizer's answer."""
    usage: Usage
    """Every stage's usage: planner, executors, replanner, synthesizer (across a resume)."""
    revisions: int = 0
    """How often the replanner revised the plan."""
    finish_reason: str = "completed"
    """``completed`` (every step ran), ``finished-early`` (the replanner said finish) or
    ``budget-exceeded`` (a limit stopped execution; the synthesizer still answered)."""
    run_id: str = ""
    """The id the run's events carry."""
    resumed: bool = False
    """True when this call continued a run interrupted earlier."""


# -- what the stage models are asked for (structured output) ----------------------------


class PlanStepOutput(BaseModel):
    """One step of the plan."""

    description: str = Field(description="What to do in this step, stated so it can be carried out alone.")
    tools: list[str] = Field(default_factory=list, description="Names of the tools likely needed (may be empty).")


class PlanOutput(BaseModel):
    """The plan for reaching the goal."""

    thought: str = Field(description="Brief reasoning about how to reach the goal.")
    steps: list[PlanStepOutput] = Field(min_length=1, description="The ordered steps; as few as the goal needs.")


class StepOutcome(BaseModel):
    """The outcome of the current step."""

    success: bool = Field(description="True when the step was carried out; false when it could not be.")
    result: str = Field(description="What was found or done, with the details later steps need; or what went wrong.")


class ReplanDecision(BaseModel):
    """How to go on after the last step."""

    decision: Literal["continue", "revise", "finish"] = Field(
        description="continue: keep the remaining steps; revise: replace them with `steps`; "
        "finish: stop executing and write the answer now."
    )
    reason: str = Field(default="", description="Why.")
    steps: list[PlanStepOutput] = Field(
        default_factory=list, description="With revise: the new remaining steps (the finished ones stay)."
    )


def plan_from(output: PlanOutput, max_steps: int) -> Plan:
    """The plan a planner output stands for, cut to ``max_steps`` steps."""
    return Plan(thought=output.thought, steps=tuple(_step(s) for s in output.steps[:max_steps]))


def _step(s: PlanStepOutput) -> PlanStep:
    return PlanStep(description=s.description, tools=tuple(s.tools))


def revised(plan: Plan, done: int, decision: ReplanDecision, max_steps: int) -> Plan:
    """``plan`` with the steps after the first ``done`` replaced by the decision's."""
    rest = tuple(_step(s) for s in decision.steps)[: max(0, max_steps - done)]
    return Plan(thought=plan.thought, steps=plan.steps[:done] + rest)


# -- the log ---------------------------------------------------------------------------


def event(action: str, run_id: str, **data: Any) -> ControlEvent:
    """A planning control event of run ``run_id``."""
    return ControlEvent(action=action, data={"run_id": run_id, **data})


def plan_data(plan: Plan) -> dict[str, Any]:
    """A plan as event data."""
    return {"thought": plan.thought, "steps": [s.to_dict() for s in plan.steps]}


def _plan_of(data: dict[str, Any]) -> Plan:
    return Plan(thought=str(data.get("thought", "")), steps=tuple(PlanStep.from_dict(s) for s in data["steps"]))


@dataclass
class Spend:
    """What a stage (or a run so far) spent: tokens, model calls, tool calls."""

    usage: Usage = field(default_factory=Usage)
    model_calls: int = 0
    tool_calls: int = 0

    def data(self) -> dict[str, Any]:
        return {"usage": self.usage.to_dict(), "model_calls": self.model_calls, "tool_calls": self.tool_calls}

    def add(self, other: Spend) -> None:
        self.usage = self.usage + other.usage
        self.model_calls += other.model_calls
        self.tool_calls += other.tool_calls

    @classmethod
    def of(cls, data: dict[str, Any]) -> Spend:
        return cls(usage=Usage.from_dict(data.get("usage") or {}), model_calls=int(data.get("model_calls", 0)),
                   tool_calls=int(data.get("tool_calls", 0)))


@dataclass
class RunState:
    """A planning run folded from its events."""

    run_id: str
    goal: str
    plan: Plan
    results: list[StepResult] = field(default_factory=list)
    attempts: dict[int, int] = field(default_factory=dict)
    """Per step index, how many attempts were started."""
    replanned: set[int] = field(default_factory=set)
    """The step indexes the replanner already ran after."""
    revisions: int = 0
    spent: Spend = field(default_factory=Spend)
    stop: str | None = None
    """``finished-early`` or ``budget-exceeded`` once execution stopped before the end."""
    answer: str | None = None
    """The synthesizer's answer, once given."""
    resumed: bool = False

    @property
    def next_index(self) -> int:
        return len(self.results)

    def replan_due(self, policy: ReplanAfter, max_revisions: int) -> bool:
        """True when the replanner should run now: after the last step (a failed one, or
        any with ``always``), once, while revisions remain."""
        if not self.results or self.revisions >= max_revisions or policy == "never":
            return False
        last = self.results[-1]
        if last.index in self.replanned:
            return False
        return policy == "always" or not last.ok

    def apply(self, ev: ControlEvent) -> None:
        """Fold one of this run's events."""
        data, action = ev.data, ev.action
        if action == STEP_STARTED:
            self.attempts[int(data["index"])] = int(data.get("attempt", 1))
        elif action == STEP_FINISHED:
            result = StepResult.from_dict(data)
            self.results.append(result)
            self.spent.add(Spend.of(data))
        elif action == REPLANNED:
            self.replanned.add(int(data["after"]))
            self.spent.add(Spend.of(data))
            if data.get("decision") == "revise":
                self.revisions += 1
                self.plan = _plan_of(data["plan"])
            elif data.get("decision") == "finish":
                self.stop = "finished-early"
        elif action == BUDGET_EXCEEDED:
            self.stop = "budget-exceeded"
        elif action == SYNTHESIZED:
            self.answer = str(data.get("text", ""))
            self.spent.add(Spend.of(data))


def find_run(events: Sequence[Event]) -> RunState | None:
    """The last planning run recorded in ``events`` (finished or not), or None."""
    start = None
    for i in range(len(events) - 1, -1, -1):
        ev = events[i]
        if isinstance(ev, ControlEvent) and ev.action == PLAN_CREATED:
            start = i
            break
    if start is None:
        return None
    created = events[start]
    assert isinstance(created, ControlEvent)
    data = created.data
    state = RunState(run_id=str(data["run_id"]), goal=str(data["goal"]), plan=_plan_of(data["plan"]),
                     spent=Spend.of(data))
    answered = None
    for ev in events[start + 1 :]:
        if isinstance(ev, ControlEvent) and ev.data.get("run_id") == state.run_id and ev.action in ACTIONS:
            state.apply(ev)
        elif isinstance(ev, AssistantMessageEvent) and not ev.tool_calls:
            answered = ev  # the synthesizer's answer, committed just before plan-synthesized
    if state.answer is None and answered is not None:
        state.answer = text_of(answered.content)
        if answered.usage is not None:
            state.spent.add(Spend(usage=answered.usage, model_calls=1))
    return state


# -- prompts ---------------------------------------------------------------------------

PLANNER_SYSTEM = (
    "You are the planner of a plan-and-execute agent. Break the user's goal into a short "
    "ordered list of concrete steps that an executor with the listed tools can carry out one "
    "at a time. Each step must be self-contained. Use as few steps as the goal needs."
)
EXECUTOR_SYSTEM = (
    "You are the executor of a plan-and-execute agent. Carry out the current step only, using "
    "the tools as needed, then report the step's outcome: success with the result (the facts "
    "and details later steps need), or failure with what went wrong."
)
REPLANNER_SYSTEM = (
    "You are the replanner of a plan-and-execute agent. Given the goal, the plan and the "
    "results so far, decide how to go on: continue with the remaining steps, revise them "
    "(give the new remaining steps), or finish now when the goal is reached or cannot be."
)
SYNTHESIZER_SYSTEM = (
    "You write the final answer of a plan-and-execute agent: answer the user's goal from the "
    "step results, directly and completely. Say plainly what could not be done."
)


def _clip(text: str) -> str:
    return text if len(text) <= _CLIP else text[:_CLIP] + f" … [{len(text) - _CLIP} more characters]"


def _progress(plan: Plan, results: Sequence[StepResult], current: int | None = None) -> str:
    lines = []
    for i, step in enumerate(plan.steps):
        tools = f" (suggested tools: {', '.join(step.tools)})" if step.tools else ""
        if i < len(results):
            r = results[i]
            status = "done" if r.ok else "failed"
            lines.append(f"{i + 1}. [{status}] {step.description}\n   result: {_clip(r.result)}")
        elif i == current:
            lines.append(f"{i + 1}. [current] {step.description}{tools}")
        else:
            lines.append(f"{i + 1}. [to do] {step.description}{tools}")
    return "\n".join(lines) or "(no steps)"


def planner_prompt(goal: str, tools: Iterable[tuple[str, str]], max_steps: int) -> str:
    listed = "\n".join(f"- {name}: {description}" for name, description in tools) or "(none)"
    return f"Goal:\n{goal}\n\nTools the executor has:\n{listed}\n\nWrite a plan of at most {max_steps} steps."


def executor_prompt(goal: str, plan: Plan, results: Sequence[StepResult], index: int) -> str:
    return (
        f"Goal:\n{goal}\n\nPlan ({plan.thought}):\n{_progress(plan, results, index)}\n\n"
        f"Carry out step {index + 1} of {len(plan.steps)} now: {plan.steps[index].description}"
    )


def replanner_prompt(goal: str, plan: Plan, results: Sequence[StepResult], revisions_left: int) -> str:
    last = results[-1]
    how = "succeeded" if last.ok else f"failed ({last.error or 'no reason given'})"
    return (
        f"Goal:\n{goal}\n\nPlan ({plan.thought}):\n{_progress(plan, results)}\n\n"
        f"Step {last.index + 1} {how}. Decide: continue, revise (you may revise {revisions_left} "
        f"more time(s)) or finish."
    )


def synthesizer_prompt(goal: str, plan: Plan, results: Sequence[StepResult], stop: str | None) -> str:
    note = ""
    if stop == "budget-exceeded":
        note = "\n\nExecution was stopped early: the budget ran out. Answer from what was done."
    elif stop == "finished-early":
        note = "\n\nThe remaining steps were skipped: the replanner decided to finish."
    return f"Goal:\n{goal}\n\nPlan ({plan.thought}):\n{_progress(plan, results)}{note}\n\nWrite the final answer."
