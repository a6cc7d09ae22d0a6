"""Stored sessions as a pydantic-evals dataset: ``dataset_from_sessions`` (private
module; import it from :mod:`agentkit.evals`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from . import _require  # noqa: F401 - pydantic-evals, or MissingDependencyError naming the extra

from pydantic_evals import Case, Dataset  # isort: skip

from ..errors import ConfigurationError
from ..events import AssistantMessageEvent, UserMessageEvent
from ..stores.base import EventStore
from ._output import AgentOutput, first_turn

__all__ = ["dataset_from_sessions"]

SessionDataset = Dataset[str, AgentOutput, dict[str, Any]]


def dataset_from_sessions(store: EventStore, session_ids: Iterable[str] | None = None, *,
                          name: str = "sessions", inputs: Literal["prompt", "session_id"] = "prompt") -> SessionDataset:
    """A pydantic-evals :class:`~pydantic_evals.Dataset` with one case per stored session.

    ``session_ids`` None takes every session of ``store`` (``store.list_sessions()``,
    leaving out those without a user message); named sessions must exist and hold one.
    Each case is:

    - ``name``: the session id;
    - ``inputs``: the session's first prompt (its first user message's text), for
      :func:`agent_task`; with ``inputs="session_id"`` the session id instead, for
      :func:`replay_task`, which replays the whole stored session;
    - ``expected_output``: an :class:`AgentOutput` of the first turn as recorded (up to
      the next user message): the final answer's ``text``, the ``tool_calls`` with their
      results, ``usage``, ``steps``;
    - ``metadata``: ``{"session_id", "tool_calls": [{"name", "input"}, ...], "turns",
      "model"}`` (the recorded calls of the first turn, the session's number of user
      messages, the model that answered, None when the log does not say).

    Add evaluators with ``dataset.add_evaluator(...)`` and run it with
    ``dataset.evaluate_sync(agent_task(agent))``."""
    if not callable(getattr(store, "list_sessions", None)) or not callable(getattr(store, "load", None)):
        raise ConfigurationError(
            f"dataset_from_sessions needs an event store (FileEventStore, PostgresEventStore...), "
            f"got {type(store).__name__}"
        )
    if inputs not in ("prompt", "session_id"):
        raise ConfigurationError(f"dataset_from_sessions(inputs=) is 'prompt' or 'session_id', not {inputs!r}")
    named = session_ids is not None
    ids = _checked_ids(session_ids) if session_ids is not None else store.list_sessions()
    cases: list[Case[str, AgentOutput, dict[str, Any]]] = []
    missing: list[str] = []
    for session_id in ids:
        stored = store.load(session_id)
        turn = None if stored is None else first_turn(stored.events)
        if stored is None or turn is None:
            if named:
                missing.append(session_id if stored is None else f"{session_id} (no user message)")
            continue
        prompt, expected = turn
        models = [e.model for e in stored.events if isinstance(e, AssistantMessageEvent) and e.model]
        metadata = {
            "session_id": session_id,
            "tool_calls": [{"name": c.tool_name, "input": c.input} for c in expected.tool_calls],
            "turns": sum(1 for e in stored.events if isinstance(e, UserMessageEvent)),
            "model": models[0] if models else None,
        }
        cases.append(Case(name=session_id, inputs=prompt if inputs == "prompt" else session_id,
                          expected_output=expected, metadata=metadata))
    if missing:
        raise ConfigurationError(
            f"dataset_from_sessions: no session to evaluate for {', '.join(map(repr, missing))} in the store; "
            f"its sessions are: {', '.join(store.list_sessions()) or 'none'}"
        )
    return SessionDataset(name=name, cases=cases)


def _checked_ids(session_ids: Iterable[str]) -> list[str]:
    if isinstance(session_ids, str):
        raise ConfigurationError(
            f"session_ids must be a list of session ids, got the string {session_ids!r}: "
            f"write session_ids=[{session_ids!r}]"
        )
    ids = list(session_ids)
    bad = [i for i in ids if not isinstance(i, str)]
    if bad:
        raise ConfigurationError(f"session_ids must be strings, got {bad!r}")
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ConfigurationError(f"session_ids lists {', '.join(map(repr, repeated))} more than once")
    return ids
