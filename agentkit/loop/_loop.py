"""The step loop: infer, commit, run tools, commit, repeat.

The loop talks to its host through :class:`LoopHost`, the session's event log
(:class:`~agentkit._eventlog.EventLog`): it reads projected messages and commits events;
tool calls run on the executor the Session hands it. Tool results are committed before the next model request,
so a retried or resumed generation never re-runs a finished tool.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, replace
from typing import Any, Protocol

from .._json import json_problem
from .._threads import ModelStream, wait_future
from ..approvals._gate import ApprovalGate, WaitingForApproval
from ..approvals._policy import ApprovalState
from ..cancel import CancelToken
from ..context._budget import Budget, BudgetBreach
from ..context._compact import ContextShaper
from ..context._invariants import check_messages
from ..errors import (
    CancelledError,
    CompletionValidationError,
    ConfigurationError,
    ContextOverflowError,
    HookError,
)
from ..events import (
    AssistantMessageEvent,
    ContextReplacedEvent,
    ControlEvent,
    Event,
    RuntimeEvent,
    ToolResultEvent,
    UserMessageEvent,
    new_id,
)
from ..messages import (
    ContentPart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolOutput,
    text_of,
)
from ..models.base import (
    ChatModel,
    FinishEvent,
    ModelRequest,
    ReasoningDelta,
    ReasoningDone,
    TextDelta,
    ToolCallEvent,
    ToolSpec,
    UsageEvent,
)
from ..observability._tracing import start_run
from ..options import LoopOptions
from ..results import RunResult, Step, ToolCallRecord
from ..session._redaction import redactor_of
from ..streaming._events import (
    Emit,
    ReasoningDeltaEvent,
    StepEndEvent,
    StepStartEvent,
    TextDeltaEvent,
    ToolCallRequestedEvent,
    ToolEndEvent,
    ToolStartEvent,
    ToolUpdateEvent,
)
from ..tools.base import ToolContext, ToolDecision
from ..tools.runner import Gate, decision_gate, run_tool_call
from ..transactions._intents import Intents
from ..transactions._ledger import TransactionLedger
from ..usage import Usage
from ._generation_tools import GenerationTools, needed
from ._output import OutputRun, output_plan

__all__ = ["LoopHost", "run_loop"]


class LoopHost(Protocol):
    """What the loop needs from its session: the event log's commit and projection."""

    session_id: str | None

    @property
    def events(self) -> tuple[Event, ...]:
        """The active log (what a ``context_builder`` and compaction read)."""
        ...

    @property
    def durable(self) -> bool:
        """True when commits are durable (tool calls are then preceded by execution intents)."""
        ...

    @property
    def store(self) -> Any:
        """The session's event store (None in memory): tools see it as ``ToolContext.store``."""
        ...

    def commit(self, events: Sequence[Event]) -> list[Event]:
        """Number, persist and publish ``events``; returns them with their ``seq``."""
        ...

    def decide(self, decide: Callable[[], Sequence[Event]]) -> list[Event]:
        """Commit what ``decide()`` returns on the current state, deciding again on
        the caught-up state when another process wrote first."""
        ...

    def projection_of(self, events: Sequence[Event]) -> list[Message]:
        """The plain conversation ``events`` project to."""
        ...

    def project(self, *, for_model: bool = True) -> tuple[list[Message], dict[str, str], int]:
        """The messages so far, the tool calls still waiting for results and the seq of
        the last event they were built from."""
        ...

    def follow_up_waiting(self) -> bool:
        """True when a follow-up message comes after the last answer."""
        ...

    def approval_state(self) -> ApprovalState:
        """The approval requests, decisions and remembered rules of the log so far."""
        ...

    @property
    def ledger(self) -> TransactionLedger:
        """The transaction and execution-intent state folded from the log."""
        ...


@dataclass
class _Inference:
    content: tuple[ContentPart, ...]
    usage: Usage
    finish_reason: str


def _infer(model: ChatModel, request: ModelRequest, emit: Emit | None,
           record: Callable[[ToolCallPart], ToolCallPart]) -> _Inference:
    parts: list[ContentPart] = []
    text: list[str] = []
    reasoning: list[str] = []
    usage = Usage()
    finish = "stop"
    cancel = request.cancel

    def flush_text() -> None:
        if text:
            parts.append(TextPart(text="".join(text)))
            text.clear()

    def flush_reasoning() -> None:
        if reasoning:
            parts.append(ReasoningPart(text="".join(reasoning)))
            reasoning.clear()

    with ModelStream(model, request) as stream:
        for ev in stream:
            if isinstance(ev, TextDelta):
                if reasoning:
                    flush_reasoning()
                text.append(ev.text)
                if emit is not None:
                    emit(TextDeltaEvent(text=ev.text))
            elif isinstance(ev, ToolCallEvent):
                flush_reasoning()
                flush_text()
                call_input, error = ev.input, ev.input_error
                problem = json_problem(call_input) if error is None else None
                if problem is not None:  # it could not be recorded: answer with an error result
                    call_input, error = {}, f"the arguments are not plain JSON: {problem}"
                call = ToolCallPart(
                    tool_call_id=ev.tool_call_id,
                    tool_name=ev.tool_name,
                    input=call_input,
                    input_error=error,
                )
                parts.append(call)
                if emit is not None:
                    emit(ToolCallRequestedEvent(call=record(call)))
            elif isinstance(ev, UsageEvent):
                usage = usage + ev.usage
            elif isinstance(ev, FinishEvent):
                finish = ev.reason
            elif isinstance(ev, ReasoningDelta):
                flush_text()
                reasoning.append(ev.text)
                if emit is not None:
                    emit(ReasoningDeltaEvent(text=ev.text))
            elif isinstance(ev, ReasoningDone):
                flush_text()
                part = ev.part
                if not part.text and reasoning:
                    part = ReasoningPart(
                        text="".join(reasoning), signature=part.signature, redacted_data=part.redacted_data
                    )
                reasoning.clear()
                parts.append(part)
    if cancel.cancelled:
        raise CancelledError(cancel.reason)
    flush_reasoning()
    flush_text()
    return _Inference(content=tuple(parts), usage=usage, finish_reason=finish)


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


def run_loop(
    host: LoopHost, opts: LoopOptions, cancel: CancelToken, executor: Callable[[], Executor]
) -> RunResult:
    """Run one generation to completion and return its result; ``executor()`` gives the
    pool tool calls run on (asked for only when a tool call runs)."""
    loop = _Loop(host, opts, cancel, executor)
    if loop.trace is None:
        return loop.run()
    return loop.trace.run(loop.run)


class _Loop:
    def __init__(
        self, host: LoopHost, opts: LoopOptions, cancel: CancelToken, executor: Callable[[], Executor]
    ) -> None:
        self.host = host
        self.executor = executor
        self.redactor = redactor_of(opts.redact)
        # skills and tool search: built-in tools, the skills index, the visible set
        self.extra: GenerationTools | None = None
        if needed(opts, opts.tools):
            redact = self.redactor.value if self.redactor is not None else None
            self.extra = GenerationTools(opts, opts.tools, events=lambda: host.events,
                                         commit=host.commit, redact=redact)
            opts = replace(opts, tools=self.extra.registry, system=self.extra.system)
        self.opts = opts
        self.cancel = cancel
        self.ledger = _Ledger()
        self.steps: list[Step] = []
        self.records: list[ToolCallRecord] = []
        self.usage = Usage()
        self.tool_usage = Usage()
        """Tokens tools reported spending on this generation's behalf (child agents)."""
        self.tally = threading.Lock()  # tool threads report usage while the loop adds its own
        self.store = host.store  # what ToolContext.store shows tools (looked up once)
        self.report_usage = self._report_usage
        self.specs = opts.tools.specs() if self.extra is None else self.extra.specs()
        self.tool_names = tuple(opts.tools) if self.extra is None else self.extra.names()
        self.output: OutputRun | None = None
        self.output_tool: str | None = None  # the output tool's name (tool mode), else None
        self.output_specs: tuple[ToolSpec, ...] = ()  # always visible, also under tool search
        self.tool_choice = opts.tool_choice
        if opts.output_type is not None:
            self.output = OutputRun(output_plan(opts))
            self.output_tool = self.output.tool
            if self.output_tool is not None:
                self.output_specs = (self.output.plan.tool_spec(),)
                self.specs = (*self.specs, *self.output_specs)
                self.tool_names = (*self.tool_names, self.output_tool)
                if self.tool_choice == "none":  # no user tools: the answer is the output tool's
                    self.tool_choice = self.output_tool
        self.model_name = getattr(opts.model, "model_name", None)
        self.emit = opts.event_sink()
        self.hooks = opts.hooks
        self.generation_id = new_id()
        self.approvals = ApprovalGate(host, opts.tools, opts.approval, opts.approver, cancel,
                                      self.generation_id, self._recorded_call)
        hooks_gate = decision_gate(self._decide) if opts.hooks.before_tool_call else None
        self.gate = _chain(self.approvals, hooks_gate)
        self.intents = Intents(host.commit, durable=host.durable)
        self.context = ContextShaper(opts)
        self.budget = Budget(opts.limits) if opts.limits is not None else None
        # OpenTelemetry spans, or None (no tracer provider configured): looked up once
        # per generation, so a provider set after import is honoured
        self.trace = start_run(model=opts.model, session_id=host.session_id)

    def run(self) -> RunResult:
        if self.extra is None:
            return self._run()
        with self.extra.current():  # what the built-in tools (load_skill, find_tools) act on
            return self._run()

    def _run(self) -> RunResult:
        opts = self.opts
        validation_attempts = 0
        overflow_attempts = 0
        finish = "stop"
        last_text = ""
        output: Any = None
        if self._nothing_to_answer():
            return self._result("", "nothing-to-answer")
        while True:
            breach = self.budget.before_model_call() if self.budget is not None else None
            if breach is not None:
                self._budget_exceeded(breach)
                finish = "budget-exceeded"
                break
            if len(self.steps) >= opts.max_steps:
                finish = "max-steps"
                break
            self.cancel.raise_if_cancelled()
            messages, pending, request_seq = self.host.project()
            if pending:
                try:
                    self._settle_open_calls(pending)
                except WaitingForApproval:
                    finish = "approval-required"
                    break
                messages, _, request_seq = self.host.project()
            if self.extra is not None:  # find_tools may have changed what the model sees
                self.specs = (*self.extra.specs(), *self.output_specs)
            messages, request_seq = self._shape(messages, request_seq)
            request = ModelRequest(
                messages=tuple(messages),
                system=opts.system,
                tools=self.specs,
                tool_choice=self.tool_choice,
                settings=opts.settings,
                provider_options=opts.provider_options,
                cancel=self.cancel,
                session_id=self.host.session_id,
                cache=opts.cache,
                output=None if self.output is None else self.output.plan.spec,
            )
            if self.hooks.before_model_request:
                request = self.hooks.model_request(request)
            if self.emit is not None:
                self.emit(StepStartEvent(index=len(self.steps)))
            try:
                inference = self._infer(request)
            except ContextOverflowError:
                if opts.on_context_overflow is None and overflow_attempts < opts.max_context_overflow_retries:
                    if self.context.overflow_compact(self.host, overflow_attempts, self.cancel):
                        overflow_attempts += 1
                        continue  # compacted: try again
                if opts.on_context_overflow is None or overflow_attempts >= opts.max_context_overflow_retries:
                    raise
                overflow_attempts += 1
                conversation = self.host.project(for_model=False)[0]  # without job status
                replacement = opts.on_context_overflow(conversation, self.cancel)
                self._replace_context(replacement)
                continue
            with self.tally:
                self.usage = self.usage + inference.usage
                if self.budget is not None:
                    self.budget.add_model_call(inference.usage)
            self.host.commit(
                [
                    AssistantMessageEvent(
                        content=self._recorded_content(inference.content),
                        usage=inference.usage,
                        finish_reason=inference.finish_reason,
                        model=self.model_name,
                        request_seq=request_seq or None,
                    )
                ]
            )
            calls = [p for p in inference.content if isinstance(p, ToolCallPart)]
            # calls this generation already ran or judged (a repeated id) are the ledger's
            fresh = [c for c in calls if not self.ledger.seen(c)]
            suspended = self.approvals.plan(fresh).suspended if fresh else []
            if suspended:
                waiting = {c.tool_call_id for c in suspended}
                calls = [c for c in calls if c.tool_call_id not in waiting]
            step_records = self._run_tools(calls) if calls else ()
            last_text = text_of(inference.content)
            step = Step(
                index=len(self.steps),
                text=last_text,
                tool_calls=tuple(step_records),
                usage=inference.usage,
                finish_reason=inference.finish_reason,
            )
            self.steps.append(step)
            if self.emit is not None:
                self.emit(StepEndEvent(step=step))
            if suspended:
                finish = "approval-required"  # the answers come in a later generation
                break
            answered = False
            if self.output is not None and (calls or not self.host.follow_up_waiting()):
                answered, output, problem = self.output.outcome(calls, last_text)
                if problem is not None:  # send the model back, or give up
                    if validation_attempts >= opts.max_validation_retries:
                        raise self.output.exhausted(problem, validation_attempts + 1, opts.max_validation_retries)
                    validation_attempts += 1
                    feedback = self.output.feedback(problem, calls)
                    if feedback is not None:
                        self.host.commit([UserMessageEvent(content=(TextPart(text=feedback),))])
                    continue
            if not answered and (calls or self.host.follow_up_waiting()):
                continue  # tool results, or a follow-up pushed while the model answered
            finish = "stop" if answered else inference.finish_reason
            if opts.validate_completion is not None:
                feedback = opts.validate_completion(self._result(last_text, finish, output))
                if feedback is not None and not isinstance(feedback, str):
                    raise ConfigurationError(
                        f"validate_completion must return None (accept) or a str (feedback for "
                        f"the model), not {type(feedback).__name__}"
                    )
                if feedback:
                    if validation_attempts >= opts.max_validation_retries:
                        raise CompletionValidationError(
                            f"validate_completion rejected the answer after "
                            f"{validation_attempts + 1} attempt(s): {feedback}",
                            feedback=feedback,
                            attempts=validation_attempts + 1,
                        )
                    validation_attempts += 1
                    output = None
                    self.host.commit([UserMessageEvent(content=(TextPart(text=feedback),))])
                    continue
            break
        return self._result(last_text, finish, output)

    def _nothing_to_answer(self) -> bool:
        """True when a model call would have nothing new to answer: the conversation is
        empty or ends in the model's own answer, no tool call is open (waiting for an
        approval decision, or left open by a crash) and no runtime event came since (a
        job's output is one even when only the job status shows it, also one committed
        while the model was answering: after the answer's ``request_seq``)."""
        messages, pending, _ = self.host.project(for_model=False)
        if pending or (messages and messages[-1].role != "assistant"):
            return False
        seen: int | None = None  # the last answer's request_seq: what its model call saw
        for event in reversed(self.host.events):
            if seen is not None and event.seq <= seen:
                return True
            if isinstance(event, RuntimeEvent):
                return False
            if seen is None and isinstance(event, AssistantMessageEvent):
                if not event.request_seq:
                    return True
                seen = event.request_seq
        return True

    def _infer(self, request: ModelRequest) -> _Inference:
        """One model call (under its ``chat`` span when tracing)."""
        if self.trace is None:
            return _infer(self.opts.model, request, self.emit, self._recorded_call)
        return self.trace.chat(
            request, lambda: _infer(self.opts.model, request, self.emit, self._recorded_call),
            self._recorded_content,
        )

    def _result(self, text: str, finish: str, output: Any = None) -> RunResult:
        messages = self.host.project(for_model=False)[0]
        return RunResult(
            text=text,
            finish_reason=finish,
            steps=tuple(self.steps),
            messages=tuple(messages),
            usage=self.usage + self.tool_usage,
            tool_calls=tuple(self.records),
            output=output,
        )

    def _shape(self, messages: list[Message], request_seq: int) -> tuple[list[Message], int]:
        """Auto-compaction when the request would pass the threshold, then the view
        options (context builder, tool-result clearing, output caps)."""
        ctx = self.context
        specs = [(s.name, s.description, s.input_schema) for s in self.specs]
        if ctx.auto is not None and ctx.over_threshold(messages, specs):
            if ctx.auto_compact(self.host, self.cancel):
                messages, _, request_seq = self.host.project()
        return ctx.view(self.host, messages), request_seq

    def _budget_exceeded(self, breach: BudgetBreach) -> None:
        self.host.commit([ControlEvent(action="budget-exceeded", data=breach.data())])

    def _plan(self, calls: list[ToolCallPart], answered: dict[str, ToolOutput]
              ) -> list[tuple[ToolCallPart, str, ToolOutput | None]]:
        """Each call with what to do with it: answered already (an approval), the
        ledger's verdict, or a refusal for a call past the ``tool_calls`` budget."""
        plan: list[tuple[ToolCallPart, str, ToolOutput | None]] = []
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

    def _replace_context(self, replacement: Sequence[Message]) -> None:
        msgs = tuple(replacement or ())
        if not all(isinstance(m, Message) and m.role != "system" for m in msgs) or not msgs:
            raise ConfigurationError(
                "on_context_overflow must return a non-empty list of user, assistant and tool "
                "Message objects (the system prompt is sent separately; keep it out)"
            )
        check_messages(msgs, what="the on_context_overflow result")
        self.host.commit([ContextReplacedEvent(messages=msgs, reason="context-overflow")])

    def _settle_open_calls(self, pending: dict[str, str]) -> None:
        """Settle the tool calls a stopped generation left open: run the approved ones,
        deny the denied ones and close the rest as interrupted, in model order (raises
        WaitingForApproval while one waits for an answer). An approved call whose intent
        is committed already started (the process that ran it stopped): it is closed as
        interrupted too and stays uncertain; it never runs again on its own."""
        resume = self.approvals.resume(pending, _interrupted)
        if resume is None:
            self._close_orphans(pending)
            return
        started = self.host.ledger.started
        for call in resume.calls:
            if started(call.tool_call_id) is not None:
                resume.answered[call.tool_call_id] = _interrupted()
        self._run_tools(resume.calls, resume.answered)

    def _close_orphans(self, pending: dict[str, str]) -> None:
        def decide() -> list[Event]:  # only the calls still open (another process may have closed some)
            still = self.host.project(for_model=False)[1]
            return [ToolResultEvent(tool_call_id=cid, tool_name=name, output=_interrupted())
                    for cid, name in pending.items() if cid in still]

        self.host.decide(decide)

    # -- what is recorded (redaction) --------------------------------------------------

    def _recorded_call(self, call: ToolCallPart) -> ToolCallPart:
        """``call`` as it may be committed and shown: the tool's own input redaction
        (``Tool.redact_input``), then ``redact=``. The tool runs with the call itself."""
        tool = self.opts.tools.get(call.tool_name)
        if tool is not None and tool.redact_input is not None and call.input_error is None:
            try:
                call = replace(call, input=tool.redact_input(call.input))
            except Exception as exc:  # noqa: BLE001 - a tool author's bug, named
                raise HookError(f"redact_input of tool {tool.name!r} raised {type(exc).__name__}: {exc}",
                                hook="redact_input") from exc
        return call if self.redactor is None else self.redactor.call(call)

    def _recorded_content(self, content: tuple[ContentPart, ...]) -> tuple[ContentPart, ...]:
        return tuple(self._recorded_call(p) if isinstance(p, ToolCallPart) else p for p in content)

    def _recorded_output(self, output: ToolOutput) -> ToolOutput:
        return output if self.redactor is None else self.redactor.output(output)

    # -- tools -------------------------------------------------------------------------

    def _context(self, call: ToolCallPart) -> ToolContext:
        emit = self.emit
        cid = call.tool_call_id
        return ToolContext(
            tool_call_id=cid,
            tool_name=call.tool_name,
            cancel=self.cancel,
            session_id=self.host.session_id,
            execution_context=self.opts.execution_context,
            idempotency_key=self.intents.key(cid),
            model=self.opts.model,
            store=self.store,
            deps=self.opts.deps,
            _progress=None if emit is None else (lambda u: emit(ToolUpdateEvent(tool_call_id=cid, update=u))),
            _emit=emit,
            _usage=self.report_usage,
        )

    def _report_usage(self, usage: Usage) -> bool:
        """``ToolContext.report_usage``: tokens a tool spent for this generation (on its
        thread); False once a token limit is reached."""
        with self.tally:
            self.tool_usage = self.tool_usage + usage
            if self.budget is None:
                return True
            self.budget.add_usage(usage)
            return self.budget.tokens_exceeded() is None

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
        return self.trace.tool(call, lambda: self._execute_call(call), self._recorded_output,
                               lambda: self._recorded_call(call).input)

    def _execute_call(self, call: ToolCallPart) -> ToolOutput:
        tool = self.opts.tools.get(call.tool_name)
        ctx = self._context(call)
        output = run_tool_call(tool, call, ctx, self.tool_names, self.gate)
        if self.hooks.after_tool_call:
            output = self.hooks.tool_result(call, output, ctx)
        return output

    def _run_tools(self, calls: list[ToolCallPart],
                   answered: dict[str, ToolOutput] | None = None) -> list[ToolCallRecord]:
        """Run one assistant message's tool calls and commit their results in the order
        the model wrote them. On cancellation, stop waiting at once: calls that finished
        keep their real results, the others get error results saying they were cancelled
        (so the conversation stays valid and honest), then CancelledError is raised."""
        opts = self.opts
        parallel = opts.tool_execution == "parallel" and len(calls) > 1
        answered = answered or {}
        plan = self._plan(calls, answered)
        # intents record the input as it is committed (redacted, like the assistant
        # message); a call the approval gate denied never runs, so it has none
        self.intents.declare([self._recorded_call(call) for call, action, _ in plan
                              if action == "run" and call.tool_name != self.output_tool
                              and not self.approvals.denies(call.tool_call_id)])
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
                output = self._recorded_output(output)
                intent_id = self.intents.recorded(call.tool_call_id) if action == "run" else None
                self.host.commit([ToolResultEvent(
                    tool_call_id=call.tool_call_id, tool_name=call.tool_name, output=output, intent_id=intent_id
                )])
                record = ToolCallRecord(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    input=self._recorded_call(call).input,
                    output=output,
                    reused=action in ("reuse", "wait"),
                )
                records.append(record)
                self.records.append(record)
                if self.emit is not None:
                    self.emit(ToolEndEvent(record=record))
        finally:
            for future in futures.values():
                future.cancel()
        if stopped is not None:
            raise stopped
        return records

    def _submit(self, plan: list[tuple[ToolCallPart, str, ToolOutput | None]],
                futures: dict[int, Future[ToolOutput]]) -> None:
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
            self.emit(ToolStartEvent(call=self._recorded_call(call)))

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


def _interrupted() -> ToolOutput:
    from ..context._projection import INTERRUPTED_RESULT

    return ToolOutput.error(INTERRUPTED_RESULT)


def _chain(first: Gate, second: Gate | None) -> Gate:
    """``first``, then ``second`` on what it let through."""
    if second is None:
        return first

    def gate(call: ToolCallPart, ctx: ToolContext) -> ToolCallPart | ToolOutput:
        out = first(call, ctx)
        return out if isinstance(out, ToolOutput) else second(out, ctx)

    return gate
