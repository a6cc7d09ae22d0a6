"""Transactional generations and tool execution intents, folded from events (pure logic).

Both are records in the session's own event log (``control`` events, never shown to the
model); their state is a fold over the events, computed incrementally by a
:class:`TransactionLedger` (one pass over the log when a session is restored, then
O(new events) per commit). No I/O, no threads: the Session commits the events, this
module says what they mean and which steps are legal.

Transactions. ``generation-begun`` (with the SHA-256 digest of the claim token, never
the token) starts one; its state then moves::

    begun -> execution-started -> execution-completed -> accepted | rejected
    begun | execution-started | execution-completed -> interrupted

``accepted``, ``rejected`` and ``interrupted`` are terminal. Events tagged with a
generation id (``Event.generation_id``) are shown to the model only while that
generation runs (``execution-started``) and once it is ``accepted``.

Intents. A ``tool-execution-intent`` control event (its id is the intent id) says a tool
call is about to run. A tool result carrying that ``intent_id``, or a
``tool-execution-reconciled`` control event, resolves it; an intent without either is
uncertain: its effect may or may not have happened. A compaction that covers an
uncertain intent carries it: a copy with ``carried_by`` (the compaction's id) and the
original ``intent_id`` in its data stands for it in the active log, and the first one
commits a ``retention-held`` control event (``tool_call_id``, ``intent_id``) saying so.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigurationError, TransactionError
from ..events import ControlEvent, Event, ToolResultEvent
from ._journal import ACTIONS as _JOURNAL_ACTIONS
from ._journal import Journal

__all__ = [
    "GenerationTransaction",
    "TransactionLedger",
    "UncertainExecution",
    "claim_digest",
    "reserved_problem",
]

BEGUN = "begun"
STARTED = "execution-started"
COMPLETED = "execution-completed"
ACCEPTED = "accepted"
REJECTED = "rejected"
INTERRUPTED = "interrupted"
TERMINAL = frozenset({ACCEPTED, REJECTED, INTERRUPTED})
OUTCOMES = (ACCEPTED, REJECTED, INTERRUPTED)
"""What ``Session.finalize_generation`` accepts."""

# the control action that moves a transaction to each state
ACTION_OF = {
    BEGUN: "generation-begun",
    STARTED: "generation-execution-started",
    COMPLETED: "generation-execution-completed",
    ACCEPTED: "generation-accepted",
    REJECTED: "generation-rejected",
    INTERRUPTED: "generation-interrupted",
}
_STATE_OF = {action: state for state, action in ACTION_OF.items()}
_ALLOWED_FROM = {
    STARTED: frozenset({BEGUN}),
    COMPLETED: frozenset({STARTED}),
    ACCEPTED: frozenset({COMPLETED}),
    REJECTED: frozenset({COMPLETED}),
    INTERRUPTED: frozenset({BEGUN, STARTED, COMPLETED}),
}
_VISIBLE = frozenset({STARTED, ACCEPTED})

INTENT = "tool-execution-intent"
RECONCILED = "tool-execution-reconciled"
RETENTION_HELD = "retention-held"
RESOLUTIONS = ("executed", "not-executed", "abandoned-unknown")


def _intent_id_of(event: ControlEvent) -> str:
    """The intent an intent record stands for: its own id, or for a copy a compaction
    carried, the original's."""
    carried = event.data.get("intent_id") if "carried_by" in event.data else None
    return str(carried) if carried is not None else event.id


def claim_digest(token: str) -> str:
    """The SHA-256 hex digest of a claim token: what the log stores instead of it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True, kw_only=True)
class GenerationTransaction:
    """The handle :meth:`agentkit.Session.begin_generation` returns.

    ``claim_token`` is a bearer credential: whoever holds it may run and finalize the
    generation. Only its SHA-256 digest is stored, so it cannot be recovered from the
    log; it is left out of ``repr``."""

    generation_id: str
    """The id of the generation; its events carry it as ``Event.generation_id``."""
    claim_token: str = field(repr=False)
    """The secret that authorizes :meth:`~agentkit.Session.generate` and
    :meth:`~agentkit.Session.finalize_generation` for this generation."""


@dataclass(frozen=True, kw_only=True)
class UncertainExecution:
    """A tool call whose execution intent was committed but that has no result: it may or
    may not have taken effect (the process stopped while it ran). Resolve it with
    :meth:`agentkit.Session.reconcile_tool_execution`."""

    intent_id: str
    """The intent's id (the call's ``ToolContext.idempotency_key`` unless the call ran
    again: see :attr:`idempotency_key`)."""
    tool_call_id: str
    tool_name: str
    input: Any
    """The input the tool was called with (plain JSON)."""
    generation_id: str | None
    """The transactional generation the call ran in, or None."""
    idempotency_key: str = ""
    """The call's ``ToolContext.idempotency_key``: the same in every run of the call (a
    rerun after a reconcile probe or a person's answer keeps its first run's key)."""


@dataclass
class _Txn:
    state: str
    digest: str
    reason: str | None = None


_RESERVED = frozenset({*ACTION_OF.values(), INTENT, RECONCILED, RETENTION_HELD, *_JOURNAL_ACTIONS})


def reserved_problem(event: Event) -> str | None:
    """Why ``event`` may not be pushed from outside (it would act as a transaction or
    intent record without its authority), or None."""
    if event.generation_id is not None:
        return (
            f"a {event.type} event with generation_id={event.generation_id!r} cannot be pushed: "
            f"the events of a transactional generation are written by begin_generation and "
            f"generate(transaction=...); push it without generation_id"
        )
    if isinstance(event, ToolResultEvent) and event.intent_id is not None:
        return (
            f"a tool-result event with intent_id={event.intent_id!r} cannot be pushed: it would "
            f"settle an execution intent; use reconcile_tool_execution"
        )
    if isinstance(event, ControlEvent) and event.action in _RESERVED:
        return (
            f"a control event with action {event.action!r} cannot be pushed: transaction, "
            f"execution-intent, step and input records are written by the Session "
            f"(begin_generation, finalize_generation, reconcile_tool_execution, answer_input)"
        )
    return None


class TransactionLedger:
    """Transaction states and unresolved intents of one session, folded from its events
    in commit order (see the module docstring). ``version`` changes whenever a
    transaction changes state, that is whenever what the model may see changes."""

    __slots__ = ("_txns", "_intents", "_unresolved", "_reconciled", "_live", "_started", "_held", "_latest",
                 "journal", "version")

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self._txns: dict[str, _Txn] = {}
        self._intents: dict[str, UncertainExecution] = {}
        self._unresolved: dict[str, UncertainExecution] = {}  # in commit order
        self._reconciled: dict[str, dict[str, Any]] = {}
        self._live: set[str] = set()  # intents this object committed whose call still runs
        # tool call id -> the intent of a call that started and has no result yet (any
        # result of that call id after its intent closes the call, even one without intent_id)
        self._started: dict[str, str] = {}
        self._held: set[str] = set()  # intents a compaction carried (and reported)
        self._latest: dict[str, str] = {}  # tool call id -> its latest intent
        self.journal = Journal()
        """The calls' journaled steps and human-input requests."""
        self.version = 0
        self.apply(events)

    # -- the fold ----------------------------------------------------------------------

    def apply(self, events: Iterable[Event], *, live: bool = False) -> None:
        """Fold ``events`` (in commit order) into the state. ``live``: they were just
        committed by this process, so an intent among them belongs to a call that is
        running here now, not to one whose outcome is unknown."""
        for ev in events:
            self.journal.apply(ev)
            if isinstance(ev, ControlEvent):
                self._control(ev)
                if live and ev.action == INTENT and "carried_by" not in ev.data:
                    self._live.add(ev.id)
            elif isinstance(ev, ToolResultEvent):
                self._started.pop(ev.tool_call_id, None)
                if ev.intent_id is not None:
                    self._unresolved.pop(ev.intent_id, None)
                    self._live.discard(ev.intent_id)

    def _control(self, ev: ControlEvent) -> None:
        action, gid = ev.action, ev.generation_id
        if action == INTENT:
            data = ev.data
            carried = "carried_by" in data
            intent_id = _intent_id_of(ev)
            if carried:
                self._held.add(intent_id)
                if intent_id in self._intents:
                    return  # known here already (and maybe resolved since): nothing new
                gid = data.get("generation_id")
            intent = UncertainExecution(
                intent_id=intent_id,
                tool_call_id=str(data.get("tool_call_id", "")),
                tool_name=str(data.get("tool_name", "")),
                input=data.get("input"),
                generation_id=gid,
                idempotency_key=str(data.get("idempotency_key") or intent_id),
            )
            self._intents[intent_id] = intent
            self._unresolved[intent_id] = intent
            if not carried:  # a carried call is closed: its result went into the summary
                self._started[intent.tool_call_id] = intent_id
                self._latest[intent.tool_call_id] = intent_id
        elif (paused := self.journal.paused_intent(ev)) is not None:
            # the call asked a person and stopped: not running, and not uncertain
            self._unresolved.pop(paused, None)
            self._live.discard(paused)
            known = self._intents.get(paused)
            if known is not None and self._started.get(known.tool_call_id) == paused:
                del self._started[known.tool_call_id]
        elif action == RETENTION_HELD:
            self._held.add(str(ev.data.get("intent_id")))
        elif action == RECONCILED:
            intent_id = str(ev.data.get("intent_id"))
            self._unresolved.pop(intent_id, None)
            known = self._intents.get(intent_id)
            if known is not None and self._started.get(known.tool_call_id) == intent_id:
                del self._started[known.tool_call_id]
            self._reconciled.setdefault(intent_id, dict(ev.data))
        elif action in _STATE_OF and gid is not None:
            state = _STATE_OF[action]
            txn = self._txns.get(gid)
            if state == BEGUN:
                if txn is None:
                    self._txns[gid] = _Txn(state=BEGUN, digest=str(ev.data.get("claim_digest", "")))
                    self.version += 1
            elif txn is not None and txn.state in _ALLOWED_FROM[state]:
                txn.state = state
                txn.reason = ev.data.get("reason") if state == INTERRUPTED else None
                self.version += 1
            # anything else (a step the state does not allow) was never committed by
            # agentkit; a hand-edited log does not get to move a transaction

    # -- reading -----------------------------------------------------------------------

    def states(self) -> dict[str, str]:
        """Generation id -> state, in the order the transactions began."""
        return {gid: txn.state for gid, txn in self._txns.items()}

    def state(self, generation_id: str) -> str | None:
        """The state of transaction ``generation_id``, or None when none began with it."""
        txn = self._txns.get(generation_id)
        return None if txn is None else txn.state

    def open_generations(self) -> list[str]:
        """The transactions not in a terminal state, in the order they began."""
        return [gid for gid, txn in self._txns.items() if txn.state not in TERMINAL]

    def hidden(self, generation_id: str) -> bool:
        """True when events of ``generation_id`` must not be shown to the model (a
        generation id no transaction began with is not hidden)."""
        txn = self._txns.get(generation_id)
        return txn is not None and txn.state not in _VISIBLE

    def uncertain(self) -> list[UncertainExecution]:
        """Intents without a result or reconciliation, in commit order, except the calls
        this process is running now."""
        return [i for k, i in self._unresolved.items() if k not in self._live]

    def started(self, tool_call_id: str) -> str | None:
        """The intent of the open call ``tool_call_id`` when one is committed: the call
        started (here, or in a process that stopped) and has no result yet, so it must
        not run again on its own. None for a call that never started."""
        return self._started.get(tool_call_id)

    def rerun_due(self, tool_call_id: str) -> UncertainExecution | None:
        """The latest intent of the open call ``tool_call_id`` when a reconcile probe
        settled it as ``not-executed`` (the call is to run again, with the same key), or
        None. A person's reconciliation gives the call its result, so it is never open."""
        intent_id = self._latest.get(tool_call_id)
        record = None if intent_id is None else self._reconciled.get(intent_id)
        if record is None or record.get("resolution") != "not-executed" or record.get("source") != "probe":
            return None
        return self._intents[intent_id]  # type: ignore[index]

    def unresolved(self, intent_id: str) -> UncertainExecution | None:
        """The intent ``intent_id`` while it has no result or reconciliation (a call this
        process runs now included), or None."""
        return self._unresolved.get(intent_id)

    def held(self, intent_id: str) -> bool:
        """True once a compaction carried intent ``intent_id`` (it was reported then)."""
        return intent_id in self._held

    def intent(self, intent_id: str) -> UncertainExecution | None:
        """The intent ``intent_id`` (resolved or not), or None."""
        return self._intents.get(intent_id)

    # -- what is legal -----------------------------------------------------------------

    def authorize(self, txn: GenerationTransaction, target: str) -> bool:
        """Check that ``txn`` may move its transaction to ``target``: False when the step
        is to be committed, True when the transaction already is in the terminal state
        ``target`` (finalizing again with the same outcome changes nothing). Raises
        :class:`TransactionError` for a wrong or stale token or an illegal step."""
        if not isinstance(txn, GenerationTransaction):
            raise ConfigurationError(
                f"transaction must be the GenerationTransaction that begin_generation returned, "
                f"not {type(txn).__name__}"
            )
        gid = txn.generation_id
        record = self._txns.get(gid)
        if record is None:
            raise TransactionError(
                f"no transactional generation {gid!r} began in this session; use the handle "
                f"that this session's begin_generation returned"
            )
        if not isinstance(txn.claim_token, str) or not hmac.compare_digest(
            claim_digest(txn.claim_token), record.digest
        ):
            raise TransactionError(
                f"the claim token of generation {gid!r} is wrong: only the handle "
                f"begin_generation returned may run or finalize it"
            )
        state = record.state
        if state == target and target in TERMINAL:
            return True
        if state not in _ALLOWED_FROM[target]:
            raise TransactionError(_illegal(gid, state, target, record.reason))
        if target == ACCEPTED:
            blocking = [i.intent_id for i in self._unresolved.values() if i.generation_id == gid]
            if blocking:
                raise TransactionError(
                    f"generation {gid!r} cannot be accepted: tool execution intent(s) "
                    f"{', '.join(blocking)} have no known outcome. Reconcile them with "
                    f"reconcile_tool_execution, or finalize the generation as 'interrupted'."
                )
        return False

    def check_reconcile(self, intent_id: str, record: dict[str, Any]) -> UncertainExecution | None:
        """The intent to reconcile with ``record``, or None when this same reconciliation
        is already committed. Raises :class:`TransactionError` for an unknown intent, one
        resolved by a real tool result, or a different earlier reconciliation."""
        intent = self._intents.get(intent_id)
        if intent is None:
            raise TransactionError(
                f"no tool execution intent {intent_id!r} in this session; take the ids from "
                f"uncertain_tool_executions()"
            )
        earlier = self._reconciled.get(intent_id)
        if earlier is not None:
            if earlier == record:
                return None
            raise TransactionError(
                f"tool execution intent {intent_id!r} was already reconciled as "
                f"{earlier.get('resolution')!r} with a different output or error; a "
                f"reconciliation cannot be changed"
            )
        if intent_id in self._live and intent_id in self._unresolved:
            raise TransactionError(
                f"tool execution intent {intent_id!r} ({intent.tool_name!r}) belongs to a call "
                f"running in this session now; its result will say what happened"
            )
        if intent_id not in self._unresolved:
            raise TransactionError(
                f"tool execution intent {intent_id!r} ({intent.tool_name!r}, call "
                f"{intent.tool_call_id!r}) has a result already; there is nothing to reconcile"
            )
        return intent


def _illegal(gid: str, state: str, target: str, reason: str | None) -> str:
    why = f" ({reason})" if reason else ""
    if target == STARTED and state != BEGUN:
        return (
            f"generation {gid!r} was already claimed for execution (it is {state}{why}); "
            f"a transaction runs at most once: begin a new one"
        )
    if state in TERMINAL:
        return f"generation {gid!r} is {state}{why}, a final state; it cannot become {target}"
    if target in (ACCEPTED, REJECTED):
        return (
            f"generation {gid!r} is {state}: only a completed generation can be {target}; "
            f"run it with generate(transaction=...) first"
        )
    return f"generation {gid!r} is {state}; it cannot become {target}"
