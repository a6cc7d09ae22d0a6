"""Reconnecting: a stdio server that died and an HTTP server that restarted or went away
are connected again at the next call, with bounded backoff; a call that may have reached
a dying server is never repeated."""

from __future__ import annotations

import logging
import os
import signal
import threading

import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp_servers.helpers import DEMO, alive, no_leaks, stdio, wait_for
from mcp_servers.oauth_server import ServerThread

from agentkit import ConfigurationError, ScriptedModel, Session
from agentkit.mcp import connect_mcp
from agentkit.models import RetryPolicy

FAST = RetryPolicy(max_retries=3, initial_delay=0.05, max_delay=0.2, max_elapsed=10.0)


def by_name(toolset):
    return {t.name: t for t in toolset.tools}


def call(toolset, tool, /, **args) -> str:
    return by_name(toolset)[tool](**args).as_text()


def test_a_killed_stdio_server_is_reconnected_at_the_next_call_with_its_subscriptions(tmp_path):
    log = tmp_path / "calls.log"
    with no_leaks(), connect_mcp({"demo": stdio(DEMO, env={"AGENTKIT_MCP_TEST_LOG": str(log)})},
                                 reconnect=FAST) as toolset:
        session = Session(ScriptedModel([]))
        toolset.forward_notifications(session)
        toolset.subscribe_resource("demo", "note://current")
        add = by_name(toolset)["add"]  # held across the reconnect, as a Session holds it
        first = int(call(toolset, "pid"))
        os.kill(first, signal.SIGKILL)
        # noticed while idle (its listen stream ends); a call racing the death instead may
        # have been written to the dying process, and would be reported, not repeated
        wait_for(lambda: toolset.servers["demo"].status == "disconnected", what="the loss to be noticed")

        assert add(a=1, b=2).as_text() == "3"  # reconnected, then sent (it never reached the dead one)
        second = int(call(toolset, "pid"))
        assert second != first and toolset.servers["demo"].connected
        assert log.read_text().splitlines() == ["add 1 2"]

        def notes(method):
            return [e.data for e in session.events
                    if getattr(e, "runtime_type", None) == "mcp-notification" and e.data["method"] == method]

        call(toolset, "shout", message="after the restart")  # notifications flow again
        wait_for(lambda: notes("notifications/message"), what="the log notification")
        call(toolset, "touch", uri="note://current")  # the subscription was renewed
        wait_for(lambda: notes("notifications/resources/updated"), what="the resource update")
        session.close()


def test_a_server_that_dies_while_idle_is_disconnected_and_keeps_its_tools_until_the_next_call():
    with no_leaks(), connect_mcp({"demo": stdio(DEMO), "other": stdio(DEMO)}, reconnect=FAST) as toolset:
        pid = int(call(toolset, "demo__pid"))
        os.kill(pid, signal.SIGKILL)
        # the subscriptions/listen stream ends, and the probe that follows finds no server
        wait_for(lambda: toolset.servers["demo"].status == "disconnected", what="the loss to be noticed")
        assert "lost its connection" in toolset.servers["demo"].error
        assert "demo__add" in toolset.tool_name_map  # still offered: calling it reconnects
        assert call(toolset, "demo__add", a=1, b=1) == "2"
        assert toolset.servers["demo"].connected and toolset.servers["demo"].error is None


def test_a_call_in_flight_when_the_server_dies_is_not_repeated(tmp_path):
    log = tmp_path / "calls.log"
    with no_leaks(), connect_mcp({"demo": stdio(DEMO, env={"AGENTKIT_MCP_TEST_LOG": str(log)})},
                                 reconnect=FAST) as toolset:
        output = by_name(toolset)["crash"]()
        assert output.is_error
        text = output.as_text()
        assert "may or may not have taken effect" in text and "not repeated" in text
        assert toolset.servers["demo"].status == "disconnected"
        assert "crash" in toolset.tool_name_map  # listed: the next call reconnects
        assert call(toolset, "add", a=2, b=2) == "4"
        assert log.read_text().splitlines() == ["crash", "add 2 2"]  # the crash ran once


def _versioned_server(version: int) -> MCPServer:
    server = MCPServer(f"v{version}")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def header(name: str, ctx: Context) -> str:
        """The value of an HTTP request header."""
        return (ctx.headers or {}).get(name.lower(), "")

    if version > 1:
        @server.tool()
        def added_in_v2() -> str:
            """Only the second deployment has it."""
            return "new"

    return server


class Deployment:
    """An HTTP MCP server on a fixed port; every start deploys the next version."""

    def __init__(self) -> None:
        self.version = 0

        def make_app():
            self.version += 1
            return _versioned_server(self.version).streamable_http_app(host="127.0.0.1")

        self.thread = ServerThread(make_app)

    @property
    def url(self) -> str:
        return self.thread.base + "/mcp"


def test_an_http_server_that_drops_is_reconnected_with_fresh_headers_and_tool_list():
    deploy = Deployment()
    issued: list[str] = []

    def headers() -> dict[str, str]:  # a rotating token, read at every (re)connect
        issued.append(f"token-{len(issued) + 1}")
        return {"Authorization": f"Bearer {issued[-1]}"}

    patient = RetryPolicy(max_retries=20, initial_delay=0.05, max_delay=0.3, max_elapsed=30.0)
    with deploy.thread:
        with connect_mcp({"web": {"url": deploy.url, "headers": headers}}, reconnect=patient) as toolset:
            assert call(toolset, "header", name="Authorization") == "Bearer token-1"
            assert "added_in_v2" not in toolset.tool_name_map
            deploy.thread.stop()
            redeploy = threading.Timer(0.5, deploy.thread.start)  # back after a while
            redeploy.start()

            assert call(toolset, "add", a=20, b=22) == "42"  # refused while down: sent after reconnecting
            redeploy.join()
            assert toolset.servers["web"].connected and deploy.version == 2
            assert "added_in_v2" in toolset.tool_name_map  # the tool list was refreshed
            # read again at every connect attempt; the one that connected is in use
            assert len(issued) >= 2 and call(toolset, "header", name="Authorization") == f"Bearer {issued[-1]}"

            deploy.thread.restart()  # a 2026-era connection is stateless: a restart is transparent
            assert call(toolset, "add", a=1, b=1) == "2"


def test_a_server_down_for_longer_fails_clearly_after_bounded_attempts_then_comes_back(caplog):
    deploy = Deployment()
    deploy.thread.start()
    try:
        with connect_mcp({"web": {"url": deploy.url}}, reconnect=FAST) as toolset:
            add = by_name(toolset)["add"]
            deploy.thread.stop()
            with caplog.at_level(logging.INFO, logger="agentkit.mcp"):
                output = add(a=1, b=1)
            assert output.is_error and "MCP server 'web' is not connected" in output.as_text()
            assert "reconnecting failed after 3 attempt(s)" in output.as_text()
            attempts = [r for r in caplog.records if "reconnecting (attempt" in r.getMessage()]
            assert len(attempts) == 3
            assert toolset.servers["web"].status == "failed" and toolset.tools == ()

            deploy.thread.start()
            assert add(a=1, b=1).as_text() == "2"  # a held tool reconnects a failed server
            assert toolset.servers["web"].connected and len(toolset.tools) == 3
    finally:
        deploy.thread.stop()


def test_without_reconnect_a_lost_server_stays_failed():
    with no_leaks(), connect_mcp({"demo": stdio(DEMO)}, reconnect=None) as toolset:
        pid = int(call(toolset, "pid"))
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not alive(pid), what="the server to die")
        output = by_name(toolset)["add"](a=1, b=2)
        assert output.is_error and "not connected" in output.as_text() or "stopped responding" in output.as_text()
        assert toolset.servers["demo"].status == "failed"


def test_bad_reconnect_and_headers_values_are_refused():
    with pytest.raises(ConfigurationError, match="reconnect must be"):
        connect_mcp({"demo": stdio(DEMO)}, reconnect=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="'headers' must be a dict"):
        connect_mcp({"web": {"url": "http://127.0.0.1:1/mcp", "headers": "Bearer x"}})


def test_parallel_calls_meeting_a_dead_server_share_one_reconnect(tmp_path):
    log = tmp_path / "calls.log"
    with no_leaks(), connect_mcp({"demo": stdio(DEMO, env={"AGENTKIT_MCP_TEST_LOG": str(log)})},
                                 reconnect=FAST) as toolset:
        first = int(call(toolset, "pid"))
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: toolset.servers["demo"].status == "disconnected", what="the loss to be noticed")
        add = by_name(toolset)["add"]
        results: list[str] = []
        threads = [threading.Thread(target=lambda i=i: results.append(add(a=i, b=100).as_text()))
                   for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(results) == sorted(str(100 + i) for i in range(8))
        assert len({int(call(toolset, "pid")) for _ in range(3)}) == 1
        assert sorted(log.read_text().splitlines()) == sorted(f"add {i} 100" for i in range(8))  # each once


def test_close_during_a_reconnect_backoff_ends_the_waiting_call_at_once():
    deploy = Deployment()
    deploy.thread.start()
    slow = RetryPolicy(max_retries=5, initial_delay=30.0, max_delay=30.0, max_elapsed=300.0, jitter=0.0)
    toolset = connect_mcp({"web": {"url": deploy.url}}, reconnect=slow)
    try:
        add = by_name(toolset)["add"]
        deploy.thread.stop()
        out: list[object] = []
        caller = threading.Thread(target=lambda: out.append(add(a=1, b=1)))
        caller.start()
        wait_for(lambda: toolset.servers["web"].status == "reconnecting", what="the reconnect round")
        threading.Event().wait(0.3)  # the first attempt failed; the round sleeps 30 s now
        toolset.close()
        caller.join(10)
        assert not caller.is_alive() and out and out[0].is_error
        assert toolset.servers["web"].status in ("closed", "failed")
    finally:
        toolset.close()
        deploy.thread.stop()


def test_delivery_tracking_keeps_the_proxies_of_the_environment(monkeypatch):
    import httpx2

    from agentkit.mcp._reconnect import TrackingTransport, track_deliveries

    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    http = httpx2.AsyncClient()
    proxied = [t for t in http._mounts.values() if t is not None]
    assert proxied  # httpx2 honours the environment's proxy for a client built like ours
    assert track_deliveries(http, "http://mcp.example/mcp")
    assert all(isinstance(t, TrackingTransport) for t in http._mounts.values() if t is not None)
    assert isinstance(http._transport, TrackingTransport)


def test_a_round_stops_when_its_time_budget_is_spent(caplog):
    deploy = Deployment()
    deploy.thread.start()
    budget = RetryPolicy(max_retries=50, initial_delay=0.2, max_delay=0.2, max_elapsed=0.5, jitter=0.0)
    try:
        with connect_mcp({"web": {"url": deploy.url}}, reconnect=budget) as toolset:
            add = by_name(toolset)["add"]
            deploy.thread.stop()
            with caplog.at_level(logging.INFO, logger="agentkit.mcp"):
                output = add(a=1, b=1)
            attempts = [r for r in caplog.records if "reconnecting (attempt" in r.getMessage()]
            assert 1 <= len(attempts) <= 3  # 50 allowed, but 0.5 s holds at most 3 with 0.2 s waits
            assert f"reconnecting failed after {len(attempts)} attempt(s)" in output.as_text()
    finally:
        deploy.thread.stop()
