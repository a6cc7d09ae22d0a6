"""agentkit.mcp toolset behaviour against in-process MCP servers (an un-entered
``mcp.Client(MCPServer)``, run on the toolset's loop thread): fast checks of the parts
that do not depend on the transport."""

from __future__ import annotations

import logging

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.server import Server
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


def _legacy_server(*, resources: bool) -> Server:
    """A low-level Server, optionally offering resources/subscribe (the handshake-era
    way); its 'touch' tool announces an update only for subscribed URIs."""
    subscribed: set[str] = set()

    async def list_resources(ctx, params):
        return types.ListResourcesResult(resources=[types.Resource(uri="note://current", name="current")])

    async def subscribe(ctx, params):
        subscribed.add(str(params.uri))
        return types.EmptyResult()

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[types.Tool(
            name="touch", description="Announce a change.",
            input_schema={"type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]},
        )])

    async def call_tool(ctx, params):
        uri = params.arguments["uri"]
        if uri in subscribed:
            await ctx.session.send_resource_updated(uri)
        return types.CallToolResult(content=[types.TextContent(type="text", text="touched")])

    if not resources:
        return Server("plain", on_list_tools=list_tools, on_call_tool=call_tool)
    return Server("legacy-resources", on_list_resources=list_resources, on_subscribe_resource=subscribe,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def test_resource_subscriptions_on_a_handshake_era_connection():
    received: list[dict] = []
    client = Client(_legacy_server(resources=True), mode="legacy")
    with no_leaks(), connect_mcp({"old": client}) as toolset:
        assert toolset.servers["old"].protocol_version not in (None, "2026-07-28")
        toolset.add_notification_listener(received.append)
        touch = {t.name: t for t in toolset.tools}["touch"]
        touch(uri="note://current")
        toolset.subscribe_resource("old", "note://current")
        touch(uri="note://current")
        wait_for(lambda: received, what="the resource update")
    assert received == [{"server": "old", "method": "notifications/resources/updated",
                         "params": {"uri": "note://current"}}]


def test_subscribing_where_the_server_offers_no_subscriptions_is_a_clear_error():
    from agentkit import McpError

    with no_leaks(), connect_mcp({"s": Client(_legacy_server(resources=False), mode="legacy")}) as toolset:
        with pytest.raises(McpError, match="does not offer resource subscriptions"):
            toolset.subscribe_resource("s", "note://x")


def test_a_tool_listed_twice_keeps_its_first_listing_and_an_unusable_schema_is_skipped():
    def tool(name: str, description: str, schema: dict) -> types.Tool:
        return types.Tool(name=name, description=description, input_schema=schema)

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[
            tool("dup", "first listing", {"type": "object"}),
            tool("bad", "broken schema", {"type": "object", "properties": {"x": {"type": 5}}}),
            tool("dup", "second listing", {"type": "object"}),
            tool("ok", "fine", {"type": "object"}),
        ])

    async def call_tool(ctx, params):
        return types.CallToolResult(content=[types.TextContent(type="text", text=params.name)])

    server = Server("odd", on_list_tools=list_tools, on_call_tool=call_tool)
    with no_leaks(), connect_mcp({"odd": Client(server)}) as toolset:
        tools = {t.name: t for t in toolset.tools}
        assert list(tools) == ["dup", "ok"]
        assert tools["dup"].description == "first listing"
        warnings = toolset.servers["odd"].warnings
        assert any("'dup' is listed twice" in w for w in warnings)
        assert any("'bad' was skipped" in w and "not a valid JSON Schema" in w for w in warnings)
        assert toolset.servers["odd"].tool_count == 3  # distinct tools listed, the skipped one too


def test_refresh_failures_are_mcp_errors_and_keep_the_previous_listing():
    from agentkit import McpError

    calls = {"n": 0}

    async def list_tools(ctx, params):
        calls["n"] += 1
        if calls["n"] == 2:
            raise MCPError(-32603, "listing broke")
        if calls["n"] >= 3:
            await anyio.sleep(60)
        return types.ListToolsResult(tools=[types.Tool(name="t", input_schema={"type": "object"})])

    async def call_tool(ctx, params):
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])

    server = Server("flaky", on_list_tools=list_tools, on_call_tool=call_tool)
    with no_leaks(), connect_mcp({"flaky": Client(server)}) as toolset:
        with pytest.raises(McpError, match="'flaky' could not list its tools again .*listing broke"):
            toolset.refresh()
        with pytest.raises(McpError, match="'flaky' did not list its tools within 1s"):
            toolset.refresh(timeout=1)
        assert list(toolset.tool_name_map) == ["t"]
        assert toolset.tools[0]().as_text() == "ok"


def test_a_cut_listen_stream_is_opened_again_while_the_server_still_answers():
    from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

    bus = InMemorySubscriptionBus()
    real_listen = ListenHandler(bus)
    listens = {"n": 0}
    names = ["grow"]

    async def listen(ctx, params):
        listens["n"] += 1
        if listens["n"] == 1:
            raise MCPError(-32603, "stream cut")  # the first stream fails; the server lives on
        return await real_listen(ctx, params)

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[types.Tool(name=n, input_schema={"type": "object"}) for n in names])

    async def call_tool(ctx, params):
        names.append("extra")
        await bus.publish(ToolsListChanged())
        return types.CallToolResult(content=[types.TextContent(type="text", text="grown")])

    server = Server("relisten", on_list_tools=list_tools, on_call_tool=call_tool, on_subscriptions_listen=listen)
    with no_leaks(), connect_mcp({"s": Client(server)}) as toolset:
        wait_for(lambda: listens["n"] >= 2, what="a second listen stream")
        assert toolset.servers["s"].connected
        assert {t.name: t for t in toolset.tools}["grow"]().as_text() == "grown"
        wait_for(lambda: "extra" in toolset.tool_name_map, what="list_changed on the new stream")
        assert toolset.servers["s"].connected and toolset.servers["s"].warnings == ()
