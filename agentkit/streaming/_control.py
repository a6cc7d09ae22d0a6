"""What the log records beside the conversation, announced on the event path (private).

A generation commits approval requests and decisions, a ``budget-exceeded`` record and
compactions as log events a model never sees. :func:`announced` is the one mapping from
such committed events to agent events (``approval-requested``, ``approval-decided``,
``budget-exceeded``, ``compacted``); :class:`AnnouncingHost` puts it between a
generation and its host (the event log), so whatever the loop, the approval gate or
compaction commits is announced once, right after its commit, on the committing
thread. :func:`retry_listener` turns a provider adapter's retries into ``retry`` events.
Only a generation with an event path (a stream, a callback) builds any of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..approvals._policy import APPROVAL_DECIDED, APPROVAL_REQUESTED, ApprovalRequest
from ..events import CompactionEvent, ControlEvent, Event
from ._events import (
    AgentEvent,
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    BudgetExceededEvent,
    CompactedEvent,
    Emit,
    RetryEvent,
)

__all__ = ["AnnouncingHost", "announce_decisions", "announced", "retry_listener"]


def announced(event: Event, *, approver: bool = False) -> list[AgentEvent]:
    """The agent events committed ``event`` means to a stream consumer (none for most);
    ``approver``: an in-process approver answers the requests."""
    if isinstance(event, ControlEvent):
        data = event.data
        if event.action == APPROVAL_REQUESTED:
            return [ApprovalRequestedEvent(request=ApprovalRequest(
                id=item["request_id"], tool_name=item["tool_name"], input=item.get("input"),
                tool_call_id=item["tool_call_id"], requested_at=event.timestamp,
                reason=item.get("reason", ""), generation_id=data.get("generation_id"),
            ), approver=approver) for item in data.get("requests", ())]
        if event.action == APPROVAL_DECIDED:
            return [ApprovalDecidedEvent(
                request_id=data["request_id"], tool_call_id=data["tool_call_id"], tool_name=data["tool_name"],
                approved=data.get("decision") == "approved", reason=data.get("reason"),
                remember=bool(data.get("remember")), note=data.get("note"), source=data.get("source", "host"),
            )]
        if event.action == "budget-exceeded":
            return [BudgetExceededEvent(limit=data["limit"], maximum=data["maximum"], used=data["used"])]
        return []
    if isinstance(event, CompactionEvent):
        return [CompactedEvent(reason=event.reason, covered=event.covered, covered_through=event.covered_through,
                               summary=event.summary, compaction_id=event.id)]
    return []


def announce_decisions(events: Iterable[Event], request_ids: set[str], emit: Emit) -> None:
    """Emit ``approval-decided`` for the decisions on ``request_ids`` already in the log
    (a host decided while no generation ran; the generation going on announces them)."""
    if not request_ids:
        return
    for event in events:
        if (isinstance(event, ControlEvent) and event.action == APPROVAL_DECIDED
                and event.data.get("request_id") in request_ids):
            for agent_event in announced(event):
                emit(agent_event)


def retry_listener(emit: Emit | None) -> Callable[[Any], None] | None:
    """A ``ModelRequest.on_retry`` that emits a ``retry`` event per retry (None without
    an event path: nothing is built)."""
    if emit is None:
        return None

    def retried(info: Any) -> None:  # a models.RetryInfo
        emit(RetryEvent(attempt=info.attempt, delay=info.delay, error=info.error, retry_after=info.retry_after))

    return retried


class AnnouncingHost:
    """A generation's host (``LoopHost``) that announces what its commits mean on
    ``emit`` (:func:`announced`); everything else is the wrapped host's."""

    def __init__(self, host: Any, emit: Emit, *, approver: bool = False) -> None:
        self._host = host
        self._emit = emit
        self._approver = approver

    def commit(self, events: Sequence[Event]) -> list[Event]:
        committed: list[Event] = self._host.commit(events)
        self._announce(committed)
        return committed

    def decide(self, decide: Callable[[], Sequence[Event]]) -> list[Event]:
        committed: list[Event] = self._host.decide(decide)
        self._announce(committed)
        return committed

    def _announce(self, committed: Sequence[Event]) -> None:
        for event in committed:
            if isinstance(event, (ControlEvent, CompactionEvent)):
                for agent_event in announced(event, approver=self._approver):
                    self._emit(agent_event)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._host, name)
