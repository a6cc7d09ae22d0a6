"""Approvals: the policy, its rules, and the approval state of a session (pure logic).

:class:`ApprovalPolicy` says which tool calls run, which are denied and which need a
person's answer first. :func:`ApprovalPolicy.verdict` is the whole rule:

* a rule (``rules``: a tool-name glob -> ``allow`` | ``ask`` | ``deny``) beats the mode;
  an exact name beats a glob, a longer glob beats a shorter one, and of two equally long
  globs the stricter action wins (deny, then ask, then allow);
* without a matching rule the mode decides: ``autopilot`` allows everything,
  ``ask-writes`` asks for tools not marked read-only, ``ask-all`` asks for every tool,
  ``read-only`` denies tools not marked read-only without asking;
* an "ask" that a remembered decision of this session answers (``remember=True``) takes
  that answer. A remembered decision never turns a deny into an allow.

The approval state (:class:`ApprovalState`) is a pure fold over the session's events:
``approval-requested``, ``approval-decided`` and ``approval-remembered`` control events
(which the model never sees), plus the tool results and assistant messages that settle
or abandon a request. No I/O, no threads.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from ..errors import ApprovalError, ConfigurationError
from ..events import AssistantMessageEvent, ContextReplacedEvent, ControlEvent, Event, ToolResultEvent

__all__ = [
    "APPROVAL_DECIDED",
    "APPROVAL_REMEMBERED",
    "APPROVAL_REQUESTED",
    "ApprovalDecision",
    "ApprovalMode",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalState",
    "Verdict",
]

ApprovalMode = Literal["autopilot", "ask-writes", "ask-all", "read-only"]
RuleAction = Literal["allow", "ask", "deny"]

APPROVAL_REQUESTED = "approval-requested"
APPROVAL_DECIDED = "approval-decided"
APPROVAL_REMEMBERED = "approval-remembered"

_MODES = ("autopilot", "ask-writes", "ask-all", "read-only")
_ACTIONS = ("allow", "ask", "deny")
_STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """What the policy says about one call: ``allow``, ``ask`` or ``deny``, and why."""

    action: RuleAction
    reason: str


@dataclass(frozen=True, kw_only=True)
class ApprovalPolicy:
    """Which tool calls run without asking (see the module docstring for the rules).

    ``timeout`` (seconds) bounds how long an in-process ``approver`` may take to answer;
    no answer in time is a deny.
    """

    mode: ApprovalMode = "ask-writes"
    """``autopilot``, ``ask-writes``, ``ask-all`` or ``read-only``."""
    rules: Mapping[str, RuleAction] = field(default_factory=dict)
    """Tool-name glob (``"git__*"``, ``"delete_file"``, ``"*"``) -> ``allow``, ``ask`` or ``deny``."""
    timeout: float | None = None
    """Seconds an in-process approver has to answer; no answer is a deny."""

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise ConfigurationError(
                f"ApprovalPolicy mode must be one of {', '.join(map(repr, _MODES))}, not {self.mode!r}"
            )
        if not isinstance(self.rules, Mapping):
            raise ConfigurationError(
                f"ApprovalPolicy rules must be a dict of tool-name glob -> 'allow' | 'ask' | 'deny', "
                f"not {type(self.rules).__name__}"
            )
        for pattern, action in self.rules.items():
            if not isinstance(pattern, str) or not pattern:
                raise ConfigurationError(f"ApprovalPolicy rule keys must be non-empty tool-name globs, not {pattern!r}")
            if action not in _ACTIONS:
                raise ConfigurationError(
                    f"ApprovalPolicy rule {pattern!r} must map to 'allow', 'ask' or 'deny', not {action!r}"
                )
        timeout = self.timeout
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
        ):
            raise ConfigurationError(f"ApprovalPolicy timeout must be a number of seconds > 0 or None, not {timeout!r}")
        object.__setattr__(self, "rules", MappingProxyType(dict(self.rules)))

    def rule_for(self, tool_name: str) -> tuple[str, RuleAction] | None:
        """The rule that applies to ``tool_name`` (pattern, action), or None."""
        exact = self.rules.get(tool_name)
        if exact is not None and not _GLOB_CHARS.intersection(tool_name):
            return tool_name, exact
        best: tuple[int, int, str, RuleAction] | None = None
        for pattern, action in self.rules.items():
            if _GLOB_CHARS.intersection(pattern) and fnmatch.fnmatchcase(tool_name, pattern):
                key = (len(pattern), _STRICTNESS[action], pattern, action)
                if best is None or key[:2] > best[:2]:
                    best = key
        return None if best is None else (best[2], best[3])

    def verdict(self, tool_name: str, *, read_only: bool,
                remembered: Mapping[str, RuleAction] | None = None) -> Verdict:
        """Allow, ask or deny a call of ``tool_name`` (see the module docstring)."""
        rule = self.rule_for(tool_name)
        if rule is not None:
            pattern, action = rule
            reason = f"the approval rule {pattern!r} says {action!r} for {tool_name!r}"
        elif self.mode == "autopilot" or (read_only and self.mode in ("ask-writes", "read-only")):
            action, reason = "allow", f"mode {self.mode!r}"
        elif self.mode == "read-only":
            action = "deny"
            reason = f"the approval policy is read-only and {tool_name!r} is not marked read-only"
        else:
            action = "ask"
            reason = ("mode 'ask-all' asks before every tool call" if self.mode == "ask-all"
                      else f"mode 'ask-writes' asks before {tool_name!r}: it is not marked read-only")
        if action == "ask" and remembered and tool_name in remembered:
            answer = remembered[tool_name]
            return Verdict(action=answer, reason=f"a remembered decision says {answer!r} for {tool_name!r}")
        return Verdict(action=action, reason=reason)


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """A tool call waiting for a person's answer (``Session.pending_approvals()``)."""

    id: str
    """The request id to pass to ``approve``/``deny``."""
    tool_name: str
    input: Any
    """The call's input as it was recorded (redacted, if ``redact=`` is set)."""
    tool_call_id: str
    requested_at: float
    """When it was asked (seconds since the epoch)."""
    reason: str = ""
    """Why the policy asks."""
    generation_id: str | None = None
    """The generation that asked."""

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON-ready data (for an approval page or an API response)."""
        return {
            "id": self.id, "tool_name": self.tool_name, "input": self.input,
            "tool_call_id": self.tool_call_id, "requested_at": self.requested_at,
            "reason": self.reason, "generation_id": self.generation_id,
        }


@dataclass(frozen=True, kw_only=True)
class ApprovalDecision:
    """An answer to an :class:`ApprovalRequest`, as an in-process ``approver`` returns it
    (returning ``True``/``False`` is the short form)."""

    approved: bool
    reason: str | None = None
    """Why it was denied (the model reads ``denied: <reason>``)."""
    remember: bool = False
    """Answer later calls of this tool in this session the same way, without asking."""
    note: str | None = None
    """Free-form audit note (who decided, from where)."""

    @classmethod
    def approve(cls, *, remember: bool = False, note: str | None = None) -> ApprovalDecision:
        """Run the call."""
        return cls(approved=True, remember=remember, note=note)

    @classmethod
    def deny(cls, reason: str = "denied by the reviewer", *, remember: bool = False,
             note: str | None = None) -> ApprovalDecision:
        """Do not run the call; the model reads ``denied: <reason>``."""
        return cls(approved=False, reason=reason, remember=remember, note=note)


@dataclass
class _Entry:
    request: ApprovalRequest
    decision: ApprovalDecision | None = None
    settled: bool = False  # a result was committed, or the conversation moved on


class ApprovalState:
    """The approval state of a session, folded from its events in commit order
    (incremental: :meth:`catch_up` applies only the events not seen yet)."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._open: dict[str, _Entry] = {}  # tool_call_id -> its unsettled request
        self.remembered: dict[str, RuleAction] = {}
        """Tool name -> the remembered answer."""
        self.count = 0

    def catch_up(self, events: Sequence[Event]) -> None:
        """Apply the events after the first :attr:`count` ones."""
        if len(events) > self.count:
            for ev in events[self.count:]:
                self._apply(ev)
            self.count = len(events)

    def _apply(self, ev: Event) -> None:
        if isinstance(ev, ControlEvent):
            data = ev.data
            if ev.action == APPROVAL_REQUESTED:
                for item in data.get("requests", ()):
                    request = ApprovalRequest(
                        id=item["request_id"], tool_name=item["tool_name"], input=item.get("input"),
                        tool_call_id=item["tool_call_id"], requested_at=ev.timestamp,
                        reason=item.get("reason", ""), generation_id=data.get("generation_id"),
                    )
                    self._entries[request.id] = self._open[request.tool_call_id] = _Entry(request)
            elif ev.action == APPROVAL_DECIDED:
                decided = self._entries.get(data.get("request_id", ""))
                if decided is not None and decided.decision is None:
                    decided.decision = ApprovalDecision(
                        approved=data.get("decision") == "approved", reason=data.get("reason"),
                        remember=bool(data.get("remember")), note=data.get("note"),
                    )
            elif ev.action == APPROVAL_REMEMBERED:
                tool_name, action = data.get("tool_name"), data.get("action")
                if isinstance(tool_name, str) and action in _ACTIONS:
                    self.remembered[tool_name] = action
        elif isinstance(ev, ToolResultEvent):
            answered = self._open.pop(ev.tool_call_id, None)
            if answered is not None:
                answered.settled = True
        elif isinstance(ev, (AssistantMessageEvent, ContextReplacedEvent)):
            for entry in self._open.values():  # the conversation moved on without them
                entry.settled = True
            self._open.clear()

    # -- queries -----------------------------------------------------------------------

    def pending(self) -> list[ApprovalRequest]:
        """The requests still waiting for an answer, in the order they were asked."""
        return [e.request for e in self._open.values() if e.decision is None]

    def open_request(self, tool_call_id: str) -> tuple[ApprovalRequest, ApprovalDecision | None] | None:
        """The unsettled request for an open tool call, with its decision if any."""
        entry = self._open.get(tool_call_id)
        return None if entry is None else (entry.request, entry.decision)

    def check_decidable(self, request_id: str, *, approving: bool) -> ApprovalRequest:
        """The request ``request_id`` if it can be decided now; else :class:`ApprovalError`."""
        entry = self._entries.get(request_id) if isinstance(request_id, str) else None
        if entry is None:
            known = ", ".join(repr(r.id) for r in self.pending()) or "none"
            raise ApprovalError(
                f"unknown approval request {request_id!r}; the pending requests are: {known}. "
                f"Use the id of an item of session.pending_approvals().",
                request_id=request_id,
            )
        if entry.decision is not None:
            done = "approved" if entry.decision.approved else "denied"
            verb = "approve" if approving else "deny"
            raise ApprovalError(
                f"approval request {request_id!r} ({entry.request.tool_name!r}) was already {done}; "
                f"cannot {verb} it again. A decision is final: a new call asks again.",
                request_id=request_id,
            )
        if entry.settled:
            raise ApprovalError(
                f"approval request {request_id!r} ({entry.request.tool_name!r}) is no longer pending: "
                f"the conversation moved on without it",
                request_id=request_id,
            )
        return entry.request


def decided_data(request: ApprovalRequest, decision: ApprovalDecision, *, source: str) -> dict[str, Any]:
    """The data of an ``approval-decided`` event."""
    return {
        "request_id": request.id, "tool_call_id": request.tool_call_id, "tool_name": request.tool_name,
        "decision": "approved" if decision.approved else "denied", "reason": decision.reason,
        "remember": decision.remember, "note": decision.note, "source": source,
    }


def decision_events(request: ApprovalRequest, decision: ApprovalDecision, *, source: str) -> list[Event]:
    """The events that record ``decision``: the decision, and a remembered rule when asked."""
    events: list[Event] = [ControlEvent(action=APPROVAL_DECIDED, data=decided_data(request, decision, source=source))]
    if decision.remember:
        events.append(ControlEvent(action=APPROVAL_REMEMBERED, data={
            "tool_name": request.tool_name, "action": "allow" if decision.approved else "deny",
            "request_id": request.id,
        }))
    return events


def denied_text(decision: ApprovalDecision) -> str:
    """What the model reads for a denied call."""
    return f"denied: {decision.reason or 'the call was not approved'}"
