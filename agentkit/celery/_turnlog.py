"""The record of agent turns run on Celery workers, kept in the session's own log (private).

A turn enqueued with ``AgentTasks.enqueue_ask`` (or ``enqueue_generate``) has an id, the
Celery task id too. What becomes of it is written as ``control`` events of the session
(not shown to the model), each with ``data["turn_id"]``:

``turn-started``
    A worker holds the session's turn lock and is about to commit the prompt. ``kind``
    is ``"ask"`` or ``"generate"``.
``turn-cancel-requested``
    A cancel of the running turn was asked for (``reason``); the worker running it
    hears it and cancels the generation.
``turn-finished``
    The turn's last event, exactly one per turn: ``status`` is ``"completed"`` (with
    the generation's ``finish_reason``, e.g. ``"stop"`` or ``"approval-required"``),
    ``"cancelled"`` (``reason``; ``started`` false when it never ran), ``"failed"``
    (``error``) or ``"lost"`` (its worker stopped mid-turn: the task came back to a
    worker after its first one died, and the turn is not run a second time).

Every write is a decision over the log (the functions below), committed with
compare-and-swap and decided again on the caught-up state when another process wrote
first: a cancel racing a worker's start either finishes the turn before it starts (then
the worker never runs it) or asks the started turn to stop, never both, never neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..events import ControlEvent, Event

STARTED = "turn-started"
CANCEL_REQUESTED = "turn-cancel-requested"
FINISHED = "turn-finished"

_ACTIONS = (STARTED, CANCEL_REQUESTED, FINISHED)


def turn_of(event: Event) -> str | None:
    """The turn id ``event`` records something about, or None for any other event."""
    if isinstance(event, ControlEvent) and event.action in _ACTIONS:
        turn_id = event.data.get("turn_id")
        return turn_id if isinstance(turn_id, str) else None
    return None


def is_finish(event: Event, turn_id: str) -> bool:
    """True when ``event`` is turn ``turn_id``'s ``turn-finished``."""
    return turn_of(event) == turn_id and isinstance(event, ControlEvent) and event.action == FINISHED


@dataclass(frozen=True)
class TurnState:
    """What the log says of one turn."""

    started: bool = False
    cancel_reason: str | None = None
    finished: ControlEvent | None = None


def state_of(events: Iterable[Event], turn_id: str) -> TurnState:
    """Turn ``turn_id`` as ``events`` record it."""
    started, reason, finished = False, None, None
    for event in events:
        if turn_of(event) != turn_id:
            continue
        assert isinstance(event, ControlEvent)
        if event.action == STARTED:
            started = True
        elif event.action == CANCEL_REQUESTED:
            reason = str(event.data.get("reason") or "cancelled")
        elif finished is None:
            finished = event
    return TurnState(started=started, cancel_reason=reason, finished=finished)


def finish_event(turn_id: str, status: str, **data: Any) -> ControlEvent:
    """A ``turn-finished`` record."""
    return ControlEvent(action=FINISHED, data={"turn_id": turn_id, "status": status, **data})


def start(events: Sequence[Event], turn_id: str, kind: str) -> list[Event]:
    """A worker's decision to run turn ``turn_id`` (under the session's turn lock):
    ``turn-started``; or ``turn-finished`` with status ``cancelled`` when a cancel came
    first, or ``lost`` when the turn started before (its worker stopped: the task was
    delivered again); or nothing when it is finished already (cancelled while queued,
    or a repeated delivery)."""
    state = state_of(events, turn_id)
    if state.finished is not None:
        return []
    if state.started:
        return [finish_event(turn_id, "lost", error=(
            "the worker running this turn stopped before it ended (the task was delivered again); the turn "
            "is not run twice: look at the session's events, then ask again"))]
    if state.cancel_reason is not None:
        return [finish_event(turn_id, "cancelled", reason=state.cancel_reason, started=False)]
    return [ControlEvent(action=STARTED, data={"turn_id": turn_id, "kind": kind})]


def cancel(events: Sequence[Event], turn_id: str, reason: str) -> list[Event]:
    """A cancel's decision: a turn not started yet is finished as cancelled now (it never
    runs); a running one is asked to stop; a finished (or already cancelled) one is left."""
    state = state_of(events, turn_id)
    if state.finished is not None or state.cancel_reason is not None:
        return []
    if not state.started:
        return [finish_event(turn_id, "cancelled", reason=reason, started=False)]
    return [ControlEvent(action=CANCEL_REQUESTED, data={"turn_id": turn_id, "reason": reason})]


def finish(events: Sequence[Event], turn_id: str, status: str, data: dict[str, Any]) -> list[Event]:
    """The end of a turn: its ``turn-finished``, unless it has one already."""
    if state_of(events, turn_id).finished is not None:
        return []
    return [finish_event(turn_id, status, **data)]
