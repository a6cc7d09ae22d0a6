"""Plan-and-execute agents: :class:`~agentkit.PlanningAgent` and
:class:`~agentkit.PlanResult` are imported from ``agentkit``; this package lists a plan's
parts and the events of ``PlanningAgent.stream``. The run's state, folded from control events, is private."""

from __future__ import annotations

from ._agent import Plan, PlanStep, Stage, StepResult
from ._stream import (
    PlanCreatedEvent,
    PlanReplannedEvent,
    PlanStageEvent,
    PlanStepEndEvent,
    PlanStepStartEvent,
    PlanSynthesizedEvent,
)

__all__ = [
    "Plan",
    "PlanStep",
    "Stage",
    "StepResult",
    "PlanCreatedEvent",
    "PlanReplannedEvent",
    "PlanStageEvent",
    "PlanStepEndEvent",
    "PlanStepStartEvent",
    "PlanSynthesizedEvent",
]
