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
  asked through MCP elicitation when the client supports it: mid-call on a handshake-era
  connection (``elicitation/create``), and on a 2026-07-28 connection as an
  ``InputRequiredResult`` (the run waits in an in-memory Session of this server, whose
  pending approvals become the elicitation requests; the client's retry carries the
  answers, the decisions are committed and the run goes on). A client that cannot elicit
  gets an error result naming why, since nobody could answer the calls that wait.

Everything the client sees is the SDK's: initialize, tools/list, tools/call over stdio or
Streamable HTTP.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

from ..approvals._policy import ApprovalDecision, ApprovalRequest
from ..cancel import CancelToken

__all__ = ["agent_server"]

_DEFAULT_NAME = "agentkit-agent"
_WAIT_SECONDS = 3600.0
"""How long a run waiting for a 2026-07-28 client's approval answers is kept."""


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
    waiting = _Waiting()

    async def ask(prompt: str, ctx: Context) -> str | types.InputRequiredResult:
        if _asks_in_rounds(agent, ctx):
            return await _serve_rounds(agent, prompt, ctx, waiting)
        return await _serve(agent, prompt, ctx)

    server.add_tool(ask, name=tool_name, structured_output=False,
                    description="Ask the agent: it answers the prompt, calling its own tools as it needs "
                                "(progress notifications report its steps).")
    return server


class _Waiting:
    """Runs waiting for a 2026-07-28 client's approval answers, by request state."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, tuple[float, Any]] = {}

    def put(self, session: Any) -> str:
        key = secrets.token_urlsafe(24)
        with self._lock:
            self._expire()
            self._runs[key] = (time.monotonic() + _WAIT_SECONDS, session)
        return key

    def take(self, key: str) -> Any:
        with self._lock:
            self._expire()
            found = self._runs.pop(key, None)
        if found is None:
            raise ToolError("this call's request_state names no run waiting here (it expired, or the server "
                            "restarted): call the tool again")
        return found[1]

    def _expire(self) -> None:
        now = time.monotonic()
        for key in [k for k, (deadline, _) in self._runs.items() if deadline < now]:
            self._runs.pop(key)[1].close()


def _asks_in_rounds(agent: Any, ctx: Context) -> bool:
    """True when the agent's approvals go to a 2026-07-28 client as InputRequiredResults."""
    options = agent.options
    return (options.approval is not None and options.approver is None
            and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and _can_elicit(ctx))


def _can_elicit(ctx: Context) -> bool:
    wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
    return bool(ctx.request_context.session.check_client_capability(wanted))


async def _run_on_thread(start: Any, ctx: Context, cancel: CancelToken) -> Any:
    """Iterate the AgentStream ``start()`` returns on a worker thread, its events sent as
    progress notifications; returns its result. The client's cancel cancels the run."""
    token = anyio.lowlevel.current_token()
    done = threading.Event()

    def notify(step: int, message: str) -> None:
        if done.is_set():
            return  # the call ended (cancelled): nobody listens for its progress
        try:
            anyio.from_thread.run(ctx.report_progress, float(step), None, message, token=token)
        except Exception:  # noqa: BLE001 - progress is best effort; the run goes on
            pass

    def work() -> Any:
        stream = start()
        step = 0
        try:
            for event in stream:
                message = _progress(event)
                if message is not None:
                    step += 1
                    notify(step, message)
            return stream.result
        finally:
            stream.close()

    try:
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        cancel.cancel("cancelled by the MCP client")
        raise
    finally:
        done.set()


async def _serve(agent: Any, prompt: str, ctx: Context) -> str:
    """One call, one run: approvals (if any) asked mid-call."""
    cancel = CancelToken()
    approver = _elicitation_approver(agent, ctx, anyio.lowlevel.current_token())
    overrides: dict[str, Any] = {} if approver is None else {"approver": approver}
    result = await _run_on_thread(lambda: agent.stream(prompt, cancel=cancel, **overrides), ctx, cancel)
    return _answer(result)


async def _serve_rounds(agent: Any, prompt: str, ctx: Context, waiting: _Waiting) -> str | types.InputRequiredResult:
    """A 2026-07-28 call: the run waits in a Session between rounds (see the module docstring)."""
    if ctx.request_state is None:
        session = agent.session()
        session.push_user_message(prompt)
    else:
        session = waiting.take(ctx.request_state)
        _decide(session, ctx.input_responses or {})
    cancel = CancelToken()
    try:
        result = await _run_on_thread(lambda: session.stream(cancel=cancel), ctx, cancel)
    except BaseException:
        session.close()
        raise
    pending = session.pending_approvals() if result.finish_reason == "approval-required" else []
    if not pending:
        session.close()
        return _answer(result)
    schema = _Approval.model_json_schema()
    requests: dict[str, Any] = {
        request.id: types.ElicitRequest(params=types.ElicitRequestFormParams(
            message=_question(request), requested_schema=schema))
        for request in pending
    }
    return types.InputRequiredResult(input_requests=requests, request_state=waiting.put(session))


def _decide(session: Any, responses: dict[str, Any]) -> None:
    """Commit the client's answers to the session's pending approvals (one without an
    answer is denied: the client did not say yes)."""
    for request in session.pending_approvals():
        answer = responses.get(request.id)
        decision = _decision(getattr(answer, "action", None), getattr(answer, "content", None))
        if decision.approved:
            session.approve(request.id, note=decision.note)
        else:
            session.deny(request.id, reason=decision.reason or "denied", note=decision.note)


def _decision(action: Any, content: Any) -> ApprovalDecision:
    """The decision an elicitation answer (``action``, ``content``) makes."""
    data = content if isinstance(content, dict) else {}
    if action == "accept" and data.get("approve") is True:
        return ApprovalDecision.approve(note="MCP elicitation")
    reason = data.get("reason") if isinstance(data.get("reason"), str) and data.get("reason") else None
    return ApprovalDecision.deny(reason or f"the MCP client's person answered {action or 'nothing'}",
                                 note="MCP elicitation")


def _question(request: ApprovalRequest) -> str:
    asked = json.dumps(request.input, ensure_ascii=False, default=str)
    return f"Allow the agent to call {request.tool_name} with {asked}?"


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
    """An approver asking the client's person mid-call (``elicitation/create``), or None
    (the agent has its own approver, no approval policy, or the client cannot elicit)."""
    options = agent.options
    if options.approval is None or options.approver is not None or not _can_elicit(ctx):
        return None

    def approve(request: ApprovalRequest) -> ApprovalDecision:
        answer = anyio.from_thread.run(ctx.elicit, _question(request), _Approval, token=token)
        data = getattr(answer, "data", None)
        content = None if data is None else data.model_dump()
        return _decision(getattr(answer, "action", None), content)

    return approve
