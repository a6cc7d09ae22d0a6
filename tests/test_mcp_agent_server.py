"""An Agent served as an MCP server (``Agent.as_mcp_server``, ``agentkit serve-mcp``),
driven by the mcp SDK's own client (in process, over stdio, over Streamable HTTP) and by
inspector-style JSON-RPC over HTTP: initialize, tools/list, tools/call with progress and
cancel, and approvals answered through elicitation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import httpx
import mcp_types as types
import pytest
from _procs import free_port, wait_for
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from agentkit import Agent, ApprovalPolicy, FunctionModel, ToolCall, ToolContext, tool
from agentkit.messages import ToolResultPart
from agentkit.models import Turn

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS)]))
    env.update(extra)
    return env


def _answering(tool_name: str, tool_input: dict, calls: list[int] | None = None):
    """A model that calls ``tool_name`` once, then answers with the tool's output
    (``calls`` counts the model calls)."""

    def reply(request) -> Turn:
        if calls is not None:
            calls.append(1)
        results = [p for p in request.messages[-1].content if isinstance(p, ToolResultPart)]
        if results:
            return Turn(text=f"the tool said {results[0].output.as_text()}")
        return Turn(tool_calls=[ToolCall(name=tool_name, input=tool_input)])

    return FunctionModel(reply)


def test_the_agent_is_one_tool_whose_call_answers_the_prompt_with_progress_from_its_stream():
    from _mcp_agent import agent

    server = agent.as_mcp_server("calculator")
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async def main() -> types.CallToolResult:
        async with Client(server) as client:
            assert client.server_info.name == "calculator"
            (listed,) = (await client.list_tools()).tools
            assert listed.name == "calculator"
            assert listed.input_schema["required"] == ["prompt"]
            assert listed.input_schema["properties"]["prompt"]["type"] == "string"
            return await client.call_tool("calculator", {"prompt": "add 2 and 40"}, progress_callback=on_progress)

    result = anyio.run(main)
    assert not result.is_error
    assert [c.text for c in result.content] == ["the tool said 42"]
    assert [m for _, m in progress] == ["calling add", "add done", "step 1 done", "step 2 done"]
    assert [v for v, _ in progress] == [1.0, 2.0, 3.0, 4.0]


def test_a_cancel_from_the_client_cancels_the_run_and_the_tool_call_running_then(tmp_path):
    started, cancelled = threading.Event(), threading.Event()
    model_calls: list[int] = []

    @tool
    def wait_long(ctx: ToolContext) -> str:
        """Wait until cancelled."""
        started.set()
        if ctx.cancel.wait(60):
            cancelled.set()
        return "done waiting"

    server = Agent(_answering("wait_long", {}, model_calls), tools=[wait_long]).as_mcp_server()

    async def main() -> None:
        async with Client(server) as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "agentkit-agent", {"prompt": "wait"})
                await anyio.to_thread.run_sync(started.wait, 30)
                tg.cancel_scope.cancel()

    anyio.run(main)
    assert cancelled.wait(30), "the tool call was not told to stop"
    assert model_calls == [1]  # no model call after the cancel


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28 input-required rounds", "mid-call elicitation"])
@pytest.mark.parametrize("answer", ["approve", "deny", "no elicitation"])
def test_approvals_are_asked_through_elicitation_where_the_client_supports_it(tmp_path, answer, mode):
    notes = tmp_path / "notes.txt"

    @tool
    def write_note(text: str) -> str:
        """Write a note."""
        notes.write_text(text)
        return "written"

    agent = Agent(_answering("write_note", {"text": "hi"}), tools=[write_note],
                  approval=ApprovalPolicy(mode="ask-writes"))
    asked: list[str] = []

    async def elicit(context, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        if answer == "approve":
            return types.ElicitResult(action="accept", content={"approve": True, "reason": ""})
        return types.ElicitResult(action="accept", content={"approve": False, "reason": "not today"})

    async def main() -> types.CallToolResult:
        kwargs = {} if answer == "no elicitation" else {"elicitation_callback": elicit}
        async with Client(agent.as_mcp_server(), mode=mode, **kwargs) as client:
            assert (client.protocol_version == "2026-07-28") == (mode == "auto")
            return await client.call_tool("agentkit-agent", {"prompt": "note hi"})

    result = anyio.run(main)
    text = result.content[0].text
    if answer == "approve":
        assert not result.is_error and text == "the tool said written" and notes.read_text() == "hi"
        assert asked == ['Allow the agent to call write_note with {"text": "hi"}?']
    elif answer == "deny":
        assert not result.is_error and "not today" in text and not notes.exists()
    else:
        assert result.is_error and "does not support elicitation" in text and not notes.exists()


def test_serve_mcp_over_stdio_with_the_sdks_client():
    params = StdioServerParameters(command=sys.executable, args=["-m", "agentkit", "serve-mcp", "_mcp_agent:agent"],
                                   env=_env(), cwd=str(TESTS))

    async def main() -> str:
        async with Client(params) as client:
            (listed,) = (await client.list_tools()).tools
            result = await client.call_tool(listed.name, {"prompt": "add 1 and 2"})
            return result.content[0].text

    assert anyio.run(main) == "the tool said 3"


def test_serve_mcp_refuses_what_is_not_an_agent():
    out = subprocess.run([sys.executable, "-m", "agentkit", "serve-mcp", "_mcp_agent:add"], capture_output=True,
                         text=True, timeout=120, env=_env(), cwd=str(TESTS))
    assert out.returncode == 2 and "not an agentkit Agent" in out.stderr
    out = subprocess.run([sys.executable, "-m", "agentkit", "serve-mcp", "no_such_module:agent"], capture_output=True,
                         text=True, timeout=120, env=_env(), cwd=str(TESTS))
    assert out.returncode == 2 and "cannot load it" in out.stderr


@pytest.fixture
def http_server(tmp_path):
    port = free_port()
    log = tmp_path / "slow.log"
    proc = subprocess.Popen([sys.executable, "-m", "agentkit", "serve-mcp", "_mcp_agent:agent", "--http", str(port)],
                            env=_env(AGENTKIT_TEST_SLOW_LOG=str(log)), cwd=str(TESTS),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def up() -> bool:
        try:
            httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=2)
            return True
        except httpx.HTTPError:
            return proc.poll() is not None

    try:
        wait_for(up, 120, "the MCP server to listen")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        yield f"http://127.0.0.1:{port}/mcp", log
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_serve_mcp_over_streamable_http_with_the_sdks_client(http_server):
    url, _ = http_server
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async def main() -> str:
        async with Client(url) as client:
            result = await client.call_tool("agentkit-agent", {"prompt": "add 20 and 22"},
                                            progress_callback=on_progress)
            return result.content[0].text

    assert anyio.run(main) == "the tool said 42"
    assert progress == ["calling add", "add done", "step 1 done", "step 2 done"]


def _rpc_events(response: httpx.Response) -> list[dict]:
    """The JSON-RPC messages of a Streamable HTTP response (JSON, or SSE data lines)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        body = response.json()
        return body if isinstance(body, list) else [body]
    lines = response.text.splitlines()
    return [json.loads(line[5:]) for line in lines if line.startswith("data:") and line[5:].strip()]


def test_inspector_style_calls_initialize_list_call_with_progress_and_cancel(http_server):
    url, log = http_server
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx.Client(timeout=60) as http:
        init = http.post(url, headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "inspector-style", "version": "0"}}})
        assert init.status_code == 200, init.text
        (answer,) = _rpc_events(init)
        assert answer["result"]["serverInfo"]["name"] == "agentkit-agent"
        session = {"Mcp-Session-Id": init.headers["mcp-session-id"],
                   "Mcp-Protocol-Version": answer["result"]["protocolVersion"]}
        headers.update(session)
        assert http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
                         ).status_code == 202
        listed = _rpc_events(http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        (tool_info,) = listed[-1]["result"]["tools"]
        assert tool_info["inputSchema"]["required"] == ["prompt"]
        called = _rpc_events(http.post(url, headers=headers, json={
            "jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "agentkit-agent", "arguments": {"prompt": "add 5 and 6"},
                       "_meta": {"progressToken": "p1"}}}))
        notes = [m["params"] for m in called if m.get("method") == "notifications/progress"]
        assert [n["progressToken"] for n in notes] == ["p1"] * 4
        assert [n["message"] for n in notes][:2] == ["calling add", "add done"]
        assert called[-1]["id"] == 3 and called[-1]["result"]["content"][0]["text"] == "the tool said 11"

        # a call cancelled while its tool runs: the tool is told to stop
        def slow_call() -> None:
            try:
                http.post(url, headers=headers, json={
                    "jsonrpc": "2.0", "id": 4, "method": "tools/call",
                    "params": {"name": "agentkit-agent", "arguments": {"prompt": "slow"}}})
            except httpx.HTTPError:
                pass  # the server may end the stream of a cancelled request

        caller = threading.Thread(target=slow_call, daemon=True)
        caller.start()
        wait_for(lambda: log.exists() and "started" in log.read_text(), 60, "the slow tool to start")
        cancel = http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/cancelled",
                                                        "params": {"requestId": 4, "reason": "the user gave up"}})
        assert cancel.status_code == 202
        wait_for(lambda: "cancelled" in log.read_text(), 60, "the slow tool to be cancelled")
        caller.join(60)
