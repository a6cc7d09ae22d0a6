"""Bounded concurrent runs on an Agent and a Session (private): the mixins that give
them ``active_runs`` and a close that drains, over a
:class:`~agentkit._threads._limiter.RunLimiter`.

- :class:`AgentRuns`, :class:`~agentkit.Agent`'s: ``Agent(max_concurrent_runs=N,
  queue_timeout=seconds)``. A run (``run``, or a ``stream`` until it ends, is closed, or
  is dropped and collected) holds a slot while it runs; ``close(timeout)`` drains.
- :class:`SessionRuns`, :class:`~agentkit.Session`'s: a session runs one generation at a
  time (its gate), so its slots bound the generations in progress on this object, the
  running one and those queued behind it; ``Session.close(timeout=...)`` drains them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._threads._limiter import RunLimiter
from ..errors import AgentClosedError, SessionClosedError
from ..events import Event
from ..options import NOT_GIVEN
from ._config import Configuration, configure

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["AgentRuns", "SessionRuns", "drain", "session_limiter"]


class AgentRuns:
    """An Agent's bounded runs.

    ``Agent(..., max_concurrent_runs=N)`` lets at most ``N`` runs be active at once
    (``run``; ``stream``, from when its worker starts until it ends or is closed); one
    more waits for a slot, first come first served, and ``queue_timeout`` seconds ends
    the wait with :class:`~agentkit.errors.RunLimitTimeout` (None, the default: it waits
    as long as it takes, or until its ``cancel`` token is cancelled). A run gives its
    slot back however it ends. Copies made by ``with_options`` share the slots.
    """

    __slots__ = ("_runs",)

    _runs: RunLimiter

    @staticmethod
    def limiter(max_concurrent_runs: int | None, queue_timeout: float | None) -> RunLimiter:
        """The limiter of a new Agent (bad values are a ConfigurationError)."""
        return RunLimiter("Agent", max_concurrent_runs, queue_timeout, AgentClosedError)

    @property
    def max_concurrent_runs(self) -> int | None:
        """The cap on runs active at once (None: no cap)."""
        return self._runs.limit

    @property
    def active_runs(self) -> int:
        """How many runs are running now (of this agent and its ``with_options`` copies;
        runs waiting for a slot are not counted)."""
        return self._runs.active

    def close(self, timeout: float = 30.0) -> int:
        """Drain the agent: refuse new runs and the ones waiting for a slot
        (:class:`~agentkit.errors.AgentClosedError`), wait up to ``timeout`` seconds for
        the running ones to end, then cancel those still running (they end with
        :class:`~agentkit.errors.CancelledError`, soon after, as their model call or tool
        sees the cancel). Returns how many it cancelled (0: all ended in time). Closes its
        ``with_options`` copies too (they share the runs); sessions opened with
        ``agent.session()`` are not affected. Calling it again drains again."""
        return self._runs.close(timeout, "the agent was closed (Agent.close()); it starts no more runs")


class SessionRuns:
    """A Session's bounded generations and its live configuration (the Session's mixin).

    ``Session(..., max_concurrent_runs=N, queue_timeout=seconds)``: a generation
    (``generate``, ``ask``, ``stream``...) holds a slot from before it queues at the
    session's gate until it ends, so at most ``N`` are in progress on this object (one
    running, the others queued for their turn); one more waits for a slot up to
    ``queue_timeout`` seconds (:class:`~agentkit.errors.RunLimitTimeout`).
    """

    _runs: RunLimiter
    _config: Configuration  # the models and tools it was given, the records applied

    @property
    def active_runs(self) -> int:
        """How many generations hold a slot of this session object now: the running one
        and those queued at its gate behind it (not those waiting for a slot)."""
        return self._runs.active

    def configure(self, *, model: Any = NOT_GIVEN, system: str | None = NOT_GIVEN,
                  tools: Iterable[Any] = NOT_GIVEN) -> Event:
        """Change this session's model, system prompt or tools for its later turns (a
        generation running now finishes with what it started with). Commits one
        ``session-configured`` control event holding what changed, so every process
        sharing the session's store, and the session reopened later, use the same
        configuration (see docs/sessions.md, "Changing a live session"). ``model``: a
        ChatModel or a spec string; ``system``: a text, or None for none; ``tools``: the
        full new list. Bad values raise :class:`~agentkit.errors.ConfigurationError`
        before anything is committed. Returns the committed event."""
        return configure(self, model=model, system=system, tools=tools)  # type: ignore[arg-type]


def session_limiter(max_concurrent_runs: int | None, queue_timeout: float | None) -> RunLimiter:
    """The limiter of a new Session (bad values are a ConfigurationError)."""
    return RunLimiter("Session", max_concurrent_runs, queue_timeout, SessionClosedError)


def drain(session: Session[Any, Any], timeout: float) -> None:
    """The first half of ``Session.close(timeout=...)``: refuse new generations and the
    queued ones, and wait up to ``timeout`` seconds for the running one to end (the rest
    of close cancels it, through the gate, if it still runs)."""
    if timeout and not session._log.closed:
        session._gate.refuse("the session is closing")
    session._runs.close(timeout, "the session is closing (Session.close()); it starts no more generations",
                        cancel=False)
