"""Exactly once for tool calls (private): a call's journal (``ctx.step``,
``ctx.ask_human``) and the settling of calls left open that can go on by themselves.

- :class:`CallJournal` is what a running call's :class:`~agentkit.ToolContext` commits
  its steps and questions through, keyed by the call's idempotency key and fenced by the
  generation's turn (:meth:`~agentkit.loop._host.LoopHost.decide_in_turn`).
- :func:`settle` looks at the open calls of a stopped generation before the model is
  asked again: a question answered (the call runs again), still pending (the generation
  waits: ``input-required``) or expired (an error result); a call a crash interrupted
  whose tool has a reconcile probe (``executed``: a result; ``not-executed``: the call runs
  again as the same call; unknown: left uncertain, as without a probe). Everything else is
  left to the approval gate and the orphan rule, as before.

See docs/transactions.md, "Exactly once".
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError

from ..errors import ConfigurationError, InputError
from ..events import ControlEvent, Event, ToolResultEvent
from ..messages import ToolCallPart, ToolOutput
from ..tools.base import ToolContext, ToolRegistry
from ..transactions._inputs import close_input, plain_json
from ..transactions._journal import INPUT_REQUESTED, STEP
from ..transactions._ledger import RECONCILED, UncertainExecution
from ._host import LoopHost

__all__ = ["CallJournal", "InputRequired", "Settled", "settle"]

log = logging.getLogger("agentkit.tools")

PROBE_EXECUTED = (
    "this call was interrupted before its result was recorded; the tool's reconcile probe "
    "found that it took effect (its output is not known)"
)


class InputRequired(BaseException):  # noqa: N818 - a signal through the tool, not an error
    """Raised by ``ctx.ask_human`` once its question is recorded: the call pauses (no
    result) and the generation ends with ``input-required``. A ``BaseException``, so a
    tool's ``except Exception`` does not swallow it."""

    pauses_call = True
    """Says to a tracing span that this is a pause, not a failure."""

    def __init__(self, request_id: str) -> None:
        super().__init__(request_id)
        self.request_id = request_id


class CallJournal:
    """One running call's steps and questions in the session's log."""

    def __init__(self, host: LoopHost, *, tool_call_id: str, tool_name: str, key: str,
                 intent_id: str | None, recorded_input: Any) -> None:
        self._host = host
        self._call = tool_call_id
        self._tool = tool_name
        self._key = key
        self._intent = intent_id
        self._input = recorded_input
        self._asked = 0  # the ordinal of this run's next question
        self._turn = host.turn  # the generation's turn: a commit after it ended is refused

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """``ctx.step``: the recorded result, or ``fn()``'s, recorded before it is returned."""
        found, result = self._host.ledger.journal.step(self._key, name)
        if found:
            return result
        value = plain_json(fn(), f"the result of step {name!r}")

        def decide() -> list[Event]:  # again on the caught-up log if another process wrote first
            if self._host.ledger.journal.step(self._key, name)[0]:
                return []
            return [ControlEvent(action=STEP, data={"key": self._key, "tool_call_id": self._call,
                                                    "name": name, "result": value})]

        self._host.decide_in_turn(decide, turn=self._turn)
        return self._host.ledger.journal.step(self._key, name)[1]

    def ask_human(self, question: str, schema: Mapping[str, Any] | None, timeout: float | None) -> Any:
        """``ctx.ask_human``: the answer, once given; else the question is recorded and
        :class:`InputRequired` raised."""
        if not isinstance(question, str) or not question.strip():
            raise ConfigurationError("ctx.ask_human() needs a non-empty question (str): a person reads it")
        plain_schema = None if schema is None else _schema(schema)
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not math.isfinite(timeout) or timeout <= 0):
            raise ConfigurationError(f"ctx.ask_human(timeout=) must be a number of seconds > 0 or None, "
                                     f"not {timeout!r}")
        ordinal, self._asked = self._asked, self._asked + 1
        known = self._host.ledger.journal.answer(self._key, ordinal)
        if known is not None:
            state, value = known
            if state == "answered":
                return value
            raise InputError(f"the question {question!r} is {state} ({value}); it has no answer")
        now = time.time()
        rid = secrets.token_hex(16)  # a host may hand it out: unguessable
        self._host.decide_in_turn(lambda: [ControlEvent(action=INPUT_REQUESTED, timestamp=now, data={
            "request_id": rid, "key": self._key, "ordinal": ordinal, "tool_call_id": self._call,
            "tool_name": self._tool, "intent_id": self._intent, "input": self._input,
            "question": question, "schema": plain_schema,
            "expires_at": None if timeout is None else now + float(timeout),
        })], turn=self._turn)
        raise InputRequired(rid)


def _schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(schema, Mapping):
        raise ConfigurationError(f"ctx.ask_human(schema=) must be a JSON Schema dict, not {type(schema).__name__}")
    plain = plain_json(dict(schema), "the schema")
    try:
        jsonschema.Draft202012Validator.check_schema(plain)
    except SchemaError as exc:
        raise ConfigurationError(f"ctx.ask_human(schema=) is not a valid JSON Schema: {exc.message}") from None
    return dict(plain)


@dataclass
class Settled:
    """What :func:`settle` did with a stopped generation's open calls."""

    handled: set[str] = field(default_factory=set)
    """Calls settled here (or waiting for a person): not the approval gate's."""
    reruns: list[ToolCallPart] = field(default_factory=list)
    """Calls to run again as the same call, in model order."""
    keys: dict[str, str] = field(default_factory=dict)
    """Their idempotency keys, kept from their first run."""
    waiting: bool = False
    """True when a question is still unanswered."""


def settle(host: LoopHost, pending: dict[str, str], tools: ToolRegistry,
           context: Callable[[ToolCallPart, str], ToolContext]) -> Settled:
    """Settle what of ``pending`` (open call id -> tool name, in model order) can go on
    by itself (see the module docstring). ``context(call, key)`` is the context a probe
    is called with."""
    out = Settled()
    ledger = host.ledger
    for cid, name in pending.items():
        asked = ledger.journal.open_request(cid)
        if asked is not None:
            request, state, _ = asked
            out.handled.add(cid)
            if state == "answered":
                key, recorded = ledger.journal.rerun_of(request.id)
                _rerun(out, cid, name, recorded, key)
            elif state == "pending" and request.expired(time.time()):
                close_input(host, request.id, "expired", expired=True)
            elif state == "pending":
                out.waiting = True
            continue
        due = ledger.rerun_due(cid)
        if due is not None:  # a probe said not-executed, and the rerun did not finish yet
            out.handled.add(cid)
            _rerun(out, cid, name, due.input, due.idempotency_key)
            continue
        started = ledger.started(cid)
        tool = tools.get(name)
        intent = None if started is None else ledger.intent(started)
        if intent is None or tool is None or tool.reconcile is None:
            continue
        verdict = _probe(tool.reconcile, intent, context)
        if verdict is None:
            continue  # unknown: uncertain, as without a probe
        _commit_verdict(host, intent, verdict)
        out.handled.add(cid)
        if verdict == "not-executed":
            _rerun(out, cid, name, intent.input, intent.idempotency_key)
    return out


def _rerun(out: Settled, cid: str, name: str, recorded: Any, key: str) -> None:
    out.reruns.append(ToolCallPart(tool_call_id=cid, tool_name=name,
                                   input=recorded if isinstance(recorded, dict) else {}))
    out.keys[cid] = key


def _probe(probe: Callable[..., Any], intent: UncertainExecution,
           context: Callable[[ToolCallPart, str], ToolContext]) -> str | None:
    """The probe's verdict, or None (unknown, or the probe failed: logged)."""
    call = ToolCallPart(tool_call_id=intent.tool_call_id, tool_name=intent.tool_name,
                        input=intent.input if isinstance(intent.input, dict) else {})
    try:
        verdict = probe(dict(call.input), context(call, intent.idempotency_key))
    except Exception as exc:  # noqa: BLE001 - a failed probe leaves the call uncertain
        log.warning("the reconcile probe of tool %r raised %s: %s; call %r stays uncertain",
                    intent.tool_name, type(exc).__name__, exc, intent.tool_call_id)
        return None
    if verdict not in ("executed", "not-executed", None):
        log.warning("the reconcile probe of tool %r returned %r (not 'executed', 'not-executed' or None); "
                    "call %r stays uncertain", intent.tool_name, verdict, intent.tool_call_id)
        return None
    return None if verdict is None else str(verdict)


def _commit_verdict(host: LoopHost, intent: UncertainExecution, verdict: str) -> None:
    """The probe's verdict as the reconciliation a person's answer makes, once per
    intent (a second process that probed too finds it committed and adds nothing);
    ``executed`` also gives the call its result."""
    record = {"intent_id": intent.intent_id, "resolution": verdict, "source": "probe"}

    def decide() -> list[Event]:
        if host.ledger.unresolved(intent.intent_id) is None:
            return []
        events: list[Event] = [ControlEvent(action=RECONCILED, data=record, generation_id=intent.generation_id)]
        if verdict == "executed":
            events.append(ToolResultEvent(tool_call_id=intent.tool_call_id, tool_name=intent.tool_name,
                                          output=ToolOutput.text(PROBE_EXECUTED), intent_id=intent.intent_id,
                                          generation_id=intent.generation_id))
        return events

    host.decide(decide)
