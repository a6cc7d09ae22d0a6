"""A host's answers to a session's approval requests (private): what
:meth:`Session.pending_approvals <agentkit.Session.pending_approvals>`, ``approve`` and
``deny`` do on the event log.

A decision is checked against the approval state folded from the log and committed in one
:meth:`~agentkit.session._eventlog.EventLog.decide` step, so another process's decision in
between is seen (the step is decided again on the caught-up state).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ConfigurationError
from ..events import Event
from ._policy import ApprovalDecision, ApprovalRequest, decision_events

if TYPE_CHECKING:
    from ..session._eventlog import EventLog

__all__ = ["decide", "pending"]


def pending(log: EventLog) -> list[ApprovalRequest]:
    """The requests of ``log`` waiting for an answer, in the order they were asked."""
    log.sync()
    with log.lock:
        return log.approval_state().pending()


def decide(log: EventLog, request_id: str, decision: ApprovalDecision) -> Event:
    """Commit ``decision`` on request ``request_id``; returns the decision event."""
    if decision.note is not None and not isinstance(decision.note, str):
        raise ConfigurationError(f"note must be a str or None, not {type(decision.note).__name__}")

    def decided() -> list[Event]:  # again on the caught-up state if another process wrote first
        request = log.approval_state().check_decidable(request_id, approving=decision.approved)
        return decision_events(request, decision, source="host")

    return log.decide(decided)[0]
