"""MCP tools over real stdio subprocesses, driven from plain synchronous code."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from mcp_servers.helpers import DEMO, GARBAGE, HANG, PAGED, alive, children, no_leaks, stdio, wait_for

from agentkit import (
    CancelledError,
    CancelToken,
    ConfigurationError,
    McpError,
    ScriptedModel,
    Session,
    ToolCall,
    run_agent,
)
from agentkit.mcp import McpToolRef, connect_mcp
from agentkit.messages import ToolResultPart


def last_results(request):
    return [p.output for p in request.messages[-1].content if isinstance(p, ToolResultPart)]


@pytest.fixture(scope="module")
def demo():
    """One demo server shared by the read-only tests of this module."""
    with connect_mcp({"demo": stdio(DEMO)}) as toolset:
        yield toolset


def by_name(toolset):
    return {t.name: t for t in toolset.tools}


def test_run_agent_drives_a_real_stdio_server(demo):
    model = ScriptedModel([
        ToolCall("add", {"a": 20, "b": 22}),
        lambda r: f"the answer is {last_results(r)[0].as_text()}",
    ])
    result = run_agent(model, "add 20 and 22", tools=demo.tools)
    assert result.text == "the answer is 42"
    call = result.tool_calls[0]
    assert (call.tool_name, call.input, call.is_error) == ("add", {"a": 20, "b": 22}, False)
    assert demo.servers["demo"].connected and demo.servers["demo"].transport == "stdio"
    assert demo.servers["demo"].server_name == "demo"


def test_single_server_tools_keep_their_names_schemas_and_hints(demo):
    tools = by_name(demo)
    assert {"add", "echo", "fail", "media", "record", "crash"} <= set(tools)
    assert demo.tool_name_map["add"] == McpToolRef(server="demo", tool="add")
    assert tools["add"].input_schema["required"] == ["a", "b"]
    assert tools["add"].description == "Add two integers."
    assert tools["echo"].read_only is True and tools["add"].read_only is False


def test_inputs_are_validated_against_the_server_schema_before_calling(demo):
    model = ScriptedModel([ToolCall("add", {"a": "one", "b": 2}), "ok"])
    result = run_agent(model, "add", tools=demo.tools)
    err = result.tool_calls[0].error
    assert err is not None and "invalid input for tool 'add'" in err and "$.a" in err


def test_is_error_results_reach_the_model_as_error_results(demo):
    model = ScriptedModel([ToolCall("fail", {"reason": "disk on fire"}), "noted"])
    result = run_agent(model, "try", tools=demo.tools)
    call = result.tool_calls[0]
    assert call.is_error and "refused: disk on fire" in call.error
    assert result.text == "noted"


def test_images_audio_and_resources_become_content_parts(demo):
    out = by_name(demo)["media"]()
    assert out.kind == "content"
    kinds = [p.kind for p in out.value]
    assert kinds == ["text", "image", "file", "text"]
    assert out.value[1].data.startswith(b"\x89PNG") and out.value[1].media_type == "image/png"
    assert out.value[2].data == b"RIFF-audio" and out.value[2].media_type == "audio/wav"
    assert out.value[3].text == "resource text"


def test_calls_from_many_threads_at_once(demo):
    add = by_name(demo)["add"]
    results: dict[int, object] = {}
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            for j in range(5):
                results[i * 10 + j] = add(a=i, b=j).as_text()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert results == {i * 10 + j: str(i + j) for i in range(8) for j in range(5)}


def test_parallel_agent_runs_share_one_toolset(demo):
    def run(i: int) -> str:
        model = ScriptedModel([[ToolCall("add", {"a": i, "b": 1}), ToolCall("echo", {"text": str(i)})],
                               lambda r: "|".join(o.as_text() for o in last_results(r))])
        return run_agent(model, "go", tools=demo.tools).text

    out: dict[int, str] = {}
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, run(i))) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert out == {i: f"{i + 1}|echo: {i}" for i in range(4)}


def test_works_when_the_calling_thread_already_runs_an_asyncio_loop(demo):
    async def inside_a_loop():
        shared = by_name(demo)["add"](a=3, b=4).as_text()
        with connect_mcp({"own": stdio(DEMO)}) as mine:  # connecting inside a running loop too
            own = by_name(mine)["add"](a=1, b=1).as_text()
        return shared, own

    with no_leaks():
        assert asyncio.run(inside_a_loop()) == ("7", "2")


def test_close_during_a_call_gives_that_call_an_error_result():
    with no_leaks():
        toolset = connect_mcp({"demo": stdio(DEMO)})
        slow = by_name(toolset)["slow"]
        box: list = []
        worker = threading.Thread(target=lambda: box.append(slow(seconds=30)))
        worker.start()
        time.sleep(1.0)
        toolset.close()
        worker.join(60)
        assert not worker.is_alive()
        (out,) = box
        assert out.is_error and "closed" in out.value


def test_a_call_timeout_becomes_an_error_result_and_the_server_stays_usable():
    with no_leaks(), connect_mcp({"demo": stdio(DEMO)}, call_timeout=3.0) as toolset:
        tools = by_name(toolset)
        out = tools["slow"](seconds=60)
        assert out.is_error and "no answer within 3s" in out.value
        assert tools["add"](a=1, b=1).as_text() == "2"


def test_cancelling_the_token_stops_the_call(demo):
    token = CancelToken()
    model = ScriptedModel([ToolCall("slow", {"seconds": 30}), "never"])
    threading.Timer(0.5, token.cancel, args=("user pressed stop",)).start()
    with pytest.raises(CancelledError):
        run_agent(model, "slow", tools=demo.tools, cancel=token)
    assert by_name(demo)["add"](a=2, b=2).as_text() == "4"


@pytest.mark.parametrize("how", ["token", "call_timeout", "ctrl_c"])
def test_an_abandoned_call_is_cancelled_on_the_server(tmp_path, how, request):
    """Whatever ends the wait in the calling thread (its CancelToken, call_timeout, or
    Ctrl-C), the request on the server is cancelled too, and the server stays usable."""
    import _thread

    from agentkit import ToolContext

    log = tmp_path / "calls.log"

    def server_saw(line: str) -> bool:
        return log.exists() and line in log.read_text().splitlines()

    token = CancelToken()

    def stop_when_started() -> None:
        wait_for(lambda: server_saw("slow 30.0"), what="the slow call to start")
        if how == "token":
            token.cancel("user pressed stop")
        elif how == "ctrl_c":
            _thread.interrupt_main()

    if how == "ctrl_c":
        # interrupt_main() acts like SIGINT only where Python handles SIGINT; a process
        # started in the background by a shell (as CI may be) inherits SIGINT ignored
        import signal

        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    cfg = stdio(DEMO, env={"AGENTKIT_MCP_TEST_LOG": str(log)})
    with no_leaks(), connect_mcp({"demo": cfg}, call_timeout=5 if how == "call_timeout" else 120) as toolset:
        slow = by_name(toolset)["slow"]
        ctx = ToolContext(tool_call_id="c1", tool_name="slow", cancel=token)
        stopper = threading.Thread(target=stop_when_started)
        stopper.start()
        if how == "token":
            with pytest.raises(CancelledError, match="user pressed stop"):
                slow.fn(seconds=30, **{slow.context_param: ctx})
        elif how == "ctrl_c":
            with pytest.raises(KeyboardInterrupt):
                slow.fn(seconds=30, **{slow.context_param: ctx})
        else:
            out = slow.fn(seconds=30, **{slow.context_param: ctx})
            assert out.is_error and "no answer within 5s" in out.value
        stopper.join(30)
        wait_for(lambda: server_saw("slow 30.0 cancelled"), what="the server to see the cancellation")
        assert by_name(toolset)["add"](a=1, b=1).as_text() == "2"


def test_authorization_runs_first_and_a_denial_sends_nothing(tmp_path):
    log = tmp_path / "calls.log"
    seen: list[tuple] = []

    def authorize(server, tool, arguments, call_id):
        seen.append((server, tool, arguments, call_id))
        if arguments.get("note") == "secret":
            raise PermissionError("notes marked secret stay local")

    model = ScriptedModel([
        ToolCall("record", {"note": "secret"}, id="c1"),
        ToolCall("record", {"note": "public"}, id="c2"),
        "done",
    ])
    with no_leaks(), connect_mcp({"demo": stdio(DEMO, env={"AGENTKIT_MCP_TEST_LOG": str(log)})},
                                 authorize_tool_call=authorize) as toolset:
        result = run_agent(model, "record", tools=toolset.tools)
    denied, allowed = result.tool_calls
    assert denied.is_error and "denied" in denied.error and "notes marked secret stay local" in denied.error
    assert not allowed.is_error and allowed.output.as_text() == "recorded"
    assert seen == [("demo", "record", {"note": "secret"}, "c1"), ("demo", "record", {"note": "public"}, "c2")]
    assert log.read_text().splitlines() == ["record public"]


def test_a_server_crashing_mid_call_gives_an_error_result_and_the_session_goes_on():
    model = ScriptedModel([
        ToolCall("demo__crash"),
        ToolCall("demo__add", {"a": 1, "b": 2}),
        ToolCall("other__add", {"a": 5, "b": 5}),
        "carried on",
    ])
    # (reconnect=None: without reconnecting, a lost server stays failed; see test_mcp_reconnect.py)
    with no_leaks(), connect_mcp({"demo": stdio(DEMO), "other": stdio(DEMO)}, reconnect=None) as toolset:
        pid = int(by_name(toolset)["demo__pid"]().as_text())
        with Session(model, tools=toolset.tools) as session:
            session.push_user_message("crash it")
            result = session.generate()
        crash, after, other = result.tool_calls
        assert crash.is_error and "stopped responding" in crash.error
        assert after.is_error and "not connected" in after.error
        assert not other.is_error and other.output.as_text() == "10"
        assert result.text == "carried on"
        status = toolset.servers["demo"]
        assert status.status == "failed" and "lost its connection" in status.error
        assert toolset.servers["other"].connected
        assert not any(n.startswith("demo__") for n in toolset.tool_name_map)
        wait_for(lambda: not alive(pid), what="the crashed server to be gone")


def test_a_server_that_dies_while_idle_is_reported_and_its_tools_leave():
    import signal

    with no_leaks(), connect_mcp({"demo": stdio(DEMO), "other": stdio(DEMO)}, reconnect=None) as toolset:
        pid = int(by_name(toolset)["demo__pid"]().as_text())
        demo_add = by_name(toolset)["demo__add"]
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: toolset.servers["demo"].status == "failed", what="the dead server to be reported")
        assert "lost its connection" in toolset.servers["demo"].error
        assert not any(n.startswith("demo__") for n in toolset.tool_name_map)
        assert toolset.servers["other"].connected and "other__add" in toolset.tool_name_map
        out = demo_add(a=1, b=1)  # a Session built earlier still holds this tool
        assert out.is_error and "MCP server 'demo' is not connected (lost its connection" in out.value


def test_a_server_that_hangs_on_connect_is_reported_while_the_others_mount():
    with no_leaks():
        start = time.monotonic()
        # generous for a loaded machine: the demo server must start within it
        toolset = connect_mcp({"stuck": stdio(HANG), "demo": stdio(DEMO)}, connect_timeout=8)
        try:
            assert time.monotonic() - start < 90
            stuck = toolset.servers["stuck"]
            assert stuck.status == "failed" and "connect_timeout" in stuck.error
            assert toolset.servers["demo"].connected
            assert "demo__add" in toolset.tool_name_map
            assert not any(n.startswith("stuck__") for n in toolset.tool_name_map)
            assert by_name(toolset)["demo__add"](a=1, b=1).as_text() == "2"
        finally:
            toolset.close()


def test_fail_on_no_tools_raises_and_leaves_nothing_running():
    servers = {"stuck": stdio(HANG), "missing": {"command": "/nonexistent/mcp-server"},
               "exits": {"command": sys.executable, "args": ["-c", "pass"]}}
    with no_leaks(), pytest.raises(McpError, match="no MCP server mounted any tool") as info:
        connect_mcp(servers, connect_timeout=5, fail_on_no_tools=True)
    text = str(info.value)
    assert "stuck:" in text and "connect_timeout" in text
    assert "missing: failed to connect: FileNotFoundError" in text
    assert "check that 'command' '/nonexistent/mcp-server' is an installed executable" in text
    assert "exits: failed to connect" in text and "exited or closed its stdout before answering" in text


def test_a_server_writing_garbage_to_stdout_fails_at_once_without_a_traceback_flood(tmp_path):
    # A user's script, as run from a terminal: what it prints to stderr is what they see.
    script = tmp_path / "garbage_user.py"
    script.write_text(
        "import sys\n"
        "from agentkit import McpError\n"
        "from agentkit.mcp import connect_mcp\n"
        "try:\n"
        f"    connect_mcp({{'bad': {{'command': sys.executable, 'args': [{GARBAGE!r}]}}}},\n"
        "                connect_timeout=600, fail_on_no_tools=True)\n"
        "except McpError as exc:\n"
        "    print(exc)\n"
    )
    root = Path(__file__).resolve().parents[1]
    # The bound is generous (the connect timeout is 600 s): waiting it out would fail here.
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr
    assert "bad: server wrote invalid output (not a JSON-RPC message): 'Starting notes server v1.2 ...'" in out.stdout
    assert "must write only MCP messages to stdout" in out.stdout
    assert "Traceback" not in out.stderr and "Failed to parse" not in out.stderr
    assert "ValidationError" not in out.stderr
    # one line saying which server failed and why, not one traceback per garbage line
    assert out.stderr.count("server wrote invalid output") <= 1
    assert len(out.stderr.splitlines()) <= 2, out.stderr


def test_a_garbage_writing_server_fails_while_the_others_mount_and_its_child_is_stopped(caplog):
    with no_leaks():
        # a 600 s connect timeout: waiting it out would trip the test's own timeout
        toolset = connect_mcp({"bad": stdio(GARBAGE), "demo": stdio(DEMO)}, connect_timeout=600)
        try:
            bad = toolset.servers["bad"]
            assert bad.status == "failed"
            assert bad.error.startswith("server wrote invalid output (not a JSON-RPC message): "
                                        "'Starting notes server v1.2 ...'")
            assert toolset.servers["demo"].connected
            assert not any(n.startswith("bad__") for n in toolset.tool_name_map)
        finally:
            toolset.close()
    assert not [r for r in caplog.records if "Failed to parse" in r.getMessage()]


def test_garbage_after_connecting_is_one_warning_and_the_server_keeps_working(caplog):
    with no_leaks(), connect_mcp({"chatty": stdio(GARBAGE, "--mid-session")}) as toolset:
        chatty = by_name(toolset)["chatty"]
        assert chatty(text="one").as_text() == "ok: one"
        assert chatty(text="two").as_text() == "ok: two"
        status = toolset.servers["chatty"]
        assert status.connected
        assert [w for w in status.warnings if "invalid output" in w] == [
            "server wrote invalid output (not a JSON-RPC message): 'DEBUG chatty called with one'; an MCP "
            "stdio server must write only MCP messages to stdout (its logs and prints belong on stderr); "
            "such lines are ignored"
        ]
    assert not [r for r in caplog.records if "Failed to parse" in r.getMessage()]


def test_paginated_listing_follows_cursors_and_names_collisions():
    with no_leaks(), connect_mcp({"paged": stdio(PAGED, "normal")}) as toolset:
        names = list(toolset.tool_name_map)
        assert names[:5] == ["alpha", "beta", "gamma", "dotted_name", "dotted_name_2"]
        assert len(names) == 6 and len(names[5]) == 64
        assert toolset.tool_name_map["dotted_name"] == McpToolRef(server="paged", tool="dotted.name")
        assert toolset.tool_name_map["dotted_name_2"] == McpToolRef(server="paged", tool="dotted name")
        tools = by_name(toolset)
        assert tools["dotted_name_2"](n=3).as_text() == "dotted name:3"
        assert tools[names[5]](n=1).as_text() == "x" * 80 + ":1"
        assert toolset.servers["paged"].warnings == ()
        toolset.refresh()  # listing again gives the same names in the same order
        assert list(toolset.tool_name_map) == names


def test_a_repeated_cursor_stops_the_listing():
    with no_leaks(), connect_mcp({"paged": stdio(PAGED, "repeat")}) as toolset:
        assert list(toolset.tool_name_map) == ["alpha", "beta", "gamma", "dotted_name"]
        (warning,) = toolset.servers["paged"].warnings
        assert "cursor 'c1' a second time" in warning


def test_an_endless_listing_stops_at_max_list_pages():
    with no_leaks(), connect_mcp({"paged": stdio(PAGED, "endless")}, max_list_pages=5) as toolset:
        assert list(toolset.tool_name_map) == ["t0", "t1", "t2", "t3", "t4"]
        assert "max_list_pages=5" in toolset.servers["paged"].warnings[0]


def test_several_servers_get_prefixed_names_and_colliding_ones_get_suffixes():
    servers = {"x.y": stdio(PAGED, "normal"), "x_y": stdio(PAGED, "normal")}
    with no_leaks(), connect_mcp(servers) as toolset:
        m = toolset.tool_name_map
        assert m["x_y__alpha"] == McpToolRef(server="x.y", tool="alpha")
        assert m["x_y__alpha_2"] == McpToolRef(server="x_y", tool="alpha")
        assert len(m) == 12 and all(len(n) <= 64 for n in m)
        tools = by_name(toolset)
        assert tools["x_y__alpha_2"](n=7).as_text() == "alpha:7"


def test_list_changed_refreshes_tools_and_notifications_reach_the_session():
    with no_leaks(), connect_mcp({"demo": stdio(DEMO)}) as toolset:
        session = Session(ScriptedModel([]))
        stop = toolset.forward_notifications(session)
        tools = by_name(toolset)
        assert "extra" not in tools
        assert tools["shout"](message="hello from the server").as_text() == "shouted"
        assert tools["grow"]().as_text() == "grown"
        wait_for(lambda: "extra" in toolset.tool_name_map, what="the refreshed tool list")
        assert by_name(toolset)["extra"]().as_text() == "extra!"

        def notes():
            return [e.data for e in session.events if getattr(e, "runtime_type", None) == "mcp-notification"]

        wait_for(lambda: len(notes()) >= 2, what="forwarded notifications")
        log_note = next(n for n in notes() if n["method"] == "notifications/message")
        assert log_note == {"server": "demo", "method": "notifications/message",
                            "params": {"level": "info", "data": "hello from the server"}}
        assert any(n["method"] == "notifications/tools/list_changed" for n in notes())
        stop()
        count = len(notes())
        tools["shout"](message="not forwarded")
        time.sleep(0.3)
        assert len(notes()) == count
        session.close()


def test_resource_updates_reach_the_session_after_subscribing():
    with no_leaks(), connect_mcp({"demo": stdio(DEMO)}) as toolset:
        session = Session(ScriptedModel([]))
        toolset.forward_notifications(session, methods=("notifications/resources/updated",))
        touch = by_name(toolset)["touch"]

        def updates():
            return [e.data for e in session.events if getattr(e, "runtime_type", None) == "mcp-notification"]

        touch(uri="note://current")  # not subscribed yet: the server sends nothing
        toolset.subscribe_resource("demo", "note://current")
        toolset.subscribe_resource("demo", "note://current")  # a second time: no second stream
        touch(uri="note://other")
        touch(uri="note://current")
        wait_for(lambda: updates(), what="the resource update")
        time.sleep(0.3)
        assert updates() == [{"server": "demo", "method": "notifications/resources/updated",
                              "params": {"uri": "note://current"}}]
        with pytest.raises(ConfigurationError, match="no MCP server named 'nope'"):
            toolset.subscribe_resource("nope", "note://current")
        session.close()
    with pytest.raises(McpError, match="closed"):
        toolset.subscribe_resource("demo", "note://current")


def test_close_stops_children_and_threads_and_later_calls_are_errors():
    kids = children()
    before = set(threading.enumerate())
    toolset = connect_mcp({"a": stdio(DEMO), "b": stdio(DEMO)})
    pids = [int(by_name(toolset)[f"{s}__pid"]().as_text()) for s in ("a", "b")]
    assert all(alive(p) for p in pids)
    assert set(threading.enumerate()) - before  # the loop thread runs
    add = by_name(toolset)["a__add"]
    toolset.close()
    toolset.close()  # idempotent
    wait_for(lambda: not any(alive(p) for p in pids), what="server processes to exit")
    wait_for(lambda: not (children() - kids), what="no child processes")
    wait_for(lambda: not [t for t in set(threading.enumerate()) - before if t.is_alive()], what="threads")
    assert toolset.closed and all(s.status == "closed" for s in toolset.servers.values())
    out = add(a=1, b=1)
    assert out.is_error and "closed" in out.value
    with pytest.raises(McpError, match="closed"):
        toolset.refresh()


def test_interpreter_exit_without_close_stops_the_servers(tmp_path):
    script = tmp_path / "forgets_close.py"
    script.write_text(
        "import sys\n"
        "from agentkit.mcp import connect_mcp\n"
        f"toolset = connect_mcp({{'demo': {{'command': sys.executable, 'args': [{DEMO!r}]}}}})\n"
        "print({t.name: t for t in toolset.tools}['pid']().as_text(), flush=True)\n"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr
    pid = int(out.stdout.strip())
    wait_for(lambda: not alive(pid), what="the orphaned server to exit")


def test_a_garbage_collected_toolset_shuts_down():
    with no_leaks():
        toolset = connect_mcp({"demo": stdio(DEMO)})
        pid = int(by_name(toolset)["pid"]().as_text())
        del toolset
        gc.collect()
        wait_for(lambda: not alive(pid), what="the server of a collected toolset to exit")


def test_handshake_era_connections_refresh_on_list_changed_and_forward_logs():
    import sys as _sys

    from mcp import Client, StdioServerParameters

    client = Client(StdioServerParameters(command=_sys.executable, args=[DEMO]), mode="legacy")
    with no_leaks(), connect_mcp({"old": client}) as toolset:
        status = toolset.servers["old"]
        assert status.connected and status.protocol_version == "2025-11-25"
        received: list[dict] = []
        toolset.add_notification_listener(received.append)
        tools = by_name(toolset)
        tools["shout"](message="legacy hello")
        assert tools["grow"]().as_text() == "grown"
        wait_for(lambda: "extra" in toolset.tool_name_map, what="the refreshed tool list")
        wait_for(lambda: any(n["method"] == "notifications/message" for n in received), what="log note")
        note = next(n for n in received if n["method"] == "notifications/message")
        assert note == {"server": "old", "method": "notifications/message",
                        "params": {"level": "info", "data": "legacy hello"}}


def test_close_from_several_threads_at_once_returns_only_when_all_is_down():
    with no_leaks():
        toolset = connect_mcp({"demo": stdio(DEMO)})
        pid = int(by_name(toolset)["pid"]().as_text())
        barrier = threading.Barrier(4)
        alive_after: list[bool] = []

        def closer() -> None:
            barrier.wait(30)
            toolset.close()
            alive_after.append(alive(pid))

        threads = [threading.Thread(target=closer) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert alive_after == [False] * 4


def test_a_shutdown_started_on_the_loop_thread_still_stops_everything():
    """A toolset whose last reference goes away on its own loop thread (say, inside a
    tools/list_changed rebuild) is finalized there; that must neither deadlock nor leak."""
    with no_leaks():
        toolset = connect_mcp({"demo": stdio(DEMO)})
        pid = int(by_name(toolset)["pid"]().as_text())
        runtime = toolset._rt
        runtime.loop.call(runtime.shutdown, timeout=30)  # what a finalizer run there does
        assert runtime.shut_down.wait(60)
        assert not alive(pid) and toolset.closed
