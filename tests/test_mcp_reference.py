"""agentkit's MCP client against the protocol's own reference servers
(``@modelcontextprotocol/server-everything``, ``-filesystem``, ``-memory``, pinned in
tests/mcp_servers/node/package-lock.json): progress, roots, sampling, elicitation,
resources, prompts, and structured content. See tests/mcp_servers/reference.py for how
the servers are found (skipped on a developer machine without them, failing in CI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import openai_wire as ow
from fakes.server import FakeServer
from mcp_servers.helpers import wait_for
from mcp_servers.reference import reference_server

from agentkit import ConfigurationError, McpError, ScriptedModel, Session, ToolCall, run_agent, run_agent_stream
from agentkit.execution import LocalExecutionContext
from agentkit.mcp import ElicitationRequest, ElicitationResult, SamplingRequest, connect_mcp
from agentkit.messages import FilePart, Message, TextPart


def _tool(mcp, name: str):
    wait_for(lambda: any(t.name == name for t in mcp.tools), what=f"tool {name!r} to be listed")
    return next(t for t in mcp.tools if t.name == name)


def _text(output) -> str:
    assert output.kind in ("text", "error-text"), output
    return output.value


# -- capabilities are offered only when configured ---------------------------------------


def test_nothing_is_offered_without_roots_sampling_or_elicitation():
    with connect_mcp({"ev": reference_server("everything")}) as mcp:
        mcp.refresh()  # the server registers its capability-dependent tools at initialization
        names = {t.name for t in mcp.tools}
        assert "echo" in names
        assert not names & {"get-roots-list", "trigger-sampling-request", "trigger-elicitation-request"}
        assert mcp.roots("ev") is None
        with pytest.raises(ConfigurationError, match="connected without roots"):
            mcp.set_roots(["/tmp"], server="ev")
        with pytest.raises(ConfigurationError, match="no MCP server was connected with roots"):
            mcp.set_roots(["/tmp"])


# -- progress ---------------------------------------------------------------------------


def test_progress_notifications_become_tool_updates_during_a_long_running_call():
    model = ScriptedModel([ToolCall("trigger-long-running-operation", {"duration": 0.3, "steps": 3},
                                    id="call-1"), "done"])
    updates: list[tuple[str, dict]] = []
    with connect_mcp({"ev": reference_server("everything")}) as mcp:
        result = run_agent(model, "run it", tools=mcp.tools,
                           on_tool_call_update=lambda cid, u: updates.append((cid, u)))
    assert result.text == "done"
    assert [cid for cid, _ in updates] == ["call-1"] * 3
    assert [(u["progress"], u["total"]) for _, u in updates] == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]
    assert updates[0][1]["server"] == "ev" and updates[0][1]["tool"] == "trigger-long-running-operation"
    assert "message" in updates[0][1]


def test_progress_reaches_the_agent_stream_as_tool_update_events():
    model = ScriptedModel([ToolCall("trigger-long-running-operation", {"duration": 0.2, "steps": 2},
                                    id="call-2"), "done"])
    with connect_mcp({"ev": reference_server("everything")}) as mcp:
        with run_agent_stream(model, "run it", tools=mcp.tools) as stream:
            events = [json.loads(json.dumps(e.to_dict())) for e in stream]
    updates = [e for e in events if e["type"] == "tool-update"]
    assert [(e["tool_call_id"], e["update"]["progress"], e["update"]["total"]) for e in updates] == [
        ("call-2", 1.0, 2.0), ("call-2", 2.0, 2.0)]
    kinds = [e["type"] for e in events]
    assert kinds.index("tool-start") < kinds.index("tool-update") < kinds.index("tool-end")


# -- roots ------------------------------------------------------------------------------


def test_roots_round_trip_and_list_changed(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    with connect_mcp({"ev": reference_server("everything")}, roots=[first]) as mcp:
        get_roots = _tool(mcp, "get-roots-list")
        text = _text(get_roots.fn())
        assert "(1 total)" in text and first.resolve().as_uri() in text
        assert mcp.roots("ev") == (first.resolve().as_uri(),)

        mcp.set_roots([second, first.resolve().as_uri()])
        # the server asks roots/list again when it hears roots/list_changed
        wait_for(lambda: second.resolve().as_uri() in _text(get_roots.fn()), what="the new roots")
        assert "(2 total)" in _text(get_roots.fn())


def test_roots_default_to_an_execution_context_root_and_per_server_roots_win(tmp_path):
    ctx_root, own = tmp_path / "workspace", tmp_path / "own"
    ctx_root.mkdir()
    own.mkdir()
    execution = LocalExecutionContext(ctx_root)
    try:
        servers = {"a": reference_server("everything"), "b": {**reference_server("everything"), "roots": [own]}}
        with connect_mcp(servers, roots=execution) as mcp:
            assert mcp.roots("a") == (ctx_root.resolve().as_uri(),)
            assert mcp.roots("b") == (own.resolve().as_uri(),)
            assert own.resolve().as_uri() in _text(_tool(mcp, "b__get-roots-list").fn())
    finally:
        execution.close()


def test_bad_roots_are_refused_before_anything_starts(tmp_path):
    with pytest.raises(ConfigurationError, match="not an existing directory"):
        connect_mcp({"ev": reference_server("everything")}, roots=[tmp_path / "missing"])
    with pytest.raises(ConfigurationError, match="list of directories"):
        connect_mcp({"ev": reference_server("everything")}, roots=str(tmp_path))
    with pytest.raises(ConfigurationError, match="'roots'.*not an existing directory"):
        connect_mcp({"ev": {**reference_server("everything"), "roots": ["/no/such/dir"]}})


def test_the_filesystem_server_is_confined_to_the_announced_root(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("do not read")
    (root / "notes.txt").write_text("inside")
    with connect_mcp({"fs": reference_server("filesystem")}, roots=[root]) as mcp:
        tools = {t.name: t for t in mcp.tools}
        wait_for(lambda: str(root.resolve()) in _text(tools["list_allowed_directories"].fn()),
                 what="the server to adopt the announced root")

        # structured content that only restates the text ({"content": text}) is not repeated
        wrote = tools["write_file"].fn(path=str(root / "new.txt"), content="hello")
        assert wrote.kind == "text" and wrote.value == f"Successfully wrote to {root / 'new.txt'}"
        assert (root / "new.txt").read_text() == "hello"
        assert _text(tools["read_text_file"].fn(path=str(root / "notes.txt"))) == "inside"

        denied = tools["read_text_file"].fn(path=str(outside / "secret.txt"))
        assert denied.kind == "error-text" and "Access denied" in denied.value
        refused = tools["write_file"].fn(path=str(outside / "x.txt"), content="no")
        assert refused.kind == "error-text" and not (outside / "x.txt").exists()

        mcp.set_roots([outside])  # the confinement follows the roots
        wait_for(lambda: str(outside.resolve()) in _text(tools["list_allowed_directories"].fn()),
                 what="the server to adopt the new root")
        assert _text(tools["read_text_file"].fn(path=str(outside / "secret.txt"))) == "do not read"
        assert tools["read_text_file"].fn(path=str(root / "notes.txt")).kind == "error-text"


def test_session_roots_follow_the_execution_context_of_the_calling_session(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "notes.txt").write_text("inside")
    (outside / "secret.txt").write_text("do not read")
    execution = LocalExecutionContext(root)
    try:
        with connect_mcp({"fs": reference_server("filesystem")}, roots="session") as mcp:
            listed = _tool(mcp, "list_allowed_directories")
            # the capability is offered, but no session has called yet: nothing is announced
            assert mcp.roots("fs") == ()
            assert str(root.resolve()) not in _text(listed.fn())
            assert _tool(mcp, "read_text_file").fn(path=str(root / "notes.txt")).kind == "error-text"

            model = ScriptedModel([ToolCall("read_text_file", {"path": str(root / "notes.txt")}),
                                   ToolCall("read_text_file", {"path": str(outside / "secret.txt")}), "read"])
            session = Session(model, tools=mcp.tools, execution_context=execution)
            # given to the session, the tools announce its context's root (roots/list_changed);
            # the server adopts it a moment later
            assert mcp.roots("fs") == (root.resolve().as_uri(),)
            wait_for(lambda: str(root.resolve()) in _text(listed.fn()), what="the server to adopt the root")
            session.push_user_message("read both")
            result = session.generate()
            session.close()
            # a later session without a context leaves the roots; one with another context moves them
            Session(ScriptedModel(["x"]), tools=mcp.tools).close()
            assert mcp.roots("fs") == (root.resolve().as_uri(),)
            with LocalExecutionContext(outside) as other:
                Session(ScriptedModel(["x"]), tools=mcp.tools, execution_context=other).close()
                assert mcp.roots("fs") == (outside.resolve().as_uri(),)
        inside_call, outside_call = result.tool_calls
        assert inside_call.output.as_text() == "inside"
        assert outside_call.is_error and "Access denied" in outside_call.output.as_text()
    finally:
        execution.close()


def test_session_roots_are_refused_for_a_bad_value_and_keep_per_server_roots(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    with pytest.raises(ConfigurationError, match="roots must be a list of directories"):
        connect_mcp({"ev": reference_server("everything")}, roots="sessions")
    with connect_mcp({"ev": {**reference_server("everything"), "roots": [own]}}, roots="session") as mcp:
        assert mcp.roots("ev") == (own.resolve().as_uri(),)  # a server's own roots win


# -- sampling ---------------------------------------------------------------------------


def test_sampling_is_answered_by_a_chat_model_with_max_tokens_honoured():
    model = ScriptedModel(["a sampled reply"])
    with connect_mcp({"ev": reference_server("everything")}, sampling=model) as mcp:
        out = _text(_tool(mcp, "trigger-sampling-request").fn(prompt="tell me a joke", maxTokens=42))
    assert "a sampled reply" in out and '"model": "scripted"' in out and '"stopReason": "endTurn"' in out
    (request,) = model.requests
    assert request.settings.max_tokens == 42
    assert request.settings.temperature == 0.7
    assert request.system == "You are a helpful test server."
    assert [m.role for m in request.messages] == ["user"]
    assert "tell me a joke" in request.messages[0].text


def test_sampling_by_a_model_spec_over_the_openai_wire(monkeypatch):
    with FakeServer() as provider:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", provider.url + "/v1")
        provider.add(ow.text_stream("cut sh", finish="length"))
        with connect_mcp({"ev": reference_server("everything")}, sampling="openai:gpt-4.1-mini") as mcp:
            out = _text(_tool(mcp, "trigger-sampling-request").fn(prompt="a long story", maxTokens=3))
        body = provider.requests[0].body
    assert body["model"] == "gpt-4.1-mini"
    assert 3 in (body.get("max_tokens"), body.get("max_completion_tokens"))
    assert body["messages"][0] == {"role": "system", "content": "You are a helpful test server."}
    assert '"stopReason": "maxTokens"' in out and '"model": "gpt-4.1-mini"' in out and "cut sh" in out


def test_sampling_by_a_handler_and_refused_by_the_approval_hook():
    seen: list[SamplingRequest] = []

    def handler(request: SamplingRequest) -> str:
        seen.append(request)
        return f"handled {request.max_tokens}"

    with connect_mcp({"ev": reference_server("everything")}, sampling=handler) as mcp:
        out = _text(_tool(mcp, "trigger-sampling-request").fn(prompt="hi", maxTokens=5))
    assert "handled 5" in out and seen[0].server == "ev" and seen[0].max_tokens == 5

    model = ScriptedModel(["never"])
    asked: list[SamplingRequest] = []

    def deny(request: SamplingRequest) -> bool:
        asked.append(request)
        return False

    with connect_mcp({"ev": reference_server("everything")}, sampling=model, approve_sampling=deny) as mcp:
        out = _tool(mcp, "trigger-sampling-request").fn(prompt="spend tokens", maxTokens=1000)
    assert out.kind == "error-text" and "refused the sampling request" in out.value
    assert model.request_count == 0  # nothing was spent
    assert asked[0].max_tokens == 1000 and "spend tokens" in asked[0].messages[0].text


def test_sampling_session_answers_with_the_model_of_the_calling_session():
    with connect_mcp({"ev": reference_server("everything")}, sampling="session") as mcp:
        tool = _tool(mcp, "trigger-sampling-request")
        # outside any generation there is no session model: a clear refusal, nothing spent
        outside = tool.fn(prompt="hi", maxTokens=5)
        assert outside.kind == "error-text"
        assert "no agent generation was calling its tools" in outside.value
        assert "sampling='session'" in outside.value

        # in a session: the sampling request is answered by the session's own model (its
        # next scripted reply), between the tool call and the final answer
        model = ScriptedModel([ToolCall("trigger-sampling-request", {"prompt": "a joke", "maxTokens": 9}),
                               "the session model sampled this", "done"])
        session = Session(model, tools=mcp.tools)
        session.push_user_message("sample something")
        result = session.generate()
        session.close()
        other = ScriptedModel([ToolCall("trigger-sampling-request", {"prompt": "x", "maxTokens": 3}),
                               "run_agent's model sampled this", "done"])
        via_run_agent = run_agent(other, "go", tools=mcp.tools)
    assert result.text == "done"
    (call,) = result.tool_calls
    assert not call.is_error and "the session model sampled this" in call.output.as_text()
    assert model.request_count == 3
    sampled = model.requests[1]
    assert sampled.settings.max_tokens == 9 and "a joke" in sampled.messages[0].text
    assert "run_agent's model sampled this" in via_run_agent.tool_calls[0].output.as_text()


def test_sampling_session_still_passes_the_approval_gate():
    asked: list[SamplingRequest] = []

    def deny(request: SamplingRequest) -> bool:
        asked.append(request)
        return False

    model = ScriptedModel([ToolCall("trigger-sampling-request", {"prompt": "spend", "maxTokens": 50}), "done"])
    with connect_mcp({"ev": reference_server("everything")}, sampling="session", approve_sampling=deny) as mcp:
        result = run_agent(model, "go", tools=mcp.tools)
    assert "refused the sampling request" in result.tool_calls[0].output.as_text()
    assert model.request_count == 2 and asked[0].max_tokens == 50  # no sampling request reached the model


# -- elicitation ------------------------------------------------------------------------


def test_elicitation_answered_declined_and_cancelled_by_the_host_callback():
    answers = iter([{"name": "Ada Lovelace", "check": True}, None, ElicitationResult.cancel(),
                    {"check": True}])  # the last one lacks the required "name"
    asked: list[ElicitationRequest] = []

    def elicit(request: ElicitationRequest):
        asked.append(request)
        return next(answers)

    with connect_mcp({"ev": reference_server("everything")}, elicitation=elicit) as mcp:
        trigger = _tool(mcp, "trigger-elicitation-request")
        accepted = _text(trigger.fn())
        declined = _text(trigger.fn())
        cancelled = _text(trigger.fn())
        invalid = trigger.fn()
    assert "User provided the requested information" in accepted and "Name: Ada Lovelace" in accepted
    assert "Agreed to terms: true" in accepted
    assert "User declined" in declined
    assert "User cancelled" in cancelled
    assert invalid.kind == "error-text" and "does not match the requested schema" in invalid.value
    request = asked[0]
    assert request.server == "ev" and request.mode == "form"
    assert request.requested_schema["required"] == ["name"]
    assert request.message.startswith("Please provide inputs")


def test_url_mode_elicitation_reaches_the_callback():
    asked: list[ElicitationRequest] = []

    def elicit(request: ElicitationRequest) -> ElicitationResult:
        asked.append(request)
        return ElicitationResult.accept()

    with connect_mcp({"ev": reference_server("everything")}, elicitation=elicit) as mcp:
        out = _tool(mcp, "trigger-url-elicitation").fn(url="https://example.test/authorize",
                                                       elicitationId="e-1")
    assert out.kind == "text" and '"action": "accept"' in out.value
    (request,) = asked
    assert (request.mode, request.url, request.elicitation_id) == ("url", "https://example.test/authorize", "e-1")
    assert request.requested_schema is None


# -- resources and prompts --------------------------------------------------------------


def test_resources_listed_and_read_as_parts():
    with connect_mcp({"ev": reference_server("everything")}) as mcp:
        resources = mcp.list_resources("ev")
        by_uri = {r.uri: r for r in resources}
        doc = by_uri["demo://resource/static/document/features.md"]
        assert doc.name == "features.md" and doc.mime_type == "text/markdown"
        (part,) = mcp.read_resource("ev", doc.uri)
        assert isinstance(part, TextPart) and part.text.strip()
        (text,) = mcp.read_resource("ev", "demo://resource/dynamic/text/7")
        assert isinstance(text, TextPart) and "Resource 7" in text.text
        (blob,) = mcp.read_resource("ev", "demo://resource/dynamic/blob/7")
        assert isinstance(blob, FilePart) and b"Resource 7" in blob.data
        with pytest.raises(McpError, match="cannot read resource 'demo://nope'.*'ev'"):
            mcp.read_resource("ev", "demo://nope")
        with pytest.raises(ConfigurationError, match="no MCP server named 'nope'"):
            mcp.list_resources("nope")


def test_prompts_listed_and_got_as_messages():
    with connect_mcp({"ev": reference_server("everything")}) as mcp:
        prompts = {p.name: p for p in mcp.list_prompts("ev")}
        args = prompts["args-prompt"]
        assert [(a.name, a.required) for a in args.arguments] == [("city", True), ("state", False)]
        messages = mcp.get_prompt("ev", "args-prompt", {"city": "Paris", "state": "TX"})
        assert messages == [Message.user("What's weather in Paris, TX?")]
        embedded = mcp.get_prompt("ev", "resource-prompt", {"resourceType": "Text", "resourceId": "3"})
        assert all(m.role == "user" for m in embedded)
        assert any("Resource 3" in m.text for m in embedded)
        with pytest.raises(ConfigurationError, match="map str to str"):
            mcp.get_prompt("ev", "args-prompt", {"city": 3})


def test_expose_resources_lets_the_model_list_and_read_them():
    reads = [ToolCall("mcp_list_resources", {"server": "ev"}, id="l"),
             ToolCall("mcp_read_resource", {"server": "ev", "uri": "demo://resource/dynamic/text/2"}, id="r"),
             "ok"]
    model = ScriptedModel(reads)
    with connect_mcp({"ev": reference_server("everything")}, expose_resources=True) as mcp:
        assert {"mcp_list_resources", "mcp_read_resource"} <= {t.name for t in mcp.tools}
        assert "mcp_list_resources" not in mcp.tool_name_map
        result = run_agent(model, "read", tools=mcp.tools)
    listed, read = (rec.output for rec in result.tool_calls)
    assert listed.kind == "json"
    assert any(e["uri"] == "demo://resource/static/document/features.md" for e in listed.value)
    assert read.kind == "text" and "Resource 2" in read.value


def test_without_expose_resources_no_resource_tools():
    with connect_mcp({"ev": reference_server("everything")}) as mcp:
        assert not {"mcp_list_resources", "mcp_read_resource"} & {t.name for t in mcp.tools}


# -- the memory server --------------------------------------------------------------------


def test_memory_server_round_trip_and_missing_features(tmp_path: Path):
    store = tmp_path / "memory.jsonl"
    with connect_mcp({"mem": reference_server("memory", env={"MEMORY_FILE_PATH": str(store)})}) as mcp:
        tools = {t.name: t for t in mcp.tools}
        created = tools["create_entities"].fn(
            entities=[{"name": "agentkit", "entityType": "library", "observations": ["sync-first"]}])
        # the text is the JSON of the wrapped list: said once, not text plus structured copy
        assert created.kind == "text" and json.loads(created.value)[0]["name"] == "agentkit"
        graph = tools["read_graph"].fn()
        assert graph.kind == "json" and graph.value["entities"][0]["observations"] == ["sync-first"]
        with pytest.raises(McpError, match="does not offer prompts"):
            mcp.list_prompts("mem")
    assert "agentkit" in store.read_text()
