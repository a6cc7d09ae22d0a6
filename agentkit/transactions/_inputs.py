"""Human input, the host's side (private): what :meth:`Session.pending_inputs
<agentkit.Session.pending_inputs>`, ``answer_input`` and ``cancel_input`` do on the event
log, and how a request is closed. Each answer is checked against the state folded from the
log and committed in one :meth:`~agentkit.session._eventlog.EventLog.decide` step, so two
processes answering the same request cannot both win: the second decides again on the
caught-up log and gets :class:`~agentkit.errors.InputError`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import jsonschema

from .._json import dumps, json_problem, loads
from ..errors import ConfigurationError, InputError
from ..events import ControlEvent, Event, ToolResultEvent
from ..messages import ToolOutput
from ._journal import INPUT_ANSWERED, INPUT_CLOSED, InputRequest

if TYPE_CHECKING:
    from ..session._eventlog import EventLog

__all__ = ["answer", "cancel", "check_answer", "close_input", "pending", "plain_json"]


def pending(log: EventLog) -> list[InputRequest]:
    """The requests of ``log`` waiting for an answer (not expired), in the order asked."""
    log.sync()
    now = time.time()
    with log.lock:
        return [r for r in log.ledger.journal.pending() if not r.expired(now)]


def answer(log: EventLog, request_id: str, value: Any) -> Event:
    """Commit ``value`` as the answer to ``request_id``; returns the answer event."""

    def decide() -> list[Event]:  # again on the caught-up state if another process wrote first
        request = log.ledger.journal.check_settleable(request_id)
        if request.expired(time.time()):
            raise InputError(f"input request {request_id!r} expired unanswered; it takes no answer "
                             f"(the next generate() closes it)", request_id=request_id, kind="expired")
        recorded = check_answer(request, value)
        return [ControlEvent(action=INPUT_ANSWERED, data={"request_id": request_id, "value": recorded})]

    return log.decide(decide)[0]


def cancel(log: EventLog, request_id: str, reason: str) -> None:
    """Close ``request_id`` unanswered; its call gets an error result saying why."""
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigurationError("cancel_input() needs a non-empty reason: the model reads it")
    close_input(log, request_id, reason)


def plain_json(value: Any, what: str) -> Any:
    """``value`` as a store gives it back (plain JSON), or ConfigurationError."""
    try:
        plain = loads(dumps(value, allow_nan=False))
        problem = json_problem(plain)
    except (TypeError, ValueError, RecursionError) as exc:
        problem = str(exc)
    if problem is not None:
        raise ConfigurationError(f"{what} cannot be recorded: it is not plain JSON ({problem}); return "
                                 f"dicts, lists, strings, numbers, booleans or None")
    return plain


def check_answer(request: InputRequest, value: Any) -> Any:
    """``value`` as it is recorded, or :class:`InputError` saying what is wrong with it
    (the request stays pending)."""
    try:
        plain = plain_json(value, "the answer")
    except ConfigurationError as exc:
        raise InputError(str(exc), request_id=request.id) from None
    if request.schema is not None:
        errors = list(jsonschema.Draft202012Validator(request.schema).iter_errors(plain))
        if errors:
            where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in errors[0].absolute_path)
            raise InputError(f"the answer to input request {request.id!r} does not match its schema: "
                             f"{where}: {errors[0].message}; the request is still pending",
                             request_id=request.id)
    return plain


def close_input(host: Any, request_id: str, reason: str, *, expired: bool = False) -> None:
    """Close pending request ``request_id`` (cancelled by the host, or expired): its call
    gets an error result the model reads, in the same append."""

    def decide() -> list[Event]:
        journal = host.ledger.journal
        try:
            request = journal.check_settleable(request_id)
        except InputError:
            if expired:
                return []  # answered or closed meanwhile: nothing to expire
            raise
        why = ("no one answered it before its deadline" if expired
               else f"the host cancelled it: {reason}")
        return [
            ControlEvent(action=INPUT_CLOSED, data={"request_id": request_id, "reason": reason}),
            ToolResultEvent(tool_call_id=request.tool_call_id, tool_name=request.tool_name,
                            output=ToolOutput.error(f"this call asked a person {request.question!r} and "
                                                    f"stopped there; {why}. What it did before "
                                                    f"asking stands; it did not go on.")),
        ]

    host.decide(decide)


