"""Forking a session (private): what :meth:`Session.fork <agentkit.Session.fork>` does.

A fork is a new session whose log is the source's active log up to and including one
event, plus what closes the work open at that point, so that nothing pending is carried
over silently:

- a tool call open there (the model view shows it without a result, or it belongs to a
  transactional generation still unfinished there) gets an error result saying the
  fork was taken while it was open. The result settles what waited on the call: its
  approval request, its input request, its execution intent (the result names it).
- a transactional generation unfinished there is interrupted (``generation-interrupted``,
  as reopening a session after a crash does), so no claim token of the source can run
  or finalize it in the fork; its events stay hidden from the model there.

The copied events keep their ids, ``seq`` and timestamps. The fork is written in one
store operation: the store's own ``copy_prefix`` when it has one (PostgreSQL copies the
rows inside the server), else one ``append`` of every event. Everything that can be
refused is checked before anything is written.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..approvals._policy import ApprovalState
from ..context._compact import iter_history
from ..context._projection import Projector
from ..errors import ConfigurationError
from ..events import AssistantMessageEvent, ControlEvent, Event, ToolResultEvent
from ..messages import ToolOutput
from ..stores.base import EventStore, validate_session_id
from ..transactions._ledger import ACTION_OF, INTERRUPTED, TransactionLedger
from ._config import adopt_configuration

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["closing_events", "fork", "fork_stored", "plan", "write_fork"]


def fork(source: Session[Any, Any], at: str, session_id: str | None) -> Session[Any, Any]:
    """:meth:`Session.fork`: check, compute the closing events, write, build the Session."""
    log = source._log
    log.check_usable()  # a closed or failed session: SessionClosedError / SessionFailedError
    store = log.store
    log.sync()
    target, prefix, extra = plan(log.events, at, source.session_id, store, session_id,
                                 archived=lambda: source.history(), render_runtime=log._render_runtime)
    forked = source._create(
        source._model, session_id=target, store=store, base_options=source._options, tools=source._registry.values(),
        render_runtime=log._render_runtime, max_tool_workers=source._max_workers,
        listener_queue_size=log._listener_queue_size, listener_timeout=log._listener_timeout,
        retention=source._retention, deps=source._deps, deps_type=source._deps_type,
    )
    try:
        revision = 0 if store is None else write_fork(store, source.session_id, target, prefix, extra)
        forked._log.load_committed([*prefix, *extra], revision=revision)
        adopt_configuration(forked, source)  # as the prefix's configure() records leave it
    except BaseException:
        forked.close()
        raise
    return forked


def fork_stored(store: EventStore, session_id: str, at: str, new_session_id: str | None = None) -> str:
    """Fork stored session ``session_id`` at event ``at`` in ``store`` without opening it
    as a Session (which would interrupt its unfinished transactions): what ``agentkit
    fork`` does. Returns the new session's id."""
    validate_session_id(session_id)
    stored = store.load(session_id)
    if stored is None:
        raise ConfigurationError(f"no session {session_id!r} in this store; `agentkit sessions --store DIR` lists them")
    target, prefix, extra = plan(stored.events, at, session_id, store, new_session_id,
                                 archived=lambda: iter_history(store, session_id, stored.events))
    write_fork(store, session_id, target, prefix, extra)
    return target


def plan(events: Sequence[Event], at: object, source_id: str | None, store: EventStore | None,
         session_id: str | None, *, archived: Callable[[], Iterable[Event]],
         render_runtime: Any = None) -> tuple[str, list[Event], list[Event]]:
    """``(new session id, prefix, closing events)`` of a fork of ``events`` at ``at``,
    or ConfigurationError for bad input (nothing is written here)."""
    if not isinstance(at, str) or not at:
        raise ConfigurationError(f"fork(at=...) takes the id of one of the session's events (a str), not {at!r}")
    if session_id is not None:
        validate_session_id(session_id)
    index = next((i for i, e in enumerate(events) if e.id == at), None)
    if index is None:
        where = f"session {source_id!r}" if source_id else "this session"
        if any(e.id == at for e in archived()):
            raise ConfigurationError(f"event {at!r} of {where} was archived by retention: a fork starts from an "
                                     f"event of the active log (session.events)")
        raise ConfigurationError(f"{where} has no event {at!r}: fork(at=...) takes the id of one of its events")
    target = session_id or uuid.uuid4().hex
    _check_target(store, source_id, target)
    prefix = list(events[: index + 1])
    return target, prefix, closing_events(prefix, source_id, render_runtime)


def _check_target(store: EventStore | None, source_id: str | None, target: str) -> None:
    if target == source_id:
        raise ConfigurationError(f"a fork needs a new session id: {target!r} is the source session's own")
    if store is not None and store.head(target) is not None:
        raise ConfigurationError(
            f"session {target!r} already exists in the store: a fork starts a new session; pick another "
            f"session_id (or leave it out for a new one)"
        )


def closing_events(prefix: Sequence[Event], source_id: str | None, render_runtime: Any = None) -> list[Event]:
    """What a fork of ``prefix`` (a session's events up to the fork point) appends after
    it, numbered on from its last ``seq``: an error result for each open tool call, then
    ``generation-interrupted`` for each unfinished transactional generation."""
    at = prefix[-1].id
    ledger = TransactionLedger(prefix)
    unfinished = ledger.open_generations()
    reason = f"the session was forked at event {at} while this generation was unfinished"
    interrupts = [ControlEvent(action=ACTION_OF[INTERRUPTED], data={"reason": reason}, generation_id=gid)
                  for gid in unfinished]
    unanswered = _unanswered(prefix)
    started = {call_id: ledger.started(call_id) for call_id in unanswered}
    ledger.apply(interrupts)  # now: what the model may see in the fork
    projector = Projector(render_runtime, hidden=ledger.hidden)
    projector.extend(prefix)
    visible = projector.pending_tool_calls
    approvals = ApprovalState()
    approvals.catch_up(prefix)
    where = f"session {source_id!r}" if source_id else "the session"
    results: list[Event] = []
    for call_id, (name, gid) in unanswered.items():
        if call_id not in visible and gid not in unfinished:
            continue  # closed in the model's view (a later answer moved on) and no work waits on it
        intent = started[call_id]
        state = _state_of(call_id, intent, approvals, ledger)
        text = (f"this tool call was still open ({state}) when {where} was forked at event {at}: it does not "
                f"run or finish in this fork. Call the tool again if it is still needed.")
        results.append(ToolResultEvent(tool_call_id=call_id, tool_name=name, output=ToolOutput.error(text),
                                       intent_id=intent, generation_id=gid))
    seq = prefix[-1].seq
    return [ev.with_seq(seq + i) for i, ev in enumerate([*results, *interrupts], 1)]


def _unanswered(prefix: Sequence[Event]) -> dict[str, tuple[str, str | None]]:
    """The tool calls of ``prefix`` without a result: id -> (tool name, generation id)."""
    calls: dict[str, tuple[str, str | None]] = {}
    for ev in prefix:
        if isinstance(ev, AssistantMessageEvent):
            for call in ev.tool_calls:
                calls[call.tool_call_id] = (call.tool_name, ev.generation_id)
        elif isinstance(ev, ToolResultEvent):
            calls.pop(ev.tool_call_id, None)
    return calls


def _state_of(call_id: str, intent: str | None, approvals: ApprovalState, ledger: TransactionLedger) -> str:
    if intent is not None:
        return "running"
    asked = ledger.journal.open_request(call_id)
    if asked is not None and asked[1] != "closed":
        return "paused for a person's answer" if asked[1] == "pending" else "answered, not yet resumed"
    waiting = approvals.open_request(call_id)
    if waiting is not None:
        return "waiting for an approval decision" if waiting[1] is None else "decided, not yet run"
    return "not yet run"


def write_fork(store: EventStore, source_id: str | None, target: str, prefix: Sequence[Event],
               extra: Sequence[Event]) -> int:
    """Write the fork ``target`` (``prefix`` of ``source_id``'s active log, then ``extra``)
    in one operation; returns its revision. A store with ``copy_prefix`` copies the
    prefix itself (PostgreSQL: inside the server); any other gets one append."""
    copy = getattr(store, "copy_prefix", None)
    if callable(copy) and source_id is not None:
        return int(copy(source_id, target, count=len(prefix), first_event_id=prefix[0].id,
                        last_event_id=prefix[-1].id, events=extra))
    return store.append(target, [*prefix, *extra], expected_revision=0)
