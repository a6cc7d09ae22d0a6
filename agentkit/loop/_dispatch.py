"""Tool dispatch: one assistant message's tool calls run (one after another, or in
parallel on the session's executor) and their results committed in the order the model
wrote them; each call passes the ledger of this generation's calls (a repeated id
reuses its result), the ``tool_calls`` budget, the approval gate and the
``before_tool_call`` hooks; a cancelled generation stops waiting at once and says which
calls ran. The calls a stopped generation left open are settled here too."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

from .._threads import wait_future
from ..approvals._gate import ApprovalGate
from ..cancel import CancelToken
from ..context._budget import Budget
from ..errors import CancelledError
from ..events import ToolResultEvent
from ..messages import ToolCallPart, ToolOutput
from ..observability._tracing import RunTrace
from ..options import LoopOptions
from ..results import ToolCallRecord
from ..streaming._control import announce_decisions
from ..streaming._events import Emit, ToolEndEvent, ToolStartEvent, ToolUpdateEvent
from ..tools.base import ToolContext, ToolDecision
from ..tools.runner import Gate, decision_gate, run_tool_call
from ..transactions._intents import Intents
from ._calls import CallJournal, InputRequired, settle
from ._host import LoopHost
from ._output import OutputRun
from ._recording import GenerationRecord, close_orphans, interrupted

__all__ = ["ToolDispatch", "WaitingForInput"]

_Plan = list[tuple[ToolCallPart, str, ToolOutput | None]]
"""Each call of a message with what to do with it (see :meth:`ToolDispatch._plan`)."""


class _Ledger:
    """Per-generation record of tool calls by id: a repeated id with identical input
    reuses the first result; the same id with different input is rejected."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[Any, ToolOutput | None]] = {}

    def check(self, call: ToolCallPart) -> tuple[str, ToolOutput | None]:
        """('run', None), ('reuse', output) or ('reject', error output)."""
        prior = self._seen.get(call.tool_call_id)
        if prior is None:
            self._seen[call.tool_call_id] = (call.input, None)
            return "run", None
        if prior[0] == call.input and prior[1] is not None:
            return "reuse", prior[1]
        if prior[0] == call.input:
            return "wait", None
        return "reject", ToolOutput.error(
            f"tool call id {call.tool_call_id!r} was already used in this generation with "
            f"different input; the call was not run. Use a new id for a new call."
        )

    def seen(self, call: ToolCallPart) -> bool:
        """True when ``call``'s id was already used in this generation."""
        return call.tool_call_id in self._seen

    def record(self, call: ToolCallPart, output: ToolOutput) -> None:
        self._seen[call.tool_call_id] = (call.input, output)

    def result(self, call: ToolCallPart) -> ToolOutput | None:
        return self._seen[call.tool_call_id][1]


class ToolDispatch:
    """One generation's tool calls: planned, gated, run, recorded and committed."""

    def __init__(self, host: LoopHost, opts: LoopOptions, cancel: CancelToken,
                 executor: Callable[[], Executor], record: GenerationRecord, *,
                 emit: Emit | None, trace: RunTrace | None, budget: Budget | None,
                 output: OutputRun | None, tool_names: tuple[str, ...], generation_id: str) -> None:
        self.host = host
        self.opts = opts
        self.cancel = cancel
        self.executor = executor
        self.record = record
        self.emit = emit
        self.trace = trace
        self.budget = budget
        self.output = output
        self.output_tool = None if output is None else output.tool  # the output tool's name (tool mode)
        self.tool_names = tool_names
        self.hooks = opts.hooks
        self.store = host.store  # what ToolContext.store shows tools (looked up once)
        self.report_usage = record.report_usage
        self.ledger = _Ledger()
        self.approvals = ApprovalGate(host, opts.tools, opts.approval, opts.approver, cancel,
                                      generation_id, record.call)
        hooks_gate = decision_gate(self._decide) if opts.hooks.before_tool_call else None
        self.gate = _chain(self.approvals, hooks_gate)
        self.intents = Intents(host.commit, durable=host.durable)
        self.paused: set[str] = set()
        """Calls that asked a person (``ctx.ask_human``) and stopped: no result yet."""
        self.cached: dict[str, dict[str, Any]] = {}
        """The cache markers of calls answered from their tool's cache, by call id."""

    def waiting(self, calls: list[ToolCallPart]) -> set[str]:
        """The ids of ``calls`` the approval gate holds for a decision (they are answered
        in a later generation); calls this generation already ran or judged (a repeated
        id) are the ledger's."""
        fresh = [c for c in calls if not self.ledger.seen(c)]
        return {c.tool_call_id for c in self.approvals.plan(fresh).suspended} if fresh else set()

    def settle_open_calls(self, pending: dict[str, str]) -> None:
        """Settle the tool calls a stopped generation left open. First what can go on by
        itself (:func:`~agentkit.loop._calls.settle`): answered questions and calls a
        reconcile probe settled run again as the same call. Then the approval gate's:
        run the approved ones, deny the denied ones and close the rest as interrupted, in
        model order (raises WaitingForApproval while one waits for an answer). An
        approved call whose intent is committed already started (the process that ran it
        stopped): it is closed as interrupted too and stays uncertain; without a probe
        it never runs again on its own. Raises WaitingForInput while a question waits."""
        settled = settle(self.host, pending, self.opts.tools, self._probe_context)
        rest = {cid: name for cid, name in pending.items() if cid not in settled.handled}
        if rest:
            self._settle_rest(rest)
        if settled.reruns:
            self.run_tools(settled.reruns, keys=settled.keys)
        if settled.waiting or self.paused:
            raise WaitingForInput

    def _settle_rest(self, pending: dict[str, str]) -> None:
        emit = self.emit  # a host's decisions, announced as the calls go on
        resume = self.approvals.resume(pending, interrupted, None if emit is None else (
            lambda ids: announce_decisions(self.host.events, ids, emit)))
        if resume is None:
            close_orphans(self.host, pending)
            return
        started = self.host.ledger.started
        for call in resume.calls:
            if started(call.tool_call_id) is not None:
                resume.answered[call.tool_call_id] = interrupted()
        self.run_tools(resume.calls, resume.answered)

    def run_tools(self, calls: list[ToolCallPart], answered: dict[str, ToolOutput] | None = None,
                  keys: dict[str, str] | None = None) -> list[ToolCallRecord]:
        """Run one assistant message's tool calls and commit their results in the order
        the model wrote them (``keys``: the idempotency keys of calls that run again). On
        cancellation, stop waiting at once: calls that finished keep their real results,
        the others get error results saying they were cancelled (so the conversation
        stays valid and honest), then CancelledError is raised. A call that asked a
        person (``ctx.ask_human``) gets no result: it is in :attr:`paused`."""
        opts = self.opts
        parallel = opts.tool_execution == "parallel" and len(calls) > 1
        answered = answered or {}
        plan = self._plan(calls, answered)
        # intents record the input as it is committed (redacted, like the assistant
        # message); a call the approval gate denied never runs, so it has none
        self.intents.declare([self.record.call(call) for call, action, _ in plan
                              if action == "run" and call.tool_name != self.output_tool
                              and not self.approvals.denies(call.tool_call_id)], keys)
        futures: dict[int, Future[ToolOutput]] = {}
        records: list[ToolCallRecord] = []
        stopped: CancelledError | None = None
        try:
            if parallel:
                self._submit(plan, futures)
            for i, (call, action, ready) in enumerate(plan):
                future = futures.get(i)
                if not parallel:
                    self._started(call)
                if stopped is None and future is None and action == "run" and self.cancel.cancelled:
                    stopped = CancelledError(self.cancel.reason)
                    output = self._cancelled_output(call, None, stopped, started=False)
                elif stopped is None:
                    try:
                        output = self._outcome(call, action, ready, future)
                    except InputRequired:  # recorded: the call waits for a person's answer
                        self.paused.add(call.tool_call_id)
                        continue
                    except CancelledError as exc:
                        stopped = exc
                        output = self._cancelled_output(call, future, exc, started=future is None)
                elif action in ("reuse", "reject", "answered"):
                    assert ready is not None
                    output = ready
                else:
                    done = self.ledger.result(call) if action == "wait" else None
                    output = done or self._cancelled_output(call, future, stopped, started=False)
                if action == "run" and stopped is None:
                    self.ledger.record(call, output)
                output = self.record.output(output)
                intent_id = self.intents.recorded(call.tool_call_id) if action == "run" else None
                cache = self.cached.pop(call.tool_call_id, None) if action == "run" and not output.is_error else None
                self.host.commit([ToolResultEvent(
                    tool_call_id=call.tool_call_id, tool_name=call.tool_name, output=output, intent_id=intent_id,
                    cache=cache,
                )])
                record = ToolCallRecord(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    input=self.record.call(call).input,
                    output=output,
                    reused=action in ("reuse", "wait"),
                    cache=cache,
                )
                records.append(record)
                self.record.records.append(record)
                if self.emit is not None:
                    self.emit(ToolEndEvent(record=record))
        finally:
            for future in futures.values():
                future.cancel()
        if stopped is not None:
            raise stopped
        return records

    def _submit(self, plan: _Plan, futures: dict[int, Future[ToolOutput]]) -> None:
        executor = self.executor()
        for i, (call, action, _) in enumerate(plan):
            self._started(call)
            if action == "run":
                try:
                    # each call gets a copy of the caller's context (contextvars)
                    futures[i] = executor.submit(contextvars.copy_context().run, self._execute, call)
                except RuntimeError:  # the pool was shut down: a tool closed the session
                    if self.cancel.cancelled:
                        raise CancelledError(self.cancel.reason) from None
                    raise

    def _started(self, call: ToolCallPart) -> None:
        if self.emit is not None:
            self.emit(ToolStartEvent(call=self.record.call(call)))

    def _outcome(
        self, call: ToolCallPart, action: str, ready: ToolOutput | None, future: Future[ToolOutput] | None
    ) -> ToolOutput:
        if action == "run":
            if future is None:
                return self._execute(call)
            return wait_future(future, self.cancel)
        if action == "wait":  # its twin earlier in this message ran
            output = self.ledger.result(call)
            if output is None:
                raise CancelledError(self.cancel.reason)
            return output
        assert ready is not None
        return ready

    @staticmethod
    def _cancelled_output(
        call: ToolCallPart, future: Future[ToolOutput] | None, exc: CancelledError, *, started: bool
    ) -> ToolOutput:
        if future is not None and future.done() and not future.cancelled() and future.exception() is None:
            return future.result()  # it finished: its effect happened, so say what it was
        if future is not None and not future.cancel():
            started = True  # running (or stopped by the cancellation) in a worker thread
        reason = exc.reason or "cancelled"
        if started:
            return ToolOutput.error(
                f"the generation was cancelled ({reason}) while this tool call was running; "
                f"it may or may not have taken effect"
            )
        return ToolOutput.error(f"the generation was cancelled ({reason}) before this tool call ran; it did not run")

    def _plan(self, calls: list[ToolCallPart], answered: dict[str, ToolOutput]) -> _Plan:
        """Each call with what to do with it: answered already (an approval), the
        ledger's verdict, or a refusal for a call past the ``tool_calls`` budget."""
        plan: _Plan = []
        for call in calls:
            if call.tool_call_id in answered:
                plan.append((call, "answered", answered[call.tool_call_id]))
                continue
            action, ready = self.ledger.check(call)
            if (action == "run" and self.budget is not None and call.tool_name != self.output_tool
                    and not self.budget.take_tool_call()):
                action, ready = "reject", ToolOutput.error(self.budget.refusal_message())
            plan.append((call, action, ready))
        return plan

    def _context(self, call: ToolCallPart) -> ToolContext:
        emit = self.emit
        cid = call.tool_call_id
        key = self.intents.key(cid)
        journal = None if key is None else CallJournal(
            self.host, tool_call_id=cid, tool_name=call.tool_name, key=key,
            intent_id=self.intents.recorded(cid), recorded_input=self.record.call(call).input)
        return self._probe_context(call, key)._bind_runtime(
            progress=None if emit is None else (lambda u: emit(ToolUpdateEvent(tool_call_id=cid, update=u))),
            emit=emit,
            usage=self.report_usage,
            journal=journal,
        )

    def _probe_context(self, call: ToolCallPart, key: str | None) -> ToolContext:
        """The context of ``call`` with idempotency key ``key`` (a probe gets this one)."""
        return ToolContext(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            cancel=self.cancel,
            session_id=self.host.session_id,
            execution_context=self.opts.execution_context,
            idempotency_key=key,
            model=self.opts.model,
            store=self.store,
            deps=self.opts.deps,
        )

    def _decide(self, call: ToolCallPart, ctx: ToolContext) -> ToolDecision | None:
        """``before_tool_call`` hooks as one decision (a rewrite comes back as one)."""
        rewritten, decision = self.hooks.tool_call(call, ctx)
        if decision is None and rewritten is not call:
            return ToolDecision.rewrite(rewritten.input)
        return decision

    def _execute(self, call: ToolCallPart) -> ToolOutput:
        """Run one tool call (under its ``execute_tool`` span when tracing; the output
        tool of structured output is not a tool call of the user's and gets no span)."""
        if call.tool_name == self.output_tool:
            assert self.output is not None
            return self.output.take(call)  # not a user tool: no hooks, no gate
        if self.trace is None:
            return self._execute_call(call)
        return self.trace.tool(call, lambda: self._execute_call(call), self.record.output,
                               lambda: self.record.call(call).input)

    def _execute_call(self, call: ToolCallPart) -> ToolOutput:
        tool = self.opts.tools.get(call.tool_name)
        ctx = self._context(call)
        output = run_tool_call(tool, call, ctx, self.tool_names, self.gate,
                               lambda marker: self.cached.__setitem__(call.tool_call_id, marker))
        if self.hooks.after_tool_call:
            output = self.hooks.tool_result(call, output, ctx)
        return output


class WaitingForInput(Exception):  # noqa: N818 - a signal, not an error
    """Raised by :meth:`ToolDispatch.settle_open_calls` while a call waits for a person's
    answer to its question."""


def _chain(first: Gate, second: Gate | None) -> Gate:
    """``first``, then ``second`` on what it let through."""
    if second is None:
        return first

    def gate(call: ToolCallPart, ctx: ToolContext) -> ToolCallPart | ToolOutput:
        out = first(call, ctx)
        return out if isinstance(out, ToolOutput) else second(out, ctx)

    return gate
