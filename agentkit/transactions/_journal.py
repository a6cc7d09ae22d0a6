"""Journaled steps and human-input requests of tool calls, folded from events (pure logic).

Both are ``control`` events in the session's own log, never shown to the model, keyed by
the call's idempotency key (the same for one call in every retry, resume and process):

- ``tool-step-recorded`` (``key``, ``tool_call_id``, ``name``, ``result``): what
  ``ctx.step(name, fn)`` returned; when the same call runs again, the step returns this
  result without running.
- ``input-requested`` (``request_id``, ``key``, ``ordinal``, ``tool_call_id``,
  ``tool_name``, ``intent_id``, ``input``, ``question``, ``schema``, ``expires_at``): a
  tool asked a person (``ctx.ask_human``); the call is paused, not uncertain, and its
  generation ended with ``finish_reason="input-required"``. ``ordinal`` counts the
  questions of one call, so the n-th ``ask_human`` of a rerun gets the n-th answer.
- ``input-answered`` (``request_id``, ``value``) and ``input-closed`` (``request_id``,
  ``reason``: cancelled by the host, or expired): how a request was settled; the first
  one committed holds.

No I/O, no threads: the Session commits the events, this module says what they mean and
which answers are legal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..events import ControlEvent, Event, ToolResultEvent

__all__ = ["INPUT_ANSWERED", "INPUT_CLOSED", "INPUT_REQUESTED", "STEP", "InputRequest", "Journal"]

STEP = "tool-step-recorded"
INPUT_REQUESTED = "input-requested"
INPUT_ANSWERED = "input-answered"
INPUT_CLOSED = "input-closed"
ACTIONS = frozenset({STEP, INPUT_REQUESTED, INPUT_ANSWERED, INPUT_CLOSED})


@dataclass(frozen=True, kw_only=True)
class InputRequest:
    """A question a tool asked a person with ``ctx.ask_human``, waiting for
    :meth:`agentkit.Session.answer_input` (listed by
    :meth:`agentkit.Session.pending_inputs`, in every process that opens the session)."""

    id: str
    """The request id: unguessable, so a host may hand it out (a link, a form)."""
    question: str
    schema: dict[str, Any] | None
    """The JSON Schema an answer must match, or None (any JSON value)."""
    tool_call_id: str
    tool_name: str
    requested_at: float
    """When it was asked (Unix time)."""
    expires_at: float | None
    """When it expires unanswered (Unix time), or None."""

    def expired(self, now: float) -> bool:
        """True once ``expires_at`` has passed."""
        return self.expires_at is not None and now >= self.expires_at

    def to_dict(self) -> dict[str, Any]:
        """The request as plain JSON (what a web endpoint returns)."""
        return {"id": self.id, "question": self.question, "schema": self.schema, "tool_call_id": self.tool_call_id,
                "tool_name": self.tool_name, "requested_at": self.requested_at, "expires_at": self.expires_at}


@dataclass
class _Entry:
    request: InputRequest
    key: str
    ordinal: int
    intent_id: str | None
    input: Any
    state: str = "pending"  # pending | answered | closed
    value: Any = None
    reason: str | None = None
    open_call: bool = field(default=True)  # False once the call has a result


class Journal:
    """Steps and input requests of a session's tool calls (see the module docstring),
    folded in commit order."""

    __slots__ = ("_steps", "_entries", "_by_call", "_by_key")

    def __init__(self) -> None:
        self._steps: dict[tuple[str, str], Any] = {}
        self._entries: dict[str, _Entry] = {}  # request id -> entry, in the order asked
        self._by_call: dict[str, str] = {}  # tool call id -> its latest request
        self._by_key: dict[tuple[str, int], str] = {}  # (key, ordinal) -> request id

    def apply(self, ev: Event) -> None:
        """Fold one committed event."""
        if isinstance(ev, ToolResultEvent):
            rid = self._by_call.pop(ev.tool_call_id, None)
            if rid is not None:
                self._entries[rid].open_call = False
            return
        if not isinstance(ev, ControlEvent) or ev.action not in ACTIONS:
            return
        data = ev.data
        if ev.action == STEP:
            self._steps.setdefault((str(data.get("key")), str(data.get("name"))), data.get("result"))
        elif ev.action == INPUT_REQUESTED:
            rid = str(data.get("request_id"))
            if rid in self._entries:
                return
            expires = data.get("expires_at")
            request = InputRequest(
                id=rid, question=str(data.get("question", "")),
                schema=data.get("schema") if isinstance(data.get("schema"), dict) else None,
                tool_call_id=str(data.get("tool_call_id", "")), tool_name=str(data.get("tool_name", "")),
                requested_at=ev.timestamp,
                expires_at=float(expires) if isinstance(expires, (int, float)) and math.isfinite(expires) else None,
            )
            key, ordinal = str(data.get("key")), int(data.get("ordinal") or 0)
            intent = data.get("intent_id")
            self._entries[rid] = _Entry(request, key, ordinal, str(intent) if intent else None, data.get("input"))
            self._by_call[request.tool_call_id] = rid
            self._by_key.setdefault((key, ordinal), rid)
        else:
            entry = self._entries.get(str(data.get("request_id")))
            if entry is None or entry.state != "pending":
                return  # the first settlement holds
            if ev.action == INPUT_ANSWERED:
                entry.state, entry.value = "answered", data.get("value")
            else:
                entry.state, entry.reason = "closed", str(data.get("reason") or "closed")

    # -- reading -----------------------------------------------------------------------

    def step(self, key: str, name: str) -> tuple[bool, Any]:
        """``(True, result)`` when step ``name`` of the call with ``key`` is recorded."""
        found = (key, name) in self._steps
        return found, self._steps.get((key, name))

    def answer(self, key: str, ordinal: int) -> tuple[str, Any] | None:
        """``(state, value or reason)`` of the ``ordinal``-th question of the call with
        ``key``, or None when it was never asked."""
        rid = self._by_key.get((key, ordinal))
        if rid is None:
            return None
        entry = self._entries[rid]
        return entry.state, entry.value if entry.state == "answered" else entry.reason

    def pending(self) -> list[InputRequest]:
        """The requests waiting for an answer whose call is still open, in the order asked."""
        return [e.request for e in self._entries.values() if e.state == "pending" and e.open_call]

    def open_request(self, tool_call_id: str) -> tuple[InputRequest, str, Any] | None:
        """The latest request of the open call ``tool_call_id``: ``(request, state,
        value or reason)``, or None when the call asked nothing."""
        rid = self._by_call.get(tool_call_id)
        if rid is None:
            return None
        entry = self._entries[rid]
        return entry.request, entry.state, entry.value if entry.state == "answered" else entry.reason

    def rerun_of(self, request_id: str) -> tuple[str, Any]:
        """``(idempotency key, recorded input)`` of the call that asked ``request_id``."""
        entry = self._entries[request_id]
        return entry.key, entry.input

    def paused_intent(self, ev: ControlEvent) -> str | None:
        """The intent an ``input-requested`` event pauses (its call is not running and its
        effect is not uncertain: it asked a person and stopped), or None."""
        if ev.action != INPUT_REQUESTED:
            return None
        intent = ev.data.get("intent_id")
        return str(intent) if intent else None

    def check_settleable(self, request_id: str) -> InputRequest:
        """The pending request ``request_id``; raises :class:`InputError` for an unknown
        id, a settled request or one whose call the conversation closed otherwise."""
        entry = self._entries.get(request_id) if isinstance(request_id, str) else None
        if entry is None:
            raise InputError(f"no input request {request_id!r} in this session; take the ids from "
                             f"pending_inputs()", request_id=request_id, kind="unknown")
        if entry.state == "answered":
            raise InputError(f"input request {request_id!r} was already answered; an answer cannot be "
                             f"changed", request_id=request_id, kind="answered")
        if entry.state == "closed":
            raise InputError(f"input request {request_id!r} is closed ({entry.reason}); it takes no "
                             f"answer", request_id=request_id,
                             kind="expired" if entry.reason == "expired" else "closed")
        if not entry.open_call:
            raise InputError(f"input request {request_id!r}: its tool call was closed meanwhile; it "
                             f"takes no answer", request_id=request_id, kind="closed")
        return entry.request
