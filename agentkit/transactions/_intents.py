"""Execution intents for the step loop (private).

Before a model step's tool calls run, :class:`Intents` gives each call an intent id (its
``ToolContext.idempotency_key``). In a durable session it first commits one
``tool-execution-intent`` control event per call, all in ONE append, and only then may any
tool run; the results then carry the intent id. Without a store the ids are kept in memory
only: nothing outlives the process, so nothing is written. See :mod:`agentkit.transactions`
for what the events mean.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..events import ControlEvent, Event, new_id
from ..messages import ToolCallPart
from ._ledger import INTENT

__all__ = ["Intents"]


class Intents:
    """The intent ids of the current model step's tool calls, by tool call id."""

    __slots__ = ("_commit", "_durable", "_ids", "_keys")

    def __init__(self, commit: Callable[[Sequence[Event]], object], *, durable: bool) -> None:
        self._commit = commit
        self._durable = durable
        self._ids: dict[str, str] = {}
        self._keys: dict[str, str] = {}

    def declare(self, calls: Sequence[ToolCallPart], keys: Mapping[str, str] | None = None) -> None:
        """Give ``calls`` (the ones about to run) intent ids; in a durable session commit
        their intents first, in one append. ``keys``: the idempotency keys of calls that
        run again (after a reconcile probe or a person's answer), kept from their first
        run; every other call's key is its intent id."""
        keys = keys or {}
        if not self._durable:
            self._ids = {c.tool_call_id: new_id() for c in calls}
        else:
            events = [
                ControlEvent(action=INTENT, data={
                    "tool_call_id": c.tool_call_id, "tool_name": c.tool_name, "input": c.input,
                    **({"idempotency_key": keys[c.tool_call_id]} if c.tool_call_id in keys else {}),
                })
                for c in calls
            ]
            if events:
                self._commit(events)
            self._ids = {c.tool_call_id: ev.id for c, ev in zip(calls, events, strict=True)}
        self._keys = {cid: keys.get(cid, intent) for cid, intent in self._ids.items()}

    def key(self, tool_call_id: str) -> str | None:
        """The idempotency key of a call of this step (None for a call that does not run)."""
        return self._keys.get(tool_call_id)

    def intent(self, tool_call_id: str) -> str | None:
        """The intent id of a call of this step, committed or (in memory) not."""
        return self._ids.get(tool_call_id)

    def recorded(self, tool_call_id: str) -> str | None:
        """The committed intent a result of this call must name, or None."""
        return self._ids.get(tool_call_id) if self._durable else None
