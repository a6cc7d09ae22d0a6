"""Helpers shared by the built-in tool factories (private)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..context._truncate import truncate_output
from ..errors import AgentkitError, CancelledError, ConfigurationError
from ..execution.base import PermissionRequest
from ..messages import ToolCallPart, ToolOutput
from .base import ToolContext, ToolDecision


def ask(context: Any, ctx: ToolContext, operation: str, target: str, **details: Any) -> None:
    """Ask the context's permission hook; raises AccessDenied on refusal."""
    request = getattr(context, "request_permission", None)
    if request is not None:
        request(PermissionRequest(operation=operation, target=target, tool_call_id=ctx.tool_call_id,
                                  details=details))


PermissionOf = Callable[[dict[str, Any]], "tuple[str, str, dict[str, Any]]"]
"""A tool's input -> the (operation, target, details) its permission request names."""


def permission_gate(
    context: Any, name: str, permission_of: PermissionOf, precheck: Callable[[dict[str, Any]], None] | None = None
) -> Callable[[ToolCallPart, ToolContext], ToolDecision | None] | None:
    """The execution context's ``permission`` handler as a built-in tool's own
    ``before_call`` gate: asked after the input passed its schema and after the
    generation's ``before_tool_call`` hooks, on the one path every tool call takes. A
    refusal blocks the call (the model reads why); the tool never runs. None when the
    context asks no one."""
    request = getattr(context, "request_permission", None)
    if request is None:
        return None

    def before_call(call: ToolCallPart, ctx: ToolContext) -> ToolDecision | None:
        data = dict(call.input)
        try:
            if precheck is not None:
                precheck(data)
            operation, target, details = permission_of(data)
            request(PermissionRequest(operation=operation, target=target, tool_call_id=ctx.tool_call_id,
                                      details=details))
        except AgentkitError as exc:  # AccessDenied, a command that is not allowed...
            return ToolDecision.block(f"{name}: {exc}")
        return None

    return before_call


def visible(text: str, max_lines: int, max_bytes: int, keep: str = "head") -> str:
    """What the model sees of ``text``: truncated, with a notice when cut."""
    return truncate_output(text, max_lines, max_bytes, keep=keep).text()  # type: ignore[arg-type]


def guarded(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn refusals and expected failures of a built-in tool into error results that
    say what went wrong."""

    def call(**kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except CancelledError:
            raise
        except AgentkitError as exc:  # AccessDenied, ConfigurationError, store errors...
            return ToolOutput.error(f"{name}: {exc}")
        except FileNotFoundError as exc:
            return ToolOutput.error(f"{name}: not found: {exc.filename or exc}")
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename and str(exc.filename) not in str(exc.strerror) else ""
            return ToolOutput.error(f"{name}: {exc.strerror or exc}{where}")

    call.__name__ = name
    return call


def require(context: Any, capability: str, factory: str) -> Any:
    """The context's ``capability``, or a ConfigurationError naming what is missing."""
    if context is None:
        raise ConfigurationError(f"{factory}() needs an execution context, e.g. LocalExecutionContext(root)")
    value = getattr(context, capability, None)
    if value is None:
        raise ConfigurationError(
            f"{factory}() needs an execution context with a {capability!r} capability; "
            f"{type(context).__name__} has none"
        )
    return value


def check_limits(max_lines: int, max_bytes: int) -> None:
    """Raise ConfigurationError unless both truncation limits are positive ints."""
    for label, value in (("max_lines", max_lines), ("max_bytes", max_bytes)):
        if not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{label} must be a positive int, got {value!r}")
