"""Replays and evaluations from stored sessions.

:func:`agentkit.replay` (also importable from here) runs a stored conversation's user
turns again against a model, with tool results served from the record, and returns a
:class:`ReplayResult`: one :class:`ReplayTurn` per user message, each with the
:class:`ReplaySide` of the original and of the replay. See docs/sessions.md, "Replay".

Evaluations are on pydantic-evals (the ``evals`` extra): stored sessions as a
:class:`pydantic_evals.Dataset` (:func:`dataset_from_sessions`), an
:class:`~agentkit.Agent` as its task on threads (:func:`agent_task`, returning an
:class:`AgentOutput`), and the evaluators agents need (tool-call expectations, the answer
and tool calls against the recorded ones, structured-output validity, token and step
budgets). docs/evals.md shows them.

``import agentkit.evals`` works without the extra; using one of the evaluation names
imports pydantic-evals, and raises :class:`~agentkit.errors.MissingDependencyError`
naming the install command when it is missing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._replay import ReplayResult, ReplaySide, ReplayTurn, ToolMode
from ._replay import replay as replay  # listed in agentkit's __all__ (a name has one public home)

if TYPE_CHECKING:
    from ._dataset import dataset_from_sessions
    from ._evaluators import (
        EVALUATORS,
        AnswerMatches,
        MaxSteps,
        MaxTokens,
        OutputValidates,
        ToolCalled,
        ToolCallsMatch,
        ToolNotCalled,
    )
    from ._output import AgentOutput
    from ._task import agent_task, replay_task

_HOMES = {
    "AgentOutput": "._output",
    "agent_task": "._task",
    "replay_task": "._task",
    "dataset_from_sessions": "._dataset",
    **{name: "._evaluators" for name in (
        "EVALUATORS", "AnswerMatches", "MaxSteps", "MaxTokens", "OutputValidates", "ToolCalled", "ToolCallsMatch",
        "ToolNotCalled",
    )},
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)


__all__ = [
    "EVALUATORS",
    "ReplayResult",
    "ReplaySide",
    "ReplayTurn",
    "ToolMode",
    "AgentOutput",
    "AnswerMatches",
    "MaxSteps",
    "MaxTokens",
    "OutputValidates",
    "ToolCalled",
    "ToolCallsMatch",
    "ToolNotCalled",
    "agent_task",
    "dataset_from_sessions",
    "replay_task",
]
