"""MCP tools over Streamable HTTP (a real server on 127.0.0.1) and over a caller-built
mcp.Client, driven from plain synchronous code."""

from __future__ import annotations

import socket
import threading

from _procs import free_port
from mcp_servers.helpers import DEMO, http_server, no_leaks, stdio, wait_for

from agentkit import ScriptedModel, Session, ToolCall, run_agent
from agentkit.mcp import HttpServer, McpToolRef, connect_mcp
from agentkit.messages import ToolResultPart


def last_results(request):
    return [p.output for p in request.messages[-1].content if isinstance(p, ToolResultPart)]


def by_name(toolset):
    return {t.name: t for t in toolset.tools}


def test_run_agent_over_streamable_http_with_headers():
    model = ScriptedModel([
        [ToolCall("add", {"a": 40, "b": 2}), ToolCall("header", {"name": "X-Agentkit-Test"})],
        lambda r: " / ".join(o.as_text() for o in last_results(r)),
    ])
    with http_server() as url, no_leaks():
        with connect_mcp({"web": {"url": url, "headers": {"X-Agentkit-Test": "token-123"}}}) as toolset:
            status = toolset.servers["web"]
            assert status.connected and status.transport == "streamable-http"
            result = run_agent(model, "add and check", tools=toolset.tools)
    assert result.text == "42 / token-123"


def test_stdio_and_http_servers_together_get_prefixed_names():
    with http_server() as url, no_leaks():
        servers = {"local": stdio(DEMO), "web": HttpServer(url=url)}
        asked: list[tuple[str, str]] = []
        with connect_mcp(servers, authorize_tool_call=lambda s, t, a, c: asked.append((s, t))) as toolset:
            m = toolset.tool_name_map
            assert m["local__add"] == McpToolRef(server="local", tool="add")
            assert m["web__add"] == McpToolRef(server="web", tool="add")
            model = ScriptedModel([
                [ToolCall("local__add", {"a": 1, "b": 2}), ToolCall("web__echo", {"text": "hi"})],
                lambda r: ",".join(o.as_text() for o in last_results(r)),
            ])
            assert run_agent(model, "both", tools=toolset.tools).text == "3,echo: hi"
        assert sorted(asked) == [("local", "add"), ("web", "echo")]  # server and original name


def test_http_notifications_and_list_changed():
    with http_server() as url, no_leaks(), connect_mcp({"web": {"url": url}}) as toolset:
        received: list[dict] = []
        toolset.add_notification_listener(received.append)
        tools = by_name(toolset)
        tools["shout"](message="over http")
        tools["grow"]()
        wait_for(lambda: "extra" in toolset.tool_name_map, what="the refreshed tool list")
        wait_for(lambda: any(n["method"] == "notifications/message" for n in received), what="log note")
        note = next(n for n in received if n["method"] == "notifications/message")
        assert note["server"] == "web" and note["params"]["data"] == "over http"


def _hold_port(url: str) -> socket.socket:
    """Bind (never listen on) the port of a server that is gone: connections to it are
    refused, and no other server (another test, or another tox env running at the same
    time) can start on it and answer the reconnects in its place."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the old connections may linger in TIME_WAIT
    sock.bind(("127.0.0.1", port))
    return sock


def test_an_http_server_that_goes_away_gives_error_results_and_the_session_goes_on():
    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 1}), ToolCall("add", {"a": 2, "b": 2}), "still here"])
    with no_leaks():
        with http_server() as url:
            toolset = connect_mcp({"web": {"url": url}}, call_timeout=30)
        held = _hold_port(url)
        try:
            with Session(model, tools=toolset.tools) as session:
                session.push_user_message("go")
                result = session.generate()
            first, second = result.tool_calls
            for call in (first, second):
                assert call.is_error and "MCP server 'web'" in call.error
                assert "stopped responding" in call.error or "not connected" in call.error
            assert toolset.servers["web"].status == "failed"
            assert result.text == "still here"
        finally:
            toolset.close()
            held.close()


def test_an_unreachable_url_is_reported_as_a_failed_server():
    port = free_port()  # nothing listens on this port now
    with no_leaks(), connect_mcp({"gone": {"url": f"http://127.0.0.1:{port}/mcp"}, "demo": stdio(DEMO)},
                                 connect_timeout=20) as toolset:
        gone = toolset.servers["gone"]
        assert gone.status == "failed" and gone.error and "failed to connect" in gone.error
        assert "check that the server is running and that 'url'" in gone.error
        assert toolset.servers["demo"].connected


def test_a_caller_built_mcp_client_for_an_in_process_server():
    from mcp import Client
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("inproc")
    calls: list[tuple[str, int]] = []

    @server.tool()
    def square(n: int) -> int:
        """Square a number."""
        calls.append((threading.current_thread().name, n))
        return n * n

    seen_by_user: list[object] = []

    async def user_handler(message):
        seen_by_user.append(message)

    with no_leaks(), connect_mcp({"inproc": Client(server, message_handler=user_handler)}) as toolset:
        assert toolset.servers["inproc"].transport == "client"
        model = ScriptedModel([ToolCall("square", {"n": 9}), lambda r: last_results(r)[0].as_text()])
        assert run_agent(model, "square 9", tools=toolset.tools).text == "81"
    assert [n for _, n in calls] == [9]
    assert calls[0][0] != threading.current_thread().name  # ran on the background loop thread
