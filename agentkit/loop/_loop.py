"""The step loop: infer, commit, run tools, commit, repeat.

The loop talks to its host through :class:`LoopHost`, the session's event log
(:class:`~agentkit.session._eventlog.EventLog`): it reads projected messages and commits
events; tool calls run on the executor the Session hands it. Tool results are committed
before the next model request, so a retried or resumed generation never re-runs a
finished tool.

This module is the step state machine (:meth:`_Loop._step`); its parts are beside it:
the model call (``_inference.py``), tool dispatch (``_dispatch.py``), what is recorded
(``_recording.py``), structured output (``_output.py``) and the generation's built-in
tools (``_generation_tools.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from typing import Any, cast

from ..approvals._gate import WaitingForApproval
from ..cancel import CancelToken
from ..context._budget import Budget
from ..context._compact import ContextShaper
from ..context._invariants import check_messages
from ..errors import CompletionValidationError, ConfigurationError, ContextOverflowError
from ..events import (
    AssistantMessageEvent,
    ContextReplacedEvent,
    ControlEvent,
    RuntimeEvent,
    UserMessageEvent,
    new_id,
)
from ..messages import Message, TextPart, ToolCallPart, text_of
from ..models.base import ModelRequest, ToolSpec
from ..observability._tracing import start_run
from ..options import LoopOptions
from ..results import RunResult, Step, ToolCallRecord
from ..session._redaction import redactor_of
from ..streaming._control import AnnouncingHost, retry_listener
from ..streaming._events import MessageEndEvent, StepEndEvent, StepStartEvent, StepUsageEvent
from ._dispatch import ToolDispatch, WaitingForInput
from ._generation_tools import GenerationTools, needed
from ._host import LoopHost
from ._inference import Inference, infer
from ._output import OutputRun, output_plan
from ._recording import GenerationRecord

__all__ = ["LoopHost", "run_loop"]


def run_loop(
    host: LoopHost, opts: LoopOptions, cancel: CancelToken, executor: Callable[[], Executor]
) -> RunResult:
    """Run one generation to completion and return its result; ``executor()`` gives the
    pool tool calls run on (asked for only when a tool call runs)."""
    loop = _Loop(host, opts, cancel, executor)
    if loop.trace is None:
        return loop.run()
    return loop.trace.run(loop.run)


@dataclass
class _Progress:
    """What one step hands the next."""

    text: str = ""
    """The last step's text (the answer, when the generation ends)."""
    output: Any = None
    """The structured output taken so far."""
    validation_attempts: int = 0
    """Answers sent back to the model so far (invalid output, ``validate_completion``)."""
    overflow_attempts: int = 0
    """Context overflows recovered from so far (compacted, or ``on_context_overflow``)."""


class _Loop:
    """One generation: the step state machine over its parts (tool dispatch, the record,
    structured output, the context shaper, the built-in tools)."""

    def __init__(
        self, host: LoopHost, opts: LoopOptions, cancel: CancelToken, executor: Callable[[], Executor]
    ) -> None:
        self.host = host
        redactor = redactor_of(opts.redact)
        # skills and tool search: built-in tools, the skills index, the visible set
        self.extra: GenerationTools | None = None
        if needed(opts, opts.tools):
            redact = redactor.value if redactor is not None else None
            self.extra = GenerationTools(opts, opts.tools, events=lambda: host.events,
                                         commit=host.commit, redact=redact)
            opts = replace(opts, tools=self.extra.registry, system=self.extra.system)
        self.opts = opts
        self.cancel = cancel
        self.specs = opts.tools.specs() if self.extra is None else self.extra.specs()
        tool_names = tuple(opts.tools) if self.extra is None else self.extra.names()
        self.output: OutputRun | None = None
        self.output_specs: tuple[ToolSpec, ...] = ()  # always visible, also under tool search
        self.tool_choice = opts.tool_choice
        if opts.output_type is not None:
            self.output = OutputRun(output_plan(opts))
            output_tool = self.output.tool  # the output tool's name (tool mode), else None
            if output_tool is not None:
                self.output_specs = (self.output.plan.tool_spec(),)
                self.specs = (*self.specs, *self.output_specs)
                tool_names = (*tool_names, output_tool)
                if self.tool_choice == "none":  # no user tools: the answer is the output tool's
                    self.tool_choice = output_tool
        self.model_name = getattr(opts.model, "model_name", None)
        self.emit = opts.event_sink()
        if self.emit is not None:  # what its commits mean (approvals, budgets, compaction), announced
            self.host = host = cast(LoopHost, AnnouncingHost(host, self.emit, approver=opts.approver is not None))
        self.on_retry = retry_listener(self.emit)  # a model call's retries as events (None: no one listens)
        self.hooks = opts.hooks
        self.context = ContextShaper(opts)
        self.budget = Budget(opts.limits) if opts.limits is not None else None
        self.record = GenerationRecord(opts.tools, redactor, self.budget)
        # OpenTelemetry spans, or None (no tracer provider configured): looked up once
        # per generation, so a provider set after import is honoured
        self.trace = start_run(model=opts.model, session_id=host.session_id)
        self.tools = ToolDispatch(host, opts, cancel, executor, self.record, emit=self.emit,
                                  trace=self.trace, budget=self.budget, output=self.output,
                                  tool_names=tool_names, generation_id=new_id())

    def run(self) -> RunResult:
        if self.extra is None:
            return self._run()
        with self.extra.current():  # what the built-in tools (load_skill, find_tools) act on
            return self._run()

    # -- the step state machine ----------------------------------------------------------

    def _run(self) -> RunResult:
        """Step after step until one names how the generation finished."""
        if self._nothing_to_answer():
            return self._result("", "nothing-to-answer")
        progress = _Progress()
        finish: str | None = None
        while finish is None:
            finish = self._step(progress)
        return self._result(progress.text, finish, progress.output)

    def _step(self, progress: _Progress) -> str | None:
        """One step: the limits checked, open calls settled, the request made, the model
        called, its answer committed, its tool calls run and their results committed, the
        answer judged. Returns how the generation finished, or None for another step."""
        finish = self._limit_reached()
        if finish is not None:
            return finish
        self.cancel.raise_if_cancelled()
        prepared = self._prepare()
        if isinstance(prepared, str):
            return prepared  # a call left open waits for a decision or an answer
        request, request_seq = prepared
        if self.emit is not None:
            self.emit(StepStartEvent(index=len(self.record.steps)))
        inference = self._call_model(request, progress)
        if inference is None:
            return None  # the context was compacted or replaced: ask again
        self._commit_answer(inference, request_seq)
        calls = [p for p in inference.content if isinstance(p, ToolCallPart)]
        waiting = self.tools.waiting(calls)
        if waiting:
            calls = [c for c in calls if c.tool_call_id not in waiting]
        self._end_step(inference, self.tools.run_tools(calls) if calls else [], progress)
        if self.tools.paused:
            return "input-required"  # a tool asked a person: the answer comes later
        if waiting:
            return "approval-required"  # the answers come in a later generation
        return self._judge(inference, calls, progress)

    def _limit_reached(self) -> str | None:
        """``budget-exceeded`` (committed as a control event) or ``max-steps`` when no
        further model call may be made, else None."""
        breach = self.budget.before_model_call() if self.budget is not None else None
        if breach is not None:
            self.host.commit([ControlEvent(action="budget-exceeded", data=breach.data())])
            return "budget-exceeded"
        if len(self.record.steps) >= self.opts.max_steps:
            return "max-steps"
        return None

    def _prepare(self) -> tuple[ModelRequest, int] | str:
        """The step's model request and the seq of the last event it was built from: the
        calls a stopped generation left open settled first (``approval-required`` or
        ``input-required`` while one waits for a decision or an answer), then the tools
        the model sees, the context shaped and the ``before_model_request`` hooks."""
        opts = self.opts
        messages, pending, request_seq = self.host.project()
        if pending:
            try:
                self.tools.settle_open_calls(pending)
            except WaitingForApproval:
                return "approval-required"
            except WaitingForInput:
                return "input-required"
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
            on_retry=self.on_retry,
        )
        if self.hooks.before_model_request:
            request = self.hooks.model_request(request)
        return request, request_seq

    def _call_model(self, request: ModelRequest, progress: _Progress) -> Inference | None:
        """The model's answer, or None when the context overflowed and was compacted or
        replaced (``on_context_overflow``) for another try; raises ContextOverflowError
        once the retries are spent."""
        opts = self.opts
        try:
            return self._infer(request)
        except ContextOverflowError:
            attempts = progress.overflow_attempts
            if opts.on_context_overflow is None and attempts < opts.max_context_overflow_retries:
                if self.context.overflow_compact(self.host, attempts, self.cancel):
                    progress.overflow_attempts += 1
                    return None  # compacted: try again
            if opts.on_context_overflow is None or attempts >= opts.max_context_overflow_retries:
                raise
            progress.overflow_attempts += 1
            conversation = self.host.project(for_model=False)[0]  # without job status
            replacement = opts.on_context_overflow(conversation, self.cancel)
            self._replace_context(replacement)
            return None

    def _commit_answer(self, inference: Inference, request_seq: int) -> None:
        """Count the answer's usage and commit it (its tool calls as recorded)."""
        self.record.add_model_call(inference.usage)
        answer = AssistantMessageEvent(
            content=self.record.content(inference.content),
            usage=inference.usage,
            finish_reason=inference.finish_reason,
            model=self.model_name,
            request_seq=request_seq or None,
        )
        self.host.commit([answer])
        if self.emit is not None:
            self.emit(MessageEndEvent(index=len(self.record.steps), finish_reason=inference.finish_reason,
                                      message=Message(role="assistant", content=answer.content)))
            self.emit(StepUsageEvent(index=len(self.record.steps), usage=inference.usage,
                                     total=self.record.usage + self.record.tool_usage))

    def _end_step(self, inference: Inference, records: list[ToolCallRecord], progress: _Progress) -> None:
        """Record the step: the answer's text, its tool calls' records, its usage."""
        progress.text = text_of(inference.content)
        step = Step(
            index=len(self.record.steps),
            text=progress.text,
            tool_calls=tuple(records),
            usage=inference.usage,
            finish_reason=inference.finish_reason,
        )
        self.record.steps.append(step)
        if self.emit is not None:
            self.emit(StepEndEvent(step=step))

    def _judge(self, inference: Inference, calls: list[ToolCallPart], progress: _Progress) -> str | None:
        """After a step: another step for tool results, a follow-up or an answer sent back
        (invalid structured output, ``validate_completion``'s feedback), else how the
        generation finished."""
        answered = False
        if self.output is not None and (calls or not self.host.follow_up_waiting()):
            answered, progress.output, problem = self.output.outcome(calls, progress.text)
            if problem is not None:  # send the model back, or give up
                self._send_back_output(problem, calls, progress)
                return None
        if not answered and (calls or self.host.follow_up_waiting()):
            return None  # tool results, or a follow-up pushed while the model answered
        finish = "stop" if answered else inference.finish_reason
        if self.opts.validate_completion is not None and self._completion_rejected(finish, progress):
            return None
        return finish

    def _send_back_output(self, problem: tuple[Any, str], calls: list[ToolCallPart], progress: _Progress) -> None:
        """The structured output was invalid: tell the model what was wrong (raises
        OutputValidationError once the retries are spent)."""
        assert self.output is not None
        opts = self.opts
        if progress.validation_attempts >= opts.max_validation_retries:
            raise self.output.exhausted(problem, progress.validation_attempts + 1, opts.max_validation_retries)
        progress.validation_attempts += 1
        feedback = self.output.feedback(problem, calls)
        if feedback is not None:
            self._tell(feedback)

    def _completion_rejected(self, finish: str, progress: _Progress) -> bool:
        """True when ``validate_completion`` sent the answer back with its feedback (raises
        CompletionValidationError once the retries are spent)."""
        assert self.opts.validate_completion is not None
        feedback = self.opts.validate_completion(self._result(progress.text, finish, progress.output))
        if feedback is not None and not isinstance(feedback, str):
            raise ConfigurationError(
                f"validate_completion must return None (accept) or a str (feedback for "
                f"the model), not {type(feedback).__name__}"
            )
        if not feedback:
            return False
        attempts = progress.validation_attempts
        if attempts >= self.opts.max_validation_retries:
            raise CompletionValidationError(
                f"validate_completion rejected the answer after "
                f"{attempts + 1} attempt(s): {feedback}",
                feedback=feedback,
                attempts=attempts + 1,
            )
        progress.validation_attempts += 1
        progress.output = None
        self._tell(feedback)
        return True

    def _tell(self, feedback: str) -> None:
        """Commit ``feedback`` for the model as a user message."""
        self.host.commit([UserMessageEvent(content=(TextPart(text=feedback),))])

    # -- around the steps ----------------------------------------------------------------

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

    def _infer(self, request: ModelRequest) -> Inference:
        """One model call (under its ``chat`` span when tracing)."""
        model, emit, record, index = self.opts.model, self.emit, self.record.call, len(self.record.steps)
        if self.trace is None:
            return infer(model, request, emit, record, index)
        return self.trace.chat(request, lambda: infer(model, request, emit, record, index), self.record.content)

    def _result(self, text: str, finish: str, output: Any = None) -> RunResult:
        return self.record.result(self.host.project(for_model=False)[0], text, finish, output)

    def _shape(self, messages: list[Message], request_seq: int) -> tuple[list[Message], int]:
        """Auto-compaction when the request would pass the threshold, then the view
        options (context builder, tool-result clearing, output caps)."""
        ctx = self.context
        specs = [(s.name, s.description, s.input_schema) for s in self.specs]
        if ctx.auto is not None and ctx.over_threshold(messages, specs):
            if ctx.auto_compact(self.host, self.cancel):
                messages, _, request_seq = self.host.project()
        return ctx.view(self.host, messages), request_seq

    def _replace_context(self, replacement: Sequence[Message]) -> None:
        msgs = tuple(replacement or ())
        if not all(isinstance(m, Message) and m.role != "system" for m in msgs) or not msgs:
            raise ConfigurationError(
                "on_context_overflow must return a non-empty list of user, assistant and tool "
                "Message objects (the system prompt is sent separately; keep it out)"
            )
        check_messages(msgs, what="the on_context_overflow result")
        self.host.commit([ContextReplacedEvent(messages=msgs, reason="context-overflow")])
