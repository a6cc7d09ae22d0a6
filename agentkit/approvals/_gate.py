"""The approval gate of one generation: what the loop calls around tool calls (private).

Before a step's calls are dispatched, :meth:`ApprovalGate.plan` judges them in model
order with the policy (:mod:`agentkit.approvals`): calls the policy allows run, calls it
denies get ``denied: <reason>`` from the gate, and calls it asks about are recorded in one
``approval-requested`` event, then answered by the in-process ``approver`` (one at a time,
in model order, each within the policy's ``timeout``) or, without one, left open: the
generation stops with ``finish_reason="approval-required"``. :meth:`ApprovalGate.resume`
settles such open calls in the next generation from the decisions in the log. The gate
itself (:meth:`ApprovalGate.__call__`) is the first ``before_tool_call`` step of the
runner, so every tool kind passes it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._threads import CallTimeout, run_and_wait
from ..cancel import CancelToken
from ..errors import CancelledError, HookError
from ..events import ControlEvent, Event
from ..messages import ToolCallPart, ToolOutput
from ..tools.base import ToolContext, ToolRegistry
from ._policy import (
    APPROVAL_REQUESTED,
    ApprovalDecision,
    ApprovalPolicy,
    ApprovalRequest,
    ApprovalState,
    decision_events,
    denied_text,
)

Approver = Callable[[ApprovalRequest], "bool | ApprovalDecision"]


class _Host(Protocol):
    def commit(self, events: Sequence[Event]) -> list[Event]: ...

    def decide(self, decide: Callable[[], Sequence[Event]]) -> list[Event]: ...

    def approval_state(self) -> ApprovalState: ...


@dataclass
class StepPlan:
    """What the gate decided for one step's calls."""

    suspended: list[ToolCallPart] = field(default_factory=list)
    """Calls waiting for an answer in the log: they do not run in this generation."""


@dataclass
class Resume:
    """How the open calls of a stopped generation are settled."""

    calls: list[ToolCallPart]
    """Every open call, in model order (approved and denied ones pass the gate)."""
    answered: dict[str, ToolOutput]
    """Results for open calls no request covers (interrupted)."""


class ApprovalGate:
    """One generation's approval decisions (see the module docstring)."""

    def __init__(self, host: _Host, tools: ToolRegistry, policy: ApprovalPolicy | None,
                 approver: Approver | None, cancel: CancelToken, generation_id: str,
                 record: Callable[[ToolCallPart], ToolCallPart]) -> None:
        self._host = host
        self._tools = tools
        self._policy = policy
        self._approver = approver
        self._cancel = cancel
        self._generation_id = generation_id
        self._record = record
        self._denied: dict[str, ToolOutput] = {}

    def __call__(self, call: ToolCallPart, ctx: ToolContext) -> ToolCallPart | ToolOutput:
        """The runner's gate: a denied call gets its error result and never runs."""
        return self._denied.get(call.tool_call_id, call)

    def denies(self, call_id: str) -> bool:
        """True when the gate answers call ``call_id`` with its denial (it never runs)."""
        return call_id in self._denied

    # -- a new step --------------------------------------------------------------------

    def plan(self, calls: Sequence[ToolCallPart]) -> StepPlan:
        """Judge ``calls`` in model order; ask, or record the requests (see the module
        docstring). Calls whose input is invalid are left to the runner, unasked."""
        plan = StepPlan()
        if self._policy is None:
            return plan
        remembered = self._host.approval_state().remembered
        asks: list[tuple[ToolCallPart, ApprovalRequest]] = []
        now = time.time()
        judged: set[str] = set()
        for call in calls:
            if call.tool_call_id in judged:
                continue  # a repeated id in one message: the runner's ledger answers it
            judged.add(call.tool_call_id)
            tool = self._tools.get(call.tool_name)
            if tool is None or call.input_error is not None or tool.validation_error(call.input) is not None:
                continue
            verdict = self._policy.verdict(call.tool_name, read_only=tool.read_only, remembered=remembered)
            if verdict.action == "deny":
                self._deny(call.tool_call_id, ApprovalDecision.deny(verdict.reason))
            elif verdict.action == "ask":
                recorded = self._record(call)
                asks.append((call, ApprovalRequest(
                    id=secrets.token_hex(16),  # a host may hand it out: unguessable
                    tool_name=call.tool_name, input=recorded.input, tool_call_id=call.tool_call_id,
                    requested_at=now, reason=verdict.reason, generation_id=self._generation_id,
                )))
        if not asks:
            return plan
        self._host.commit([ControlEvent(action=APPROVAL_REQUESTED, timestamp=now, data={
            "generation_id": self._generation_id,
            "requests": [{"request_id": r.id, "tool_call_id": r.tool_call_id, "tool_name": r.tool_name,
                          "input": r.input, "reason": r.reason} for _, r in asks],
        })])
        if self._approver is None:
            plan.suspended = [call for call, _ in asks]
            return plan
        for call, request in asks:  # one at a time, in model order
            decision = self._answer(request)
            if not decision.approved:
                self._deny(call.tool_call_id, decision)
        return plan

    def _answer(self, request: ApprovalRequest) -> ApprovalDecision:
        """Ask the approver and commit its answer; the decision that holds is returned:
        a person's decision committed first (by another process) wins over it."""
        decision, source = self._ask(request)

        def decide() -> list[Event]:
            entry = self._host.approval_state().open_request(request.tool_call_id)
            if entry is not None and entry[1] is not None:
                return []  # decided meanwhile, elsewhere
            return decision_events(request, decision, source=source)

        self._host.decide(decide)
        entry = self._host.approval_state().open_request(request.tool_call_id)
        return entry[1] if entry is not None and entry[1] is not None else decision

    def _deny(self, call_id: str, decision: ApprovalDecision) -> None:
        self._denied[call_id] = ToolOutput.error(denied_text(decision))

    def _ask(self, request: ApprovalRequest) -> tuple[ApprovalDecision, str]:
        """The approver's answer, within the policy's timeout (no answer: a deny)."""
        approver = self._approver
        assert approver is not None
        timeout = None if self._policy is None else self._policy.timeout

        def answer() -> object:
            try:
                return approver(request)
            except BaseException as exc:  # noqa: BLE001 - the approver's error is its answer
                return exc

        # the approver may block (a prompt): it runs on its own thread so that a timeout
        # or a cancellation stops the wait
        try:
            answered = run_and_wait(answer, cancel=self._cancel, timeout=timeout, name="agentkit-approver")
        except CallTimeout:
            return ApprovalDecision.deny(f"no answer within {timeout:g}s", note="timeout"), "timeout"
        return _as_decision(approver, answered), "approver"

    # -- a stopped generation ----------------------------------------------------------

    def resume(self, pending: dict[str, str], interrupted: Callable[[], ToolOutput],
               decided: Callable[[set[str]], None] | None = None) -> Resume | None:
        """How to settle the open calls ``pending`` (id -> tool name, in model order), or
        None when no request covers any of them (the caller closes them as interrupted).
        ``decided`` gets the ids of the requests already decided in the log (a host's),
        before the undecided ones go to the approver, in order; without one, raises
        :class:`WaitingForApproval`."""
        state = self._host.approval_state()
        entries = {cid: state.open_request(cid) for cid in pending}
        if all(e is None for e in entries.values()):
            return None
        undecided = [e[0] for e in entries.values() if e is not None and e[1] is None]
        if undecided and self._approver is None:
            raise WaitingForApproval
        if decided is not None:
            decided({e[0].id for e in entries.values() if e is not None and e[1] is not None})
        for asked in undecided:  # asked before and not answered: the approver answers now
            entries[asked.tool_call_id] = (asked, self._answer(asked))
        calls: list[ToolCallPart] = []
        answered: dict[str, ToolOutput] = {}
        for cid, name in pending.items():
            entry = entries[cid]
            if entry is None:
                calls.append(ToolCallPart(tool_call_id=cid, tool_name=name, input={}))
                answered[cid] = interrupted()
                continue
            request, decision = entry
            assert decision is not None
            calls.append(ToolCallPart(tool_call_id=cid, tool_name=name, input=request.input))
            if not decision.approved:
                self._deny(cid, decision)
        return Resume(calls=calls, answered=answered)


class WaitingForApproval(Exception):  # noqa: N818 - a signal, not an error
    """Raised by :meth:`ApprovalGate.resume` while an open call's request is undecided."""


def _as_decision(approver: Approver, answer: Any) -> ApprovalDecision:
    if isinstance(answer, BaseException):
        if isinstance(answer, (CancelledError, KeyboardInterrupt, SystemExit)):
            raise answer
        raise HookError(f"the approver {_name(approver)} raised {type(answer).__name__}: {answer}",
                        hook="approver") from answer
    if isinstance(answer, ApprovalDecision):
        return answer
    if isinstance(answer, bool):
        return ApprovalDecision.approve() if answer else ApprovalDecision.deny()
    raise HookError(f"the approver {_name(approver)} returned {type(answer).__name__}; return True, False "
                    f"or an ApprovalDecision", hook="approver")


def _name(fn: Callable[..., Any]) -> str:
    return repr(getattr(fn, "__qualname__", None) or type(fn).__name__)
