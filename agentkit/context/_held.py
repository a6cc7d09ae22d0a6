"""Uncertain tool calls across a compaction (private).

An execution intent without a result (:mod:`agentkit.transactions`) must stay known and
visible until someone reconciles it, but it must not stop compaction and retention from
covering everything around it. So a compaction covers it and carries it:

* the model keeps seeing the call: the compactor summarises the covered messages without
  it, and the compaction's summary ends with the call and its "interrupted" result;
* the session keeps knowing it: a copy of the intent (``carried_by`` the compaction,
  ``intent_id`` the original's) is committed with the compaction, so a session opened
  from the active log alone still lists it and reconciles it under the same id;
* it is reported once per call (whichever process compacts first): a ``retention-held``
  control event with the compaction, and a WARNING on the ``agentkit`` logger.

Once reconciled, it is no longer carried, and the next compaction covers it like any
other call.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from ..events import ControlEvent, Event
from ..messages import Message, ToolCallPart, ToolResultPart
from ..transactions._ledger import INTENT, RETENTION_HELD, TransactionLedger, UncertainExecution, _intent_id_of

__all__ = ["Carried", "carry", "report"]

log = logging.getLogger("agentkit")


@dataclass(frozen=True)
class Carried:
    """What a compaction carries for the uncertain calls among the events it covers."""

    intents: tuple[UncertainExecution, ...]
    """The unresolved intents whose records are covered, in commit order."""
    messages: list[Message]
    """The covered messages without those calls and their results: what the compactor
    summarises."""
    shown: tuple[Message, ...]
    """Those calls and their results (one assistant and one tool message, or nothing):
    what the summary ends with."""

    def records(self, compaction_id: str, ledger: TransactionLedger) -> list[Event]:
        """The events committed with the compaction: a copy of each intent, and a
        ``retention-held`` report for each one no compaction carried before."""
        out: list[Event] = []
        for i in self.intents:
            out.append(ControlEvent(action=INTENT, data={
                "tool_call_id": i.tool_call_id, "tool_name": i.tool_name, "input": i.input,
                "intent_id": i.intent_id, "generation_id": i.generation_id, "carried_by": compaction_id,
            }))
        for i in self.fresh(ledger):
            out.append(ControlEvent(action=RETENTION_HELD,
                                    data={"tool_call_id": i.tool_call_id, "intent_id": i.intent_id}))
        return out

    def fresh(self, ledger: TransactionLedger) -> list[UncertainExecution]:
        """The intents carried for the first time (not reported yet)."""
        return [i for i in self.intents if not ledger.held(i.intent_id)]


def carry(covered: Sequence[Event], messages: list[Message], ledger: TransactionLedger | None) -> Carried:
    """What to carry when ``covered`` (projecting to ``messages``) is compacted."""
    found: dict[str, UncertainExecution] = {}
    if ledger is not None:
        for ev in covered:
            if isinstance(ev, ControlEvent) and ev.action == INTENT:
                intent = ledger.unresolved(_intent_id_of(ev))
                if intent is not None:
                    found.setdefault(intent.intent_id, intent)
    if not found:
        return Carried(intents=(), messages=messages, shown=())
    calls, results, left = _take(messages, {i.tool_call_id for i in found.values()})
    shown = () if not calls else (Message(role="assistant", content=tuple(calls)),
                                  Message(role="tool", content=tuple(results)))
    return Carried(intents=tuple(found.values()), messages=left, shown=shown)


def report(intents: Sequence[UncertainExecution], session_id: str | None) -> None:
    """The WARNING for calls a compaction carried for the first time."""
    for i in intents:
        log.warning(
            "session %r: tool call %r (%s, intent %s) has an unknown outcome; compaction keeps "
            "it visible and covers the rest until it is reconciled (reconcile_tool_execution)",
            session_id, i.tool_call_id, i.tool_name, i.intent_id,
        )


def _take(messages: list[Message], ids: set[str]) -> tuple[list[ToolCallPart], list[ToolResultPart], list[Message]]:
    """The calls in ``ids`` with their results (only calls found with a result: the
    last such call of each id), and ``messages`` without them."""
    call_at: dict[str, int] = {}
    for n, m in enumerate(messages):
        if m.role == "assistant":
            for p in m.content:
                if isinstance(p, ToolCallPart) and p.tool_call_id in ids:
                    call_at[p.tool_call_id] = n
    result_at: dict[str, int] = {}
    for n, m in enumerate(messages):
        if m.role == "tool":
            for p in m.content:
                cid = getattr(p, "tool_call_id", None)
                if cid in call_at and n > call_at[cid]:
                    result_at.setdefault(cid, n)
    take = {cid for cid in call_at if cid in result_at}
    calls: list[ToolCallPart] = []
    results: list[ToolResultPart] = []
    left: list[Message] = []
    for n, m in enumerate(messages):
        keep = []
        for p in m.content:
            cid = getattr(p, "tool_call_id", None)
            if cid in take and m.role == "assistant" and call_at[cid] == n and isinstance(p, ToolCallPart):
                calls.append(p)
            elif cid in take and m.role == "tool" and result_at[cid] == n and isinstance(p, ToolResultPart):
                results.append(p)
            else:
                keep.append(p)
        if len(keep) == len(m.content):
            left.append(m)
        elif keep:
            left.append(Message(role=m.role, content=tuple(keep)))
    order = {p.tool_call_id: k for k, p in enumerate(calls)}
    results.sort(key=lambda p: order[p.tool_call_id])
    return calls, results, left
