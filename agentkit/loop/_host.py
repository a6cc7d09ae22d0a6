"""What the step loop needs of its session (:class:`LoopHost`): the event log's commits,
decisions and projections; the session's event log (``session/_eventlog.py``) is one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..approvals._policy import ApprovalState
from ..events import Event
from ..messages import Message
from ..stores.base import TurnLease
from ..transactions._ledger import TransactionLedger

__all__ = ["LoopHost"]


class LoopHost(Protocol):
    """What the loop needs from its session: the event log's commit and projection."""

    session_id: str | None

    @property
    def events(self) -> tuple[Event, ...]:
        """The active log (what a ``context_builder`` and compaction read)."""
        ...

    @property
    def durable(self) -> bool:
        """True when commits are durable (tool calls are then preceded by execution intents)."""
        ...

    @property
    def store(self) -> Any:
        """The session's event store (None in memory): tools see it as ``ToolContext.store``."""
        ...

    def commit(self, events: Sequence[Event]) -> list[Event]:
        """Number, persist and publish ``events``; returns them with their ``seq``."""
        ...

    def decide(self, decide: Callable[[], Sequence[Event]]) -> list[Event]:
        """Commit what ``decide()`` returns on the current state, deciding again on
        the caught-up state when another process wrote first."""
        ...

    def decide_in_turn(self, decide: Callable[[], Sequence[Event]], *,
                       turn: TurnLease | None = None) -> list[Event]:
        """:meth:`decide`, fenced by the generation's turn from any thread (a tool's
        journaled steps and questions, committed on its worker thread); ``turn``: the
        lease to fence with (:attr:`turn` when the call started)."""
        ...

    @property
    def turn(self) -> TurnLease | None:
        """The turn lock lease the generation holds now, or None."""
        ...

    def projection_of(self, events: Sequence[Event]) -> list[Message]:
        """The plain conversation ``events`` project to."""
        ...

    def project(self, *, for_model: bool = True) -> tuple[list[Message], dict[str, str], int]:
        """The messages so far, the tool calls still waiting for results and the seq of
        the last event they were built from."""
        ...

    def follow_up_waiting(self) -> bool:
        """True when a follow-up message comes after the last answer."""
        ...

    def approval_state(self) -> ApprovalState:
        """The approval requests, decisions and remembered rules of the log so far."""
        ...

    @property
    def ledger(self) -> TransactionLedger:
        """The transaction and execution-intent state folded from the log."""
        ...
