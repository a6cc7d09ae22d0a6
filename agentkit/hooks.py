"""Hooks: host code that watches, shapes and gates a running generation.

A :class:`Hooks` object bundles optional callables; ``hooks=`` on ``run_agent``,
``Session`` and ``generate`` takes one or a sequence, and a sequence composes in order:

* ``before_model_request(request)`` is a reducer: each hook receives the request the
  previous one returned (``None`` keeps it), so one hook can add ephemeral context
  messages (sent with this request only, never committed) and the next change settings.
* ``before_tool_call(call, ctx)`` runs after the call's input passed its schema, for
  every tool kind. The first hook that blocks or responds decides; a rewrite is
  validated against the schema again and the next hook sees the rewritten call.
* ``after_tool_call(call, output, ctx)`` is a reducer over the result before it is
  committed.
* ``on_generation_end(result, error)`` is called exactly once per generation, whether it
  succeeded, failed, was cancelled or stopped at ``max_steps``.

A hook that raises fails the generation with a :class:`~agentkit.errors.HookError`
naming the hook; nothing is silently skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import ConfigurationError, HookError
from .messages import ToolCallPart, ToolOutput
from .models.base import ModelRequest
from .tools.base import ToolContext, ToolDecision, to_tool_output

if TYPE_CHECKING:
    from .results import RunResult

_T = TypeVar("_T")

BeforeModelRequest = Callable[[ModelRequest], "ModelRequest | None"]
BeforeToolCall = Callable[[ToolCallPart, ToolContext], "ToolDecision | None"]
AfterToolCall = Callable[[ToolCallPart, ToolOutput, ToolContext], "ToolOutput | Any | None"]
OnGenerationEnd = Callable[["RunResult | None", "BaseException | None"], Any]


@dataclass(frozen=True, kw_only=True)
class Hooks:
    """Optional callables around a generation (see the module docstring)."""

    before_model_request: BeforeModelRequest | None = None
    """``(request) -> ModelRequest | None``: change or extend one model request."""
    before_tool_call: BeforeToolCall | None = None
    """``(call, ctx) -> ToolDecision | None``: allow, block, rewrite or answer a call."""
    after_tool_call: AfterToolCall | None = None
    """``(call, output, ctx) -> ToolOutput | None``: change a result before it is committed."""
    on_generation_end: OnGenerationEnd | None = None
    """``(result, error)``: called once when the generation ends, however it ends."""

    def __post_init__(self) -> None:
        for name in ("before_model_request", "before_tool_call", "after_tool_call", "on_generation_end"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise ConfigurationError(f"Hooks.{name} must be a callable or None, not {type(value).__name__}")


def _label(fn: Callable[..., Any], point: str) -> str:
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return f"{point} hook {name!r}"


def _call(fn: Callable[..., _T], point: str, *args: Any) -> _T:
    try:
        return fn(*args)
    except HookError:
        raise
    except BaseException as exc:
        from .errors import CancelledError, GuardrailTripped

        if isinstance(exc, (CancelledError, GuardrailTripped, KeyboardInterrupt, SystemExit)):
            raise
        raise HookError(f"{_label(fn, point)} raised {type(exc).__name__}: {exc}", hook=point) from exc


class HookChain:
    """Several :class:`Hooks` composed in order. Empty chains are falsy, so the loop
    pays nothing for hook points nobody uses."""

    __slots__ = ("before_model_request", "before_tool_call", "after_tool_call", "on_generation_end")

    def __init__(self, hooks: Iterable[Hooks] = ()) -> None:
        items = tuple(hooks)
        self.before_model_request = tuple(h.before_model_request for h in items if h.before_model_request)
        self.before_tool_call = tuple(h.before_tool_call for h in items if h.before_tool_call)
        self.after_tool_call = tuple(h.after_tool_call for h in items if h.after_tool_call)
        self.on_generation_end = tuple(h.on_generation_end for h in items if h.on_generation_end)

    @classmethod
    def of(cls, hooks: Hooks | Sequence[Hooks] | None) -> HookChain:
        """A chain from ``hooks=`` as users pass it: None, one Hooks or a sequence."""
        if hooks is None:
            return cls()
        if isinstance(hooks, Hooks):
            return cls((hooks,))
        if isinstance(hooks, (str, bytes)) or not isinstance(hooks, Sequence):
            raise ConfigurationError(
                f"hooks must be a Hooks object or a list of them, not {type(hooks).__name__}"
            )
        for h in hooks:
            if not isinstance(h, Hooks):
                raise ConfigurationError(f"hooks must contain Hooks objects, not {type(h).__name__}")
        return cls(hooks)

    def __add__(self, other: HookChain) -> HookChain:
        out = HookChain()
        for name in self.__slots__:
            setattr(out, name, getattr(self, name) + getattr(other, name))
        return out

    def __bool__(self) -> bool:
        return bool(
            self.before_model_request or self.before_tool_call or self.after_tool_call or self.on_generation_end
        )

    # -- the hook points ---------------------------------------------------------------

    def model_request(self, request: ModelRequest) -> ModelRequest:
        for fn in self.before_model_request:
            out = _call(fn, "before_model_request", request)
            if out is None:
                continue
            if not isinstance(out, ModelRequest):
                raise HookError(
                    f"{_label(fn, 'before_model_request')} returned {type(out).__name__}; return a "
                    f"ModelRequest (e.g. dataclasses.replace(request, ...)) or None to keep it",
                    hook="before_model_request",
                )
            request = out
        return request

    def tool_call(self, call: ToolCallPart, ctx: ToolContext) -> tuple[ToolCallPart, ToolDecision | None]:
        """The call to run (rewritten or not) and the deciding block/respond, if any."""
        for fn in self.before_tool_call:
            decision = _call(fn, "before_tool_call", call, ctx)
            if decision is None or (isinstance(decision, ToolDecision) and decision.action == "allow"):
                continue
            if not isinstance(decision, ToolDecision):
                raise HookError(
                    f"{_label(fn, 'before_tool_call')} returned {type(decision).__name__}; return a "
                    f"ToolDecision (allow, block, rewrite, respond) or None",
                    hook="before_tool_call",
                )
            if decision.action == "rewrite":
                call = replace(call, input=decision.input, input_error=None)
                continue
            return call, decision
        return call, None

    def tool_result(self, call: ToolCallPart, output: ToolOutput, ctx: ToolContext) -> ToolOutput:
        for fn in self.after_tool_call:
            out = _call(fn, "after_tool_call", call, output, ctx)
            if out is not None:
                output = to_tool_output(out)
        return output

    def generation_end(self, result: RunResult | None, error: BaseException | None) -> None:
        for fn in self.on_generation_end:
            _call(fn, "on_generation_end", result, error)
