"""agentkit.mcp toolset behaviour against in-process MCP servers (an un-entered
``mcp.Client(MCPServer)``, run on the toolset's loop thread): fast checks of the parts
that do not depend on the transport."""

from __future__ import annotations

import logging

import mcp_types as types
import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp_servers.helpers import no_leaks, wait_for

from agentkit import ScriptedModel, Session, ToolCall, run_agent
from agentkit.mcp import connect_mcp

pytestmark = pytest.mark.filterwarnings("ignore:The logging capability is deprecated")


def _server() -> MCPServer:
    server = MCPServer("inproc")

    @server.tool()
    def record(note: str) -> str:
        """Record a note."""
        return "recorded"

    @server.tool()
    async def shout(message: str, ctx: Context) -> str:
        """Send a log notification, then answer."""
        await ctx.info(message)
        return "shouted"

    @server.tool()
    def stats() -> dict[str, int]:
        """Counts, as an object."""
        return {"notes": 2}

    @server.tool()
    def count() -> int:
        """A count."""
        return 2

    @server.tool()
    def summary() -> types.CallToolResult:
        """Text for people and data for programs."""
        return types.CallToolResult(content=[types.TextContent(type="text", text="found 2 notes")],
                                    structured_content={"notes": ["a", "b"]})

    return server


def _client() -> Client:
    return Client(_server())


def test_a_denial_without_a_message_names_the_exception():
    def authorize(server, tool, arguments, call_id):
        raise PermissionError()

    model = ScriptedModel([ToolCall("record", {"note": "x"}), "ok"])
    with no_leaks(), connect_mcp({"s": _client()}, authorize_tool_call=authorize) as toolset:
        call = run_agent(model, "go", tools=toolset.tools).tool_calls[0]
    assert call.is_error
    assert "was denied: PermissionError. Do not retry" in call.error


def test_forwarding_ends_quietly_when_the_session_closes(caplog):
    caplog.set_level(logging.WARNING, logger="agentkit.mcp")
    with no_leaks(), connect_mcp({"s": _client()}) as toolset:
        shout = {t.name: t for t in toolset.tools}["shout"]
        session = Session(ScriptedModel([]))
        toolset.forward_notifications(session, methods=("notifications/message",))
        received: list[dict] = []
        toolset.add_notification_listener(received.append)  # delivered after the forwarder

        shout(message="one")
        wait_for(lambda: len(received) == 1, what="the first notification")
        assert [e.data["params"]["data"] for e in session.events
                if getattr(e, "runtime_type", None) == "mcp-notification"] == ["one"]
        session.close()
        shout(message="two")
        wait_for(lambda: len(received) == 2, what="the second notification")
    assert not [r for r in caplog.records if r.name == "agentkit.mcp"], caplog.text


def test_structured_content_from_a_real_server_is_never_lost():
    with no_leaks(), connect_mcp({"s": _client()}) as toolset:
        tools = {t.name: t for t in toolset.tools}
        stats, count, summary = tools["stats"](), tools["count"](), tools["summary"]()
    assert (stats.kind, stats.value) == ("json", {"notes": 2})
    assert (count.kind, count.value) == ("text", "2")
    assert (summary.kind, summary.value) == ("text", 'found 2 notes\n{"notes": ["a", "b"]}')
