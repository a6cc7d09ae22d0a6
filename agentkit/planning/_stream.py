"""A planning run as a stream (:meth:`PlanningAgent.stream <agentkit.PlanningAgent.stream>`):
its progress and its stages' agent events (private module; the event kinds are listed
in :mod:`agentkit.planning`).

The run's own events mirror its control events in the log (``_planlog.py``), each
announced right after its commit: ``plan-created``, ``plan-step-start``,
``plan-step-end``, ``plan-replanned``, ``budget-exceeded`` and ``plan-synthesized``.
Every stage generation's events come wrapped in ``plan-stage-event`` (the stage, the
plan step it executes, the event), as a subagent's come in ``subagent-event``. The
stream starts with ``generation-start`` and ends with one ``generation-end`` whose
result is a :class:`~agentkit.RunResult` holding the :class:`PlanResult` as its
``output``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from ..cancel import CancelToken
from ..events import ControlEvent
from ..messages import Message
from ..results import RunResult, Step, ToolCallRecord
from ..streaming._events import (
    AgentEvent,
    BudgetExceededEvent,
    Emit,
    GenerationEndEvent,
    GenerationStartEvent,
    StepEndEvent,
    ToolEndEvent,
)
from ..streaming._stream import AgentStream
from . import _planlog as log
from ._planlog import Plan, PlanResult, StepResult

__all__ = [
    "PlanCreatedEvent",
    "PlanReplannedEvent",
    "PlanStageEvent",
    "PlanStepEndEvent",
    "PlanStepStartEvent",
    "PlanSynthesizedEvent",
    "plan_stream",
    "progress_event",
]


def _plan_dict(plan: Plan) -> dict[str, Any]:
    return {"thought": plan.thought, "steps": [s.to_dict() for s in plan.steps]}


@dataclass(frozen=True, kw_only=True)
class PlanCreatedEvent(AgentEvent):
    """The planner wrote the run's plan (``resumed``: a run continued from its saved
    plan announces that plan instead)."""

    type: ClassVar[str] = "plan-created"
    run_id: str
    goal: str
    plan: Plan
    resumed: bool = False

    def _payload(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "goal": self.goal, "plan": _plan_dict(self.plan), "resumed": self.resumed}


@dataclass(frozen=True, kw_only=True)
class PlanStepStartEvent(AgentEvent):
    """Plan step ``index`` (0-based) starts executing (``attempt`` 2 or more after a crash)."""

    type: ClassVar[str] = "plan-step-start"
    run_id: str
    index: int
    description: str
    attempt: int = 1
    session_id: str | None = None
    """The child session the step runs in, when the run's session is durable."""

    def _payload(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "index": self.index, "description": self.description,
                "attempt": self.attempt, "session_id": self.session_id}


@dataclass(frozen=True, kw_only=True)
class PlanStepEndEvent(AgentEvent):
    """A plan step ended: its :class:`~agentkit.planning.StepResult` (``ok`` False: failed)."""

    type: ClassVar[str] = "plan-step-end"
    run_id: str
    result: StepResult

    def _payload(self) -> dict[str, Any]:
        return {"run_id": self.run_id, **self.result.to_dict()}


@dataclass(frozen=True, kw_only=True)
class PlanReplannedEvent(AgentEvent):
    """The replanner decided after step ``after``: ``continue``, ``revise`` (``plan`` is
    the revised plan) or ``finish``."""

    type: ClassVar[str] = "plan-replanned"
    run_id: str
    after: int
    decision: str
    reason: str = ""
    plan: Plan | None = None

    def _payload(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "after": self.after, "decision": self.decision, "reason": self.reason,
                "plan": None if self.plan is None else _plan_dict(self.plan)}


@dataclass(frozen=True, kw_only=True)
class PlanSynthesizedEvent(AgentEvent):
    """The synthesizer wrote the run's answer (committed to the run's session)."""

    type: ClassVar[str] = "plan-synthesized"
    run_id: str
    text: str

    def _payload(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "text": self.text}


@dataclass(frozen=True, kw_only=True)
class PlanStageEvent(AgentEvent):
    """One agent event of a stage generation: ``stage`` is ``planner``, ``executor``,
    ``replanner`` or ``synthesizer``; ``index`` the plan step an executor runs (else None)."""

    type: ClassVar[str] = "plan-stage-event"
    stage: str
    index: int | None = None
    event: AgentEvent

    def _payload(self) -> dict[str, Any]:
        return {"stage": self.stage, "index": self.index, "event": self.event.to_dict()}


def progress_event(event: ControlEvent) -> AgentEvent | None:
    """The stream event of a planning control event (None for any other)."""
    data, action = event.data, event.action
    run_id = str(data.get("run_id", ""))
    if action == log.PLAN_CREATED:
        return PlanCreatedEvent(run_id=run_id, goal=str(data["goal"]), plan=log._plan_of(data["plan"]))
    if action == log.STEP_STARTED:
        return PlanStepStartEvent(run_id=run_id, index=int(data["index"]), description=str(data["description"]),
                                  attempt=int(data.get("attempt", 1)), session_id=data.get("session_id"))
    if action == log.STEP_FINISHED:
        return PlanStepEndEvent(run_id=run_id, result=StepResult.from_dict(data))
    if action == log.REPLANNED:
        plan = data.get("plan")
        return PlanReplannedEvent(run_id=run_id, after=int(data["after"]), decision=str(data["decision"]),
                                  reason=str(data.get("reason", "")), plan=None if plan is None else log._plan_of(plan))
    if action == log.BUDGET_EXCEEDED:
        return BudgetExceededEvent(limit=str(data["limit"]), maximum=int(data["maximum"]), used=int(data["used"]))
    if action == log.SYNTHESIZED:
        return PlanSynthesizedEvent(run_id=run_id, text=str(data.get("text", "")))
    return None


class _Tally:
    """The stage generations' steps and tool calls as they stream by (the stream's result)."""

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.steps: list[Step] = []
        self.tool_calls: list[ToolCallRecord] = []

    def stage(self, name: str, index: int | None) -> Emit:
        """Where stage ``name``'s generation sends its events."""
        def forward(event: AgentEvent) -> None:
            if isinstance(event, StepEndEvent):
                self.steps.append(replace(event.step, index=len(self.steps)))
            elif isinstance(event, ToolEndEvent) and name == "executor":
                self.tool_calls.append(event.record)
            self.emit(PlanStageEvent(stage=name, index=index, event=event))

        return forward

    def result(self, goal: str, plan: PlanResult) -> RunResult[PlanResult]:
        return RunResult(text=plan.text, finish_reason=plan.finish_reason, steps=tuple(self.steps),
                         messages=(Message.user(goal), Message.assistant(plan.text)), usage=plan.usage,
                         tool_calls=tuple(self.tool_calls), output=plan)


Run = Callable[[Callable[[str, int | None], Emit], Emit, CancelToken], PlanResult]
"""A planning run given where each stage's events go, where its progress goes, and its token."""


def plan_stream(run: Run, goal: str, session_id: str | None, *, max_buffer: int,
                cancel: CancelToken | None) -> AgentStream[PlanResult]:
    """``run`` on a stream's worker thread, as an AgentStream of its events."""

    def work(emit: Emit, token: CancelToken) -> RunResult[PlanResult]:
        tally = _Tally(emit)
        emit(GenerationStartEvent(session_id=session_id))
        result: RunResult[PlanResult] | None = None
        try:
            result = tally.result(goal, run(tally.stage, emit, token))
        except BaseException as exc:
            emit(GenerationEndEvent(error=exc))
            raise
        emit(GenerationEndEvent(result=result))
        return result

    return AgentStream(work, max_buffer=max_buffer, cancel=cancel)
