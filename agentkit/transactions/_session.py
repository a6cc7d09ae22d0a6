"""The Session's side of transactional generations and intent reconciliation (private).

Each step is a decision (:meth:`~agentkit.session._eventlog.EventLog.decide`): it checks legality
against the event log's :class:`~agentkit.transactions.TransactionLedger` and returns the
control events to commit, under the log's lock, so a check and its commit cannot be
separated by another thread; when another process wrote first, the step is decided again
on the caught-up ledger. The rules are in :mod:`agentkit.transactions`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from .._json import dumps, json_problem, loads
from ..approvals._policy import ApprovalState
from ..errors import ConfigurationError, SessionError, StoreError, TransactionError
from ..events import ControlEvent, Event, RuntimeEvent, ToolResultEvent, UserMessageEvent, new_id
from ..messages import Message, Prompt, ToolOutput, _output_from_dict, _output_to_dict, normalize_prompt
from ..session._eventlog import EventLog
from ..stores.base import EventStore, TurnLease
from ..tools.base import to_tool_output
from ._ledger import (
    ACTION_OF,
    BEGUN,
    COMPLETED,
    INTENT,
    INTERRUPTED,
    OUTCOMES,
    RECONCILED,
    RESOLUTIONS,
    STARTED,
    GenerationTransaction,
    TransactionLedger,
    UncertainExecution,
    claim_digest,
)

__all__ = [
    "TaggedLog",
    "begin",
    "claim",
    "complete",
    "finalize",
    "interrupt",
    "interrupt_open",
    "reconcile",
    "states",
    "uncertain",
]


class TaggedLog:
    """The event log as the loop of a transactional generation sees it: every event it
    commits carries the generation id."""

    def __init__(self, log: EventLog, generation_id: str) -> None:
        self._log = log
        self.generation_id = generation_id
        self.session_id = log.session_id

    @property
    def durable(self) -> bool:
        return self._log.durable

    @property
    def events(self) -> tuple[Event, ...]:
        return self._log.events

    @property
    def store(self) -> EventStore | None:
        return self._log.store

    @property
    def ledger(self) -> TransactionLedger:
        return self._log.ledger

    def projection_of(self, events: Sequence[Event]) -> list[Message]:
        return self._log.projection_of(events)

    def keep_visible(self, event: Event) -> bool:
        return self._log.keep_visible(event)

    def commit(self, events: Sequence[Event]) -> list[Event]:
        batch = list(events)
        return self.decide(lambda: batch)

    def decide(self, decide: Callable[[], Sequence[Event]]) -> list[Event]:
        def tagged() -> list[Event]:
            batch = [_tag(ev, self.generation_id) for ev in decide()]
            if any(isinstance(ev, ControlEvent) and ev.action == INTENT for ev in batch):
                self._check_running("no tool of it runs")  # another process may have interrupted it
            return batch

        return self._log.decide(tagged)

    def decide_in_turn(self, decide: Callable[[], Sequence[Event]], *,
                       turn: TurnLease | None = None) -> list[Event]:
        return self._log.decide_in_turn(lambda: [_tag(ev, self.generation_id) for ev in decide()], turn=turn)

    @property
    def turn(self) -> TurnLease | None:
        return self._log.turn

    def _check_running(self, then: str) -> None:
        state = self._log.ledger.state(self.generation_id)
        if state != STARTED:
            raise TransactionError(f"generation {self.generation_id!r} was {state} while it ran; {then}")

    def project(self, *, for_model: bool = True) -> tuple[list[Message], dict[str, str], int]:
        with self._log.lock:
            if for_model:  # interrupted while it ran: no more model calls
                self._check_running("it stops here")
            return self._log.project(for_model=for_model)

    def follow_up_waiting(self) -> bool:
        return self._log.follow_up_waiting()

    def approval_state(self) -> ApprovalState:
        return self._log.approval_state()


def _tag(ev: Event, generation_id: str) -> Event:
    from dataclasses import replace

    return ev if ev.generation_id == generation_id else replace(ev, generation_id=generation_id)


def _step(generation_id: str, state: str, **data: Any) -> ControlEvent:
    return ControlEvent(action=ACTION_OF[state], data=data, generation_id=generation_id)


def begin(log: EventLog, prompt: Prompt) -> GenerationTransaction:
    """Commit ``generation-begun`` and the user message in one append."""
    content = normalize_prompt(prompt)
    token = secrets.token_urlsafe(32)
    gid = new_id()
    log.commit([
        _step(gid, BEGUN, claim_digest=claim_digest(token)),
        UserMessageEvent(content=content, generation_id=gid),
    ])
    return GenerationTransaction(generation_id=gid, claim_token=token)


def check_claim(log: EventLog, txn: GenerationTransaction) -> None:
    """Raise TransactionError unless ``txn`` may be claimed for execution now."""

    def decide() -> list[Event]:
        log.ledger.authorize(txn, STARTED)
        return []

    log.decide(decide)


def claim(log: EventLog, txn: GenerationTransaction) -> TaggedLog:
    """Commit ``generation-execution-started`` (before any model or tool work)."""

    def decide() -> list[Event]:
        log.ledger.authorize(txn, STARTED)
        return [_step(txn.generation_id, STARTED)]

    log.decide(decide)
    return TaggedLog(log, txn.generation_id)


def complete(log: EventLog, generation_id: str) -> None:
    """Commit ``generation-execution-completed``; TransactionError when the transaction
    was interrupted meanwhile (the session closed)."""

    def decide() -> list[Event]:
        state = log.ledger.state(generation_id)
        if state != STARTED:
            raise TransactionError(
                f"generation {generation_id!r} is {state} (interrupted while it ran); its "
                f"candidate will never be shown to the model"
            )
        return [_step(generation_id, COMPLETED)]

    log.decide(decide)


def interrupt(log: EventLog, generation_id: str, reason: str) -> None:
    """Commit ``interrupted`` for a transaction that is still open; best effort (a closed
    or failed session cannot commit, and says so itself)."""

    def decide() -> list[Event]:
        if generation_id not in log.ledger.open_generations():
            return []
        return [_step(generation_id, INTERRUPTED, reason=reason)]

    try:
        log.decide(decide)
    except (SessionError, StoreError):
        pass  # best effort: a closed or failed log is interrupted on the next open


def interrupt_open(log: EventLog, reason: str, only: set[str] | None = None) -> None:
    """Interrupt every open transaction (``only`` those of these generation ids), in one
    append (restore, close)."""
    log.decide(lambda: [_step(gid, INTERRUPTED, reason=reason) for gid in log.ledger.open_generations()
                        if only is None or gid in only])


def finalize(log: EventLog, txn: GenerationTransaction, outcome: str) -> None:
    """Commit the outcome (idempotent for the same one)."""
    if outcome not in OUTCOMES:
        raise ConfigurationError(
            f"outcome must be one of {', '.join(map(repr, OUTCOMES))}, not {outcome!r}"
        )
    data = {"reason": "finalized as interrupted by the host"} if outcome == INTERRUPTED else {}
    # already finalized with this outcome (here or by another process): nothing to do
    log.decide(lambda: [] if log.ledger.authorize(txn, outcome) else [_step(txn.generation_id, outcome, **data)])


_UNRUN = "the host reconciled this tool call: it did not run"
_UNKNOWN = "the host reconciled this tool call: whether it took effect is unknown and will stay unknown"


def reconcile(
    log: EventLog, intent_id: str, resolution: str, output: Any, error: str | None,
    *, turn: Callable[[], AbstractContextManager[None]] = nullcontext,
) -> None:
    """Commit a reconciliation and the result the model reads, in one append, holding
    ``turn()`` (the session's turn lock: a call of a turn running elsewhere may still
    be running, and its own result must stay its only one)."""
    if resolution not in RESOLUTIONS:
        raise ConfigurationError(
            f"resolution must be one of {', '.join(map(repr, RESOLUTIONS))}, not {resolution!r}"
        )
    if error is not None and not isinstance(error, str):
        raise ConfigurationError(f"error must be a str (what the model reads), not {type(error).__name__}")
    if resolution == "executed":
        if output is None:
            raise ConfigurationError(
                "an 'executed' reconciliation needs output=: what the tool returned (anything a "
                "tool may return); with no known output use 'abandoned-unknown'"
            )
        if error is not None:
            raise ConfigurationError("an 'executed' reconciliation takes output=, not error=")
        result = to_tool_output(output)
    else:
        if output is not None:
            raise ConfigurationError(
                f"a {resolution!r} reconciliation takes no output= (the tool did not return one); "
                f"use error= to tell the model why"
            )
        base = _UNRUN if resolution == "not-executed" else _UNKNOWN
        result = ToolOutput.error(base if error is None else f"{base}: {error}")
    record: dict[str, Any] = {"intent_id": intent_id, "resolution": resolution}
    if resolution == "executed":
        record["output"] = _output_to_dict(result)
    if error is not None:
        record["error"] = error
    try:
        record = loads(dumps(record))  # as a store gives it back (tuples become lists)
        problem = json_problem(record, envelope=4)
    except (TypeError, ValueError) as exc:
        problem = str(exc)
    if problem is not None:
        raise ConfigurationError(
            f"cannot record this reconciliation of intent {intent_id!r}: it is not plain JSON "
            f"({problem}); pass output as text, plain JSON or content parts"
        )
    if resolution == "executed":
        result = _output_from_dict(record["output"])

    def decide() -> list[Event]:
        intent = log.ledger.check_reconcile(intent_id, record)
        if intent is None:
            return []  # this same reconciliation is committed already (here or elsewhere)
        gid = intent.generation_id
        control = ControlEvent(action=RECONCILED, data=record, generation_id=gid)
        visible: Event
        if intent.tool_call_id in log.project()[1]:  # the call is still open: this is its result
            visible = ToolResultEvent(
                tool_call_id=intent.tool_call_id, tool_name=intent.tool_name, output=result,
                intent_id=intent_id, generation_id=gid,
            )
        else:  # it was closed as interrupted: say what became of it
            visible = RuntimeEvent(
                runtime_type=RECONCILED,
                data={
                    "tool_call_id": intent.tool_call_id,
                    "tool_name": intent.tool_name,
                    "resolution": resolution,
                    "result": _output_to_dict(result),
                },
                generation_id=gid,
            )
        return [control, visible]

    with turn():
        log.decide(decide)


def closed_reason(exc: BaseException) -> str:
    """The reason an interrupted transaction records for ``exc``."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def states(log: EventLog) -> dict[str, str]:
    """Every transactional generation of ``log`` and its state, caught up first."""
    log.sync()
    with log.lock:
        return log.ledger.states()


def uncertain(log: EventLog) -> list[UncertainExecution]:
    """The uncertain tool executions of ``log``, caught up first."""
    log.sync()
    with log.lock:
        return log.ledger.uncertain()
