"""Guardrails: checks of a generation's input, its final output and its tool calls that
stop what they do not accept.

``Agent(..., guardrails=[...])`` (``run_agent``, ``Session`` and ``generate``/``ask``/
``stream`` likewise: it is a generation option) takes guardrails made with these
decorators. A guardrail function gets what it checks and a context; a falsy return
passes, a truthy one *trips* and becomes :attr:`GuardrailTripped.output
<agentkit.errors.GuardrailTripped.output>`:

* :func:`input_guardrail` ``fn(input, ctx)``: ``input`` is the text of the user
  messages the generation answers (those after the last answer), ``ctx`` a
  :class:`GuardrailContext` (``deps``, ``messages``, ``session_id``, ``cancel``). Input
  guardrails run on the generation's thread *beside* its first model call, which then
  runs on a worker thread: when one trips, the model call is cancelled and
  :class:`~agentkit.errors.GuardrailTripped` is raised at once, without waiting for it,
  and nothing the model asked for runs; when all pass, the run goes on with the answer.
* :func:`output_guardrail` ``fn(output, ctx)``: ``output`` is the final answer's text,
  or with ``output_type=`` the validated structured output; checked once the answer is
  accepted, before the result is returned.
* :func:`tool_guardrail` ``fn(input, ctx)`` before a tool call runs (``input``: the
  call's arguments after they passed the schema and the ``before_tool_call`` hooks;
  ``ctx``: the call's :class:`~agentkit.ToolContext`, with ``tool_name``), or with
  ``on="output"`` ``fn(output, ctx)`` on its :class:`~agentkit.messages.ToolOutput`
  before it is committed. They are
  :class:`~agentkit.Hooks` (composed after the ``hooks=`` ones). ``action="block"`` (the
  default) answers the call with an error result the model reads (the tool does not run;
  or its output is withheld) and the generation goes on; ``action="raise"`` ends the
  generation with GuardrailTripped.

A trip that ends the generation is committed as a ``guardrail-tripped`` control event
(``data``: ``guardrail``, ``kind``, ``output``) and streamed as a
:class:`~agentkit.streaming.GuardrailTrippedEvent`; the model never sees the user
messages of an input trip again (they stay in the log). A guardrail that raises ends the
generation with a :class:`~agentkit.errors.HookError` naming it. Guardrail functions are
synchronous: an ``async def`` one is refused when it is decorated.
"""

from __future__ import annotations

import contextvars
import inspect
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, Literal, NoReturn, TypeVar, overload

from ._json import json_problem
from ._threads import stream_pool, wait_future
from .cancel import CancelToken
from .errors import CancelledError, ConfigurationError, GuardrailTripped, HookError, SessionError
from .events import ControlEvent, Event
from .hooks import HookChain, Hooks
from .messages import Message, ToolCallPart, ToolOutput, text_of
from .tools.base import ToolContext, ToolDecision

if TYPE_CHECKING:
    from .models.base import ModelRequest
    from .results import RunResult
    from .streaming._events import AgentEvent, Emit

__all__ = [
    "Guardrail",
    "GuardrailContext",
    "GuardrailKind",
]

GuardrailKind = Literal["input", "output", "tool-input", "tool-output"]
GuardrailAction = Literal["block", "raise"]
_T = TypeVar("_T")
DepsT = TypeVar("DepsT")

CONTROL_ACTION = "guardrail-tripped"
"""The action of the control event a trip that ended a generation commits."""


@dataclass(frozen=True, kw_only=True)
class GuardrailContext(Generic[DepsT]):
    """What an input or output guardrail may know about its generation."""

    deps: DepsT
    """The generation's dependencies (``deps=``), None when none were given."""
    messages: tuple[Message, ...]
    """The conversation so far (for an output guardrail: with the answer)."""
    session_id: str | None = None
    cancel: CancelToken = field(default_factory=CancelToken)
    """Cancelled when the generation is (an input guardrail's model call beside it too)."""


@dataclass(frozen=True, kw_only=True)
class Guardrail:
    """A guardrail function with its kind, name and (tool guardrails) what a trip does.
    Make one with a decorator (:func:`input_guardrail`...); calling it calls ``fn``."""

    fn: Callable[..., Any]
    kind: GuardrailKind
    name: str
    action: GuardrailAction = "raise"

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)

    def check(self, value: Any, ctx: Any) -> Any:
        """``fn(value, ctx)``: its truthy verdict, or None when it passed. A function that
        raises (or returns an awaitable) is a :class:`HookError` naming the guardrail."""
        try:
            out = self.fn(value, ctx)
        except (CancelledError, GuardrailTripped, KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - named for the host
            raise HookError(f"{self.kind} guardrail {self.name!r} raised {type(exc).__name__}: {exc}",
                            hook=f"{self.kind}-guardrail") from exc
        if inspect.isawaitable(out):
            getattr(out, "close", lambda: None)()
            raise HookError(f"{self.kind} guardrail {self.name!r} returned an awaitable; guardrail "
                            f"functions are synchronous (use a plain def)", hook=f"{self.kind}-guardrail")
        return out if out else None

    def tripped(self, output: Any) -> GuardrailTripped:
        """The error of a trip with ``output``."""
        return GuardrailTripped(f"{self.kind} guardrail {self.name!r} tripped: {_short(output)}",
                                guardrail=self.name, output=output, kind=self.kind)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _make(fn: Callable[..., Any], kind: GuardrailKind, name: str | None, action: GuardrailAction) -> Guardrail:
    if isinstance(fn, Guardrail):
        raise ConfigurationError(f"{fn.name!r} is already a {fn.kind} guardrail; decorate the function once")
    if not callable(fn):
        raise ConfigurationError(f"a {kind} guardrail must be a callable (value, ctx), not {type(fn).__name__}")
    label = name if name is not None else getattr(fn, "__name__", None) or type(fn).__name__
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__):
        raise ConfigurationError(
            f"{kind} guardrail {label!r} is an async function; guardrails are synchronous: "
            f"write it as a plain def (run a coroutine inside it with asyncio.run if you must)"
        )
    if action not in ("block", "raise"):
        raise ConfigurationError(f"a guardrail's action must be 'block' or 'raise', not {action!r}")
    return Guardrail(fn=fn, kind=kind, name=label, action=action)


def _decorator(kind: GuardrailKind, fn: Any, name: str | None, action: GuardrailAction) -> Any:
    if fn is None:
        return lambda f: _make(f, kind, name, action)
    return _make(fn, kind, name, action)


@overload
def input_guardrail(fn: Callable[[str, GuardrailContext[Any]], Any], /) -> Guardrail: ...
@overload
def input_guardrail(*, name: str | None = None) -> Callable[[Callable[..., Any]], Guardrail]: ...
def input_guardrail(fn: Any = None, /, *, name: str | None = None) -> Any:
    """Make ``fn(input: str, ctx: GuardrailContext)`` an input guardrail (``@input_guardrail``
    or ``@input_guardrail(name=...)``); it runs beside the first model call."""
    return _decorator("input", fn, name, "raise")


@overload
def output_guardrail(fn: Callable[[Any, GuardrailContext[Any]], Any], /) -> Guardrail: ...
@overload
def output_guardrail(*, name: str | None = None) -> Callable[[Callable[..., Any]], Guardrail]: ...
def output_guardrail(fn: Any = None, /, *, name: str | None = None) -> Any:
    """Make ``fn(output, ctx: GuardrailContext)`` an output guardrail: ``output`` is the final
    text, or the validated structured output with ``output_type=``."""
    return _decorator("output", fn, name, "raise")


@overload
def tool_guardrail(fn: Callable[[Any, ToolContext[Any]], Any], /) -> Guardrail: ...
@overload
def tool_guardrail(*, on: Literal["input", "output"] = "input", name: str | None = None,
                   action: GuardrailAction = "block") -> Callable[[Callable[..., Any]], Guardrail]: ...
def tool_guardrail(fn: Any = None, /, *, on: Literal["input", "output"] = "input", name: str | None = None,
                   action: GuardrailAction = "block") -> Any:
    """Make ``fn(input: dict, ctx: ToolContext)`` a guardrail checked before each tool call
    runs (``@tool_guardrail``), or with ``on="output"`` ``fn(output: ToolOutput, ctx)``
    checked on each call's output before it is committed. A trip answers the call with
    an error result the model reads (``action="block"``: the tool does not run, or its
    output is withheld) or ends the generation (``action="raise"``)."""
    if on not in ("input", "output"):
        raise ConfigurationError(f"tool_guardrail(on=...) must be 'input' or 'output', not {on!r}")
    return _decorator("tool-input" if on == "input" else "tool-output", fn, name, action)


class Guardrails:
    """The ``guardrails=`` option: guardrails by kind, in order. Empty is falsy; ``+``
    composes (a session's, then a call's)."""

    __slots__ = ("all", "input", "output", "tool_input", "tool_output")

    def __init__(self, items: Sequence[Guardrail] = ()) -> None:
        self.all = tuple(items)
        self.input = tuple(g for g in self.all if g.kind == "input")
        self.output = tuple(g for g in self.all if g.kind == "output")
        self.tool_input = tuple(g for g in self.all if g.kind == "tool-input")
        self.tool_output = tuple(g for g in self.all if g.kind == "tool-output")

    @classmethod
    def of(cls, value: Guardrail | Sequence[Guardrail] | None) -> Guardrails:
        """From ``guardrails=`` as users pass it: None, one guardrail or a list."""
        if value is None:
            return cls()
        if isinstance(value, Guardrails):
            return value
        items: Sequence[Any] = [value] if isinstance(value, Guardrail) or callable(value) else value
        if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
            raise ConfigurationError(f"guardrails must be a list of guardrails, not {type(value).__name__}")
        checked: list[Guardrail] = []
        for g in items:
            if not isinstance(g, Guardrail):
                what = getattr(g, "__name__", type(g).__name__)
                raise ConfigurationError(
                    f"guardrails must hold guardrails, not {what!r}: decorate the function with "
                    f"@input_guardrail, @output_guardrail or @tool_guardrail"
                )
            checked.append(g)
        return cls(checked)

    def __add__(self, other: Guardrails) -> Guardrails:
        return Guardrails((*self.all, *other.all))

    def __bool__(self) -> bool:
        return bool(self.all)

    def __repr__(self) -> str:
        return f"Guardrails({[g.name for g in self.all]!r})"

    def tool_hooks(self) -> HookChain:
        """The tool guardrails as :class:`~agentkit.Hooks` (an empty chain without any)."""
        if not self.tool_input and not self.tool_output:
            return HookChain()
        return HookChain((Hooks(before_tool_call=self._before if self.tool_input else None,
                                after_tool_call=self._after if self.tool_output else None),))

    def _before(self, call: ToolCallPart, ctx: ToolContext[Any]) -> ToolDecision | None:
        for g in self.tool_input:
            out = g.check(call.input, ctx)
            if out is not None:
                if g.action == "raise":
                    raise g.tripped(out)
                _emit_trip(ctx._emit, g.tripped(out))
                return ToolDecision.block(f"guardrail {g.name!r} tripped: {_short(out)}")
        return None

    def _after(self, call: ToolCallPart, output: ToolOutput, ctx: ToolContext[Any]) -> ToolOutput | None:
        for g in self.tool_output:
            out = g.check(output, ctx)
            if out is not None:
                if g.action == "raise":
                    raise g.tripped(out)
                _emit_trip(ctx._emit, g.tripped(out))
                return ToolOutput.error(f"the tool's output was withheld: guardrail {g.name!r} tripped: {_short(out)}")
        return None


def _emit_trip(emit: Callable[[Any], None] | None, trip: GuardrailTripped) -> None:
    if emit is not None:
        from .streaming._events import GuardrailTrippedEvent

        emit(GuardrailTrippedEvent(guardrail=trip.guardrail, kind=trip.kind, output=trip.output))


def trip_event(exc: GuardrailTripped, redact: Callable[[Any], Any] | None = None) -> ControlEvent:
    """The ``guardrail-tripped`` control event of a trip that ended a generation (its
    output through ``redact=``: it may quote what the guardrail refused)."""
    output = exc.output if json_problem(exc.output) is None else repr(exc.output)
    if redact is not None:
        output = redact(output)
    return ControlEvent(action=CONTROL_ACTION, data={"guardrail": exc.guardrail, "kind": exc.kind, "output": output})


def turn_input(messages: Sequence[Message]) -> str:
    """The text of the user messages after the last assistant message."""
    texts: list[str] = []
    for m in reversed(messages):
        if m.role == "assistant":
            break
        if m.role == "user":
            texts.append(text_of(m.content))
    return "\n".join(reversed(texts))


class _EmitGate:
    """Emits of the model call beside the input guardrails, stopped for good by ``close``
    (an event never follows a trip's)."""

    __slots__ = ("_emit", "_lock", "_open")

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._lock = threading.Lock()
        self._open = True

    def __call__(self, event: AgentEvent) -> None:
        with self._lock:
            if self._open:
                self._emit(event)

    def close(self) -> None:
        with self._lock:
            self._open = False


class GuardrailRun:
    """One generation's input and output guardrails (the loop's part of them)."""

    __slots__ = ("guardrails", "deps", "session_id", "cancel", "emit", "redact", "input_done")

    def __init__(self, guardrails: Guardrails, *, deps: Any, session_id: str | None, cancel: CancelToken,
                 emit: Emit | None, redact: Callable[[Any], Any] | None = None) -> None:
        self.guardrails = guardrails
        self.redact = redact
        self.deps = deps
        self.session_id = session_id
        self.cancel = cancel
        self.emit = emit
        self.input_done = not guardrails.input

    def _context(self, messages: Sequence[Message], cancel: CancelToken) -> GuardrailContext[Any]:
        return GuardrailContext(deps=self.deps, messages=tuple(messages), session_id=self.session_id, cancel=cancel)

    def _trip(self, items: tuple[Guardrail, ...], value: Any, ctx: GuardrailContext[Any]) -> GuardrailTripped | None:
        """The first of ``items`` to trip on ``value``, as its error, or None."""
        for g in items:
            out = g.check(value, ctx)
            if out is not None:
                return g.tripped(out)
        return None

    def _raise(self, trip: GuardrailTripped) -> NoReturn:
        _emit_trip(self.emit, trip)
        raise trip

    def beside(self, request: ModelRequest, messages: Sequence[Message],
               infer: Callable[[ModelRequest, Emit | None], _T]) -> _T:
        """``infer(request, emit)`` on a worker thread while the input guardrails check
        ``messages`` here: a trip cancels the call and raises at once; else its answer."""
        self.input_done = True
        call_cancel = self.cancel.child()
        gate = None if self.emit is None else _EmitGate(self.emit)
        future: Future[_T] = Future()
        context = contextvars.copy_context()

        def run() -> None:
            try:
                call_cancel.raise_if_cancelled()  # tripped before this thread started: no call
                future.set_result(context.run(infer, replace(request, cancel=call_cancel), gate))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                future.set_exception(exc)

        stream_pool().run(run, urgent=True)
        try:
            trip = self._trip(self.guardrails.input, turn_input(messages), self._context(messages, call_cancel))
        except BaseException:
            self._stop(gate, call_cancel, "an input guardrail failed")
            raise
        if trip is not None:
            self._stop(gate, call_cancel, f"input guardrail {trip.guardrail!r} tripped")
            self._raise(trip)
        return wait_future(future, self.cancel)

    @staticmethod
    def _stop(gate: _EmitGate | None, call_cancel: CancelToken, reason: str) -> None:
        """End the model call beside the input guardrails: its events first (the trip's
        event comes last), then the call itself (it is not waited for)."""
        if gate is not None:
            gate.close()
        call_cancel.cancel(reason)

    def check_output(self, output: Any, messages: Sequence[Message]) -> None:
        """Raise GuardrailTripped when an output guardrail trips on ``output``."""
        if self.guardrails.output:
            trip = self._trip(self.guardrails.output, output, self._context(messages, self.cancel))
            if trip is not None:
                self._raise(trip)

    def around(self, run: Callable[[], RunResult], commit: Callable[[Sequence[Event]], Any], *,
               structured: bool) -> RunResult:
        """``run()`` with its answer checked by the output guardrails; a trip (of any kind)
        is committed as a ``guardrail-tripped`` control event and raised."""
        try:
            result = run()
            if result.finish_reason not in _NOT_ANSWERS:
                self.check_output(result.output if structured else result.text, result.messages)
            return result
        except GuardrailTripped as exc:
            try:
                commit([trip_event(exc, self.redact)])
            except SessionError:
                pass  # closed or failed meanwhile: the trip says more
            raise


_NOT_ANSWERS = frozenset({"approval-required", "input-required", "max-steps", "budget-exceeded", "nothing-to-answer"})
"""Finish reasons of a generation that stopped before the model's final answer."""
