"""An :class:`~agentkit.Agent` as the task of a pydantic-evals evaluation:
``agent_task`` (private module; import it from :mod:`agentkit.evals`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from . import _require  # noqa: F401 - pydantic-evals, or MissingDependencyError naming the extra

from pydantic_evals import increment_eval_metric, set_eval_attribute  # isort: skip

from .._threads import run_sync_cancellable
from ..agent import Agent
from ..cancel import CancelToken
from ..errors import ConfigurationError
from ._output import AgentOutput
from ._replay import ToolMode, replay

__all__ = ["agent_task", "prompt_of", "replay_task"]

EvalTask = Callable[[Any], Awaitable[AgentOutput]]


def agent_task(agent: Agent[Any, Any], *, name: str = "agent", deps: Any = None) -> EvalTask:
    """A task for :meth:`pydantic_evals.Dataset.evaluate` that runs ``agent`` on each case.

    A case's ``inputs`` is the prompt (a string, or a mapping with a ``"prompt"`` key, as a
    YAML file may hold it); the task returns an :class:`AgentOutput` (answer text, tool
    calls, usage, steps, structured output) and records the metrics ``tokens``, ``steps``
    and ``tool_calls`` shown in the report. Each run is a fresh conversation on a worker
    thread (``Agent.run`` is synchronous), so cases run in parallel up to the evaluation's
    ``max_concurrency`` (and anyio's 40 worker threads); a cancelled evaluation cancels
    the runs. ``name`` names the task in the report's title; ``deps`` reach the agent's
    tools and hooks."""
    if not isinstance(agent, Agent):
        raise ConfigurationError(
            f"agent_task needs an agentkit.Agent, got {type(agent).__name__}: build one with "
            f"Agent(model, tools=...)"
        )

    async def task(inputs: Any) -> AgentOutput:
        prompt = prompt_of(inputs)

        def run(token: CancelToken) -> AgentOutput:
            return AgentOutput.from_result(agent.run(prompt, deps=deps, cancel=token))

        output = await run_sync_cancellable(run)
        increment_eval_metric("tokens", output.usage.total_tokens)
        increment_eval_metric("steps", len(output.steps))
        increment_eval_metric("tool_calls", len(output.tool_calls))
        return output

    task.__name__ = task.__qualname__ = name
    return task


def replay_task(store: Any, *, model: Any, tools: ToolMode = "recorded", live_tools: Any = None,
                name: str = "replay") -> EvalTask:
    """A task for :meth:`pydantic_evals.Dataset.evaluate` that replays each case's stored
    session (:func:`agentkit.replay`) against ``model``: build the dataset with
    ``dataset_from_sessions(store, inputs="session_id")``. Recorded tool results serve the
    calls that match the record; ``tools`` decides the others, as in ``replay``. The task
    returns the replayed first turn as an :class:`AgentOutput` (so the evaluators that
    compare with the recorded first turn apply) and records the metrics ``turns`` and
    ``turns_same`` (every turn of the session, and how many the replay reproduced) and the
    attribute ``differing_turns`` (their indexes). Replays run on worker threads, in
    parallel up to the evaluation's ``max_concurrency``."""
    if not callable(getattr(store, "load", None)):
        raise ConfigurationError(f"replay_task needs the event store the sessions are in, got {type(store).__name__}")

    async def task(inputs: Any) -> AgentOutput:
        session_id = inputs.get("session_id") if isinstance(inputs, Mapping) else inputs
        stored = store.load(session_id) if isinstance(session_id, str) else None
        if stored is None:
            raise ConfigurationError(f"replay_task: no stored session {session_id!r}; build the dataset with "
                                     f"dataset_from_sessions(store, inputs='session_id')")

        def run(token: CancelToken) -> Any:
            return replay(stored, model=model, tools=tools, live_tools=live_tools)

        result = await run_sync_cancellable(run)
        first = result.turns[0].replayed
        increment_eval_metric("turns", len(result.turns))
        increment_eval_metric("turns_same", sum(1 for t in result.turns if t.same))
        set_eval_attribute("differing_turns", [t.index for t in result.turns if not t.same])
        return AgentOutput(text=first.text, tool_calls=first.tool_calls, usage=first.usage,
                           finish_reason=first.finish_reason or "stop")

    task.__name__ = task.__qualname__ = name
    return task


def prompt_of(inputs: Any) -> str:
    """A case's prompt: ``inputs`` itself, or its ``"prompt"`` entry."""
    if isinstance(inputs, str):
        return inputs
    if isinstance(inputs, Mapping) and isinstance(inputs.get("prompt"), str):
        return str(inputs["prompt"])
    raise ConfigurationError(
        f"a case's inputs must be the prompt (a string) or a mapping with a 'prompt' string, "
        f"got {type(inputs).__name__}: {inputs!r:.80}"
    )
