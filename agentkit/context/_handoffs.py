"""The handoffs a session's log records (private, pure): which ``handoff`` control event
says who answers, and the copy of it a compaction carries.

A handoff tool call commits a ``handoff`` event (``data``: ``source``, ``target``,
``tool_name``, ``tool_call_id`` and ``path``, the ``[tool name, tool call id]`` hops from
the session's agent to the target) before its result; the event counts once a result
that is not an error confirms it. Retention archives the events a compaction covers, so
the compaction carries the last confirmed handoff among them, when the events it keeps
hold none, as a new event marked ``carried_by`` (the compaction's id): carried, it needs
no result. No I/O, no threads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..events import ControlEvent, Event, ToolResultEvent

__all__ = ["HANDOFF", "carried_handoff", "last_handoff"]

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
