"""One MCP tool called as an agentkit tool, from the calling thread: the
``authorize_tool_call`` gate, the call sent on the loop thread, its progress reported
to the caller, and every failure as an error result the model reads (private)."""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable
from typing import Any

from ..cancel import CancelToken
from ..errors import CancelledError, McpError
from ..messages import ToolCallPart, ToolOutput
from ..tools.base import ToolContext, ToolDecision
from ._callbacks import Callers
from ._runtime import Runtime
from .results import tool_result_to_output

log = logging.getLogger("agentkit.mcp")

AuthorizeToolCall = Callable[[str, str, dict[str, Any], "str | None"], Any]
"""``authorize_tool_call(server, tool, arguments, call_id)``: raise (or return False) to
deny a call; it runs in the calling thread before anything is sent to the server."""

BeforeCall = Callable[[ToolCallPart, ToolContext], "ToolDecision | None"]

_MAX_PENDING_PROGRESS = 1000
"""Progress updates of one call waiting for its thread; beyond this, new ones are dropped."""


def authorization(authorize: AuthorizeToolCall | None, server: str, tool: str, exposed: str) -> BeforeCall | None:
    """``authorize_tool_call`` as the tool's own ``before_call`` gate: it runs on the
    same path as every ``before_tool_call`` hook, after the input passed its schema."""
    if authorize is None:
        return None

    def before_call(call: ToolCallPart, ctx: ToolContext) -> ToolDecision | None:
        try:
            verdict = authorize(server, tool, dict(call.input), ctx.tool_call_id)
        except Exception as exc:  # noqa: BLE001 - a denial is reported to the model
            return ToolDecision.block(
                f"the call to tool {exposed!r} was denied: {str(exc) or type(exc).__name__}. "
                f"Do not retry it; continue without it or say what is blocked."
            )
        if verdict is False:
            return ToolDecision.block(
                f"the call to tool {exposed!r} was denied. Do not retry it; continue without "
                f"it or say what is blocked."
            )
        return None

    return before_call


def call_tool(rt: Runtime, callers: Callers, call_timeout: float | None, rebuild: Callable[[], None],
              server: str, tool: str, exposed: str, arguments: dict[str, Any], ctx: ToolContext | None) -> ToolOutput:
    """Run tool ``tool`` of ``server`` (exposed as ``exposed``) from the calling thread:
    progress reported to ``ctx`` there, every failure an error result; ``rebuild`` runs
    when the connection was lost on the way."""
    # here, not at the top: importing agentkit.mcp must not import the SDK (anyio)
    from .._threads import CallTimeout
    from ._failures import NotConnected, OutcomeUnknown, describe_error

    cancel = ctx.cancel if ctx is not None else CancelToken()
    if rt.closed:
        return ToolOutput.error(f"tool {exposed!r} cannot run: the MCP toolset was closed")
    conn = rt.conns[server]
    updates: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()

    def on_progress(progress: float, total: float | None, message: str | None) -> None:
        # on the loop thread: only queue it; the calling thread reports it (pump). A
        # server flooding notifications faster than listeners take them loses the excess.
        if updates.qsize() < _MAX_PENDING_PROGRESS:
            updates.put({"server": server, "tool": tool, "progress": progress, "total": total,
                         "message": message})

    def pump() -> None:
        while True:
            try:
                update = updates.get_nowait()
            except queue.Empty:
                return
            if ctx is not None:
                try:
                    ctx.report_progress(update)
                except Exception:  # noqa: BLE001 - a listener must not fail the call
                    log.warning("a progress listener of MCP tool %r failed", exposed, exc_info=True)

    try:
        with callers.calling(server, None if ctx is None else ctx.model):
            result = rt.loop.run(conn.call_tool, tool, arguments, on_progress,
                                       timeout=call_timeout, cancel=cancel, pump=pump)
    except CancelledError:
        raise
    except CallTimeout:
        return ToolOutput.error(
            f"MCP tool {exposed!r} (server {server!r}) gave no answer within "
            f"{call_timeout:g}s; the call was cancelled"
        )
    except NotConnected as exc:
        return ToolOutput.error(f"tool {exposed!r} cannot run: MCP server {server!r} is not "
                                f"connected ({exc})")
    except OutcomeUnknown as exc:
        rebuild()
        if not exc.sent:
            return ToolOutput.error(f"tool {exposed!r} cannot run: MCP server {server!r} is not "
                                    f"connected ({exc}); the call did not reach it")
        return ToolOutput.error(
            f"MCP server {server!r} stopped responding while running tool {exposed!r} ({exc}). "
            f"The call may or may not have taken effect, so it was not repeated: check before "
            f"calling it again. The server is reconnected at the next call."
        )
    except McpError as exc:
        return ToolOutput.error(f"tool {exposed!r} cannot run: {exc}")
    except Exception as exc:  # noqa: BLE001 - any failure becomes an error result
        if rt.closed:
            return ToolOutput.error(f"tool {exposed!r} was stopped: the MCP toolset was closed "
                                    f"during the call")
        text = describe_error(exc)
        return ToolOutput.error(f"MCP tool {exposed!r} (server {server!r}) failed: {text}")
    return tool_result_to_output(result)
