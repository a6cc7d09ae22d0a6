"""The handoffs a session's log records (private, pure): which ``handoff`` control event
says who answers, and the copy of it a compaction carries.

A handoff tool call commits a ``handoff`` event (``data``: ``source``, ``target``,
``tool_name``, ``tool_call_id`` and ``path``, the ``[tool name, tool call id]`` hops from
the session's agent to the target) before its result; the event counts once a result
that is not an error confirms it. Retention archives the events a compaction covers, so
the compaction carries the last confirmed handoff among them, when the events it keeps
hold none, as a new event marked ``carried_by`` (the compaction's id): carried, it needs
no result. :class:`HandoffFold` keeps the same reading incrementally, so a long log is
read once, not at every generation. No I/O, no threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from ..events import ControlEvent, Event, ToolResultEvent

__all__ = ["HANDOFF", "HandoffFold", "carried_handoff", "last_handoff"]

HANDOFF = "handoff"
"""The control action of a handoff event."""


def last_handoff(events: Sequence[Event], hidden: Callable[[Event], bool] | None = None) -> ControlEvent | None:
    """The last ``handoff`` event of ``events`` that a result that is not an error
    confirms, or that a compaction carried (``hidden(event)``: events the model does not
    see, which do not count)."""
    confirmed: dict[str, bool] = {}
    for ev in reversed(events):
        if hidden is not None and hidden(ev):
            continue
        if isinstance(ev, ToolResultEvent):
            confirmed.setdefault(ev.tool_call_id, not ev.output.is_error)
        elif isinstance(ev, ControlEvent) and ev.action == HANDOFF and (
            confirmed.get(ev.data.get("tool_call_id", "")) or "carried_by" in ev.data
        ):
            return ev
    return None


def carried_handoff(events: Sequence[Event], covered: int, compaction_id: str) -> list[Event]:
    """The handoff a compaction covering ``events[:covered]`` carries: a copy of the last
    confirmed one among them, when ``events[covered:]`` hold none (else nothing)."""
    if last_handoff(events[covered:]) is not None:
        return []
    last = last_handoff(events[:covered])
    if last is None:
        return []
    return [ControlEvent(action=HANDOFF, data={**last.data, "carried_by": compaction_id})]


class HandoffFold:
    """The handoff events of one log, folded as it grows: the confirmed ones in the order
    they were confirmed, and the call ids of all of them. A log that lost its head
    (retention) or was replaced (a full reload) is folded again from its start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._count = 0
        self._tail: str | None = None  # the id of the last event folded
        self._open: dict[str, ControlEvent] = {}  # handoff events waiting for their call's result
        self._confirmed: list[ControlEvent] = []
        self._calls: set[str] = set()

    def catch_up(self, events: Sequence[Event]) -> HandoffFold:
        """Fold what ``events`` hold beyond what was folded; returns this fold."""
        with self._lock:
            count = self._count
            if count > len(events) or (count and events[count - 1].id != self._tail):
                self._reset()
                count = 0
            for ev in events[count:]:
                self._add(ev)
            self._count = len(events)
            self._tail = events[-1].id if events else None
        return self

    def _add(self, ev: Event) -> None:
        if isinstance(ev, ControlEvent) and ev.action == HANDOFF:
            call_id = str(ev.data.get("tool_call_id", ""))
            self._calls.add(call_id)
            if "carried_by" in ev.data:
                self._confirmed.append(ev)
            else:
                self._open[call_id] = ev
        elif isinstance(ev, ToolResultEvent) and ev.tool_call_id in self._open:
            made = self._open.pop(ev.tool_call_id)
            if not ev.output.is_error:
                self._confirmed.append(made)

    def last(self, hidden: Callable[[Event], bool] | None = None, *,
             before: ControlEvent | None = None) -> ControlEvent | None:
        """The last confirmed handoff event (``hidden``: events that do not count;
        ``before``: the last one confirmed before that one)."""
        with self._lock:
            confirmed = list(self._confirmed)
        if before is not None:
            confirmed = confirmed[: next((i for i, ev in enumerate(confirmed) if ev.id == before.id), 0)]
        for ev in reversed(confirmed):  # hidden() outside the lock: it may read the log
            if hidden is None or not hidden(ev):
                return ev
        return None

    def made(self, call_id: str) -> bool:
        """True when call ``call_id`` committed a handoff event."""
        with self._lock:
            return call_id in self._calls
