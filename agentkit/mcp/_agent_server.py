"""An :class:`~agentkit.Agent` served as an MCP server (``Agent.as_mcp_server``,
``agentkit serve-mcp``), on the mcp SDK's own ``MCPServer``.

The server has one tool whose input is the prompt. A call runs the agent's stream on a
worker thread (the agent is synchronous; the SDK's server is async), and:

- its events become progress notifications (a tool starting and ending, a step ending)
  when the client gave a progress token;
- a ``notifications/cancelled`` from the client cancels the run through its CancelToken
  (the tool call running then is told through ``ctx.cancel``, and no later model call is
  made);
- the agent's approvals (``approval=ApprovalPolicy(...)`` without an ``approver=``) are
  asked through MCP elicitation when the client supports it; a client that does not gets
  an error result naming the calls that wait, since nobody could answer them.

Everything the client sees is the SDK's: initialize, tools/list, tools/call over stdio or
Streamable HTTP.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from ..approvals._policy import ApprovalDecision, ApprovalRequest
from ..cancel import CancelToken

__all__ = ["agent_server"]

_DEFAULT_NAME = "agentkit-agent"


class _Approval(BaseModel):
    """What the client's person answers for one tool call (flat primitives, as MCP
    elicitation requires)."""

    approve: bool = Field(description="allow this tool call")
    reason: str = Field(default="", description="why not (the agent reads it)")


def agent_server(agent: Any, name: str | None = None) -> MCPServer:
    """The MCPServer serving ``agent`` as one tool (see the module docstring)."""
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"as_mcp_server(name=) must be a non-empty str or None, not {name!r}")
    server_name = name or _DEFAULT_NAME
    tool_name = re.sub(r"[^A-Za-z0-9_-]", "_", server_name)[:64]
    server = MCPServer(server_name, instructions=f"Call the {tool_name!r} tool with a prompt: an agent answers it.")

    async def ask(prompt: str, ctx: Context) -> str:
        return await _serve(agent, prompt, ctx)

    server.add_tool(ask, name=tool_name, structured_output=False,
                    description="Ask the agent: it answers the prompt, calling its own tools as it needs "
                                "(progress notifications report its steps).")
    return server


async def _serve(agent: Any, prompt: str, ctx: Context) -> str:
    token = anyio.lowlevel.current_token()
    cancel = CancelToken()
    approver = _elicitation_approver(agent, ctx, token)
    done = threading.Event()

    def notify(step: int, message: str) -> None:
        if done.is_set():
            return  # the call ended (cancelled): nobody listens for its progress
        try:
            anyio.from_thread.run(ctx.report_progress, float(step), None, message, token=token)
        except Exception:  # noqa: BLE001 - progress is best effort; the run goes on
            pass

    def work() -> str:
        overrides: dict[str, Any] = {} if approver is None else {"approver": approver}
        stream = agent.stream(prompt, cancel=cancel, **overrides)
        step = 0
        try:
            for event in stream:
                message = _progress(event)
                if message is not None:
                    step += 1
                    notify(step, message)
            return _answer(stream.result)
        finally:
            stream.close()

    try:
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        cancel.cancel("cancelled by the MCP client")
        raise
    finally:
        done.set()


def _progress(event: Any) -> str | None:
    """A progress message for the agent events worth one, else None."""
    kind = getattr(event, "type", "")
    if kind == "tool-start":
        return f"calling {event.call.tool_name}"
    if kind == "tool-end":
        record = event.record
        return f"{record.tool_name} {'failed' if record.output.is_error else 'done'}"
    if kind == "step-end":
        return f"step {event.step.index + 1} done"
    return None


def _answer(result: Any) -> str:
    """What the tool returns: the answer (the structured output as JSON when there is
    one), or a ToolError saying why there is none."""
    if result.finish_reason == "approval-required":
        raise ToolError("the agent stopped: tool calls wait for approval and this MCP client cannot answer them "
                        "(it does not support elicitation); give the agent an approver= or a policy that allows them")
    if result.finish_reason == "input-required":
        raise ToolError("the agent stopped: a tool asked a person (ctx.ask_human), which a one-shot MCP call cannot "
                        "resume; serve an agent whose tools do not ask")
    output = result.output
    if output is None:
        return str(result.text)
    dump = getattr(output, "model_dump", None)
    return json.dumps(dump(mode="json") if callable(dump) else output, default=str)


def _elicitation_approver(agent: Any, ctx: Context, token: Any) -> Any:
    """An approver asking the client's person through elicitation, or None (the agent
    has its own approver, no approval policy, or the client cannot elicit)."""
    options = agent.options
    if options.approval is None or options.approver is not None:
        return None
    session = ctx.request_context.session
    if not session.check_client_capability(types.ClientCapabilities(elicitation=types.ElicitationCapability())):
        return None

    def approve(request: ApprovalRequest) -> ApprovalDecision:
        asked = json.dumps(request.input, ensure_ascii=False, default=str)
        answer = anyio.from_thread.run(ctx.elicit, f"Allow the agent to call {request.tool_name} with {asked}?",
                                       _Approval, token=token)
        data = getattr(answer, "data", None)
        if getattr(answer, "action", None) == "accept" and data is not None and data.approve:
            return ApprovalDecision.approve(note="MCP elicitation")
        reason = (data.reason if data is not None and data.reason else None) or \
            f"the MCP client's person answered {getattr(answer, 'action', 'no')}"
        return ApprovalDecision.deny(reason, note="MCP elicitation")

    return approve
