"""Run one model-produced tool call safely: every failure becomes an error result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .._json import dumps, json_problem, loads
from .._threads import CallTimeout, run_and_wait
from ..errors import AgentkitError, CancelledError
from ..messages import ToolCallPart, ToolOutput, content_to_dict
from ..observability._tracing import note_tool_error
from ._tool import Tool, ToolContext, ToolDecision, _tool_output

__all__ = ["run_tool_call"]

_KINDS = ("text", "json", "content", "error-text", "error-json")


Gate = Callable[[ToolCallPart, ToolContext], "ToolCallPart | ToolOutput"]
"""Runs after the input passed its schema: returns the call to run (the same one, or one
with a rewritten input, validated again) or a ToolOutput that answers the call instead."""


def run_tool_call(tool: Tool | None, call: ToolCallPart, ctx: ToolContext,
                  available: tuple[str, ...] = (), gate: Gate | None = None,
                  on_cache: Callable[[dict[str, Any]], None] | None = None) -> ToolOutput:
    """Validate and run ``call`` with ``tool``. Never raises for model-produced problems
    (unknown tool, unparsable or invalid input, exceptions, timeouts): those come back as
    error outputs the model reads. Raises CancelledError only when ``ctx.cancel`` is set;
    whatever ``gate`` raises propagates. A tool with a ``cache`` is answered from it when
    it can be (after the gates): ``on_cache`` then gets the marker the result's event
    carries."""
    name = call.tool_name
    if call.input_error is not None:
        return ToolOutput.error(
            f"the arguments for tool {name!r} could not be parsed: {call.input_error}. "
            f"Call the tool again with a valid JSON object as arguments."
        )
    if tool is None:
        names = ", ".join(available) or "(none)"
        return ToolOutput.error(f"unknown tool {name!r}; available tools: {names}")
    problem = tool.validation_error(call.input)
    if problem is not None:
        return ToolOutput.error(problem)
    for step in (gate, tool.before_call and _own_gate(tool)):
        if step is None:
            continue
        gated = step(call, ctx)
        if isinstance(gated, ToolOutput):
            return _recordable(tool, gated)
        if gated is not call:
            problem = tool.validation_error(gated.input)
            if problem is not None:
                return ToolOutput.error(f"the rewritten input was refused: {problem}")
            call = gated
    data = call.input
    try:
        kwargs: dict[str, Any] = tool.prepare_input(data) if tool.prepare_input else dict(data)
    except Exception as exc:  # noqa: BLE001 - conversion of nested types
        return ToolOutput.error(f"invalid input for tool {name!r}: {exc}")
    if tool.cache is None:
        return _run(tool, kwargs, ctx)
    output, marker = tool.cache.through(tool.name, kwargs, ctx, lambda: _run(tool, dict(kwargs), ctx))
    if marker is not None and on_cache is not None:
        on_cache(marker)
    return output


def _run(tool: Tool, kwargs: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    """Call the tool with its prepared arguments (and its context, under its timeout)."""
    if tool.timeout is not None:
        # the call gets its own child token so a timeout stops this call, not the run
        ctx = ctx._with_cancel(ctx.cancel.child())
    if tool.context_param:
        kwargs[tool.context_param] = ctx
    if tool.timeout is None:
        return _invoke(tool, kwargs, ctx)
    return _invoke_with_timeout(tool, kwargs, ctx, tool.timeout)


def decision_gate(decide: Callable[[ToolCallPart, ToolContext], ToolDecision | None]) -> Gate:
    """A gate from a function returning a :class:`ToolDecision` (or None to allow)."""

    def gate(call: ToolCallPart, ctx: ToolContext) -> ToolCallPart | ToolOutput:
        decision = decide(call, ctx)
        if decision is None or decision.action == "allow":
            return call
        if decision.action == "rewrite":
            return replace(call, input=decision.input, input_error=None)
        if decision.action == "block":
            return ToolOutput.error(f"tool call blocked: {decision.reason}")
        assert decision.output is not None
        return decision.output

    return gate


def _own_gate(tool: Tool) -> Gate:
    assert tool.before_call is not None
    return decision_gate(tool.before_call)


def _recordable(tool: Tool, out: ToolOutput) -> ToolOutput:
    """``out`` as it can be stored and sent (JSON values in their plain JSON form), else
    an error result saying why: a bad output must not fail the session's store append."""
    try:
        if out.kind not in _KINDS:
            raise ValueError(f"unknown output kind {out.kind!r}; use one of {', '.join(_KINDS)}")
        if out.kind in ("text", "error-text") and not isinstance(out.value, str):
            raise TypeError(f"a {out.kind} output needs a str value, not {type(out.value).__name__}")
        if out.kind == "content":
            content_to_dict(out.value)
        elif out.kind in ("json", "error-json"):
            plain = _plain_json(out.value)
            if plain is not out.value:
                out = replace(out, value=plain)
        if out.metadata is not None:
            plain = _plain_json(out.metadata)
            if plain is not out.metadata:
                out = replace(out, metadata=plain)
    except (TypeError, ValueError, AgentkitError) as exc:
        return ToolOutput.error(
            f"tool {tool.name!r} returned an output that cannot be recorded: {exc}. "
            f"Tools must return JSON-ready values."
        )
    return out


def _plain_json(value: Any) -> Any:
    """``value`` as the JSON a store gives back (tuples become lists, keys strings), or
    ValueError saying why it cannot be (NaN, nesting deeper than 500 levels...)."""
    if json_problem(value) is None:
        return value
    try:
        plain = loads(dumps(value, allow_nan=False))
    except RecursionError:
        plain = value  # deeper than any encoder goes: reported below
    problem = json_problem(plain)
    if problem is not None:
        raise ValueError(problem)
    return plain


def _invoke(tool: Tool, kwargs: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    try:
        value = tool.fn(**kwargs)
        return _recordable(tool, _tool_output(value, f"tool {tool.name!r}"))
    except CancelledError:
        if ctx.cancel.cancelled:
            raise
        return ToolOutput.error(f"tool {tool.name!r} was cancelled")
    except Exception as exc:  # noqa: BLE001 - any tool failure is reported to the model
        note_tool_error(type(exc).__qualname__, exc)
        return ToolOutput.error(f"tool {tool.name!r} failed: {type(exc).__name__}: {exc}")


def _invoke_with_timeout(tool: Tool, kwargs: dict[str, Any], ctx: ToolContext,
                         timeout: float) -> ToolOutput:
    # the worker runs in a copy of the caller's context (contextvars), like pool threads;
    # a cancelled run stops waiting at once (the tool was told through its token)
    try:
        return run_and_wait(lambda: _invoke(tool, kwargs, ctx), cancel=ctx.cancel, timeout=timeout,
                            name=f"agentkit-tool-{tool.name}")
    except CallTimeout:
        # Threads cannot be killed: tell the tool to stop through its token and move on.
        ctx.cancel.cancel(f"tool {tool.name!r} timed out")
        note_tool_error("timeout")
        return ToolOutput.error(
            f"tool {tool.name!r} timed out after {timeout:g}s and was told to stop"
        )
