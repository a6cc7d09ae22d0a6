"""What servers may ask of the host, on a 2026-07-28 connection (a Python MCPServer whose
requests ride InputRequiredResult rounds), plus the handlers' failure modes, option
checking and the reference-server finder's CI rule."""

from __future__ import annotations

import pytest
from mcp_servers import reference
from mcp_servers.helpers import HERE, stdio

from agentkit import CancelToken, ConfigurationError, McpError, ScriptedModel, ToolContext
from agentkit.mcp import (
    ElicitationRequest,
    ElicitationResult,
    SamplingRequest,
    SamplingResult,
    connect_mcp,
    tool_result_to_output,
)

HOST = str(HERE / "host_server.py")


def _tools(mcp):
    return {t.name: t for t in mcp.tools}


def _ctx(sink) -> ToolContext:
    ctx = ToolContext(tool_call_id="call-9", tool_name="count_slowly", cancel=CancelToken())
    return ctx._bind_runtime(progress=sink)


def test_progress_with_messages_on_a_2026_connection():
    updates: list[dict] = []
    with connect_mcp({"h": stdio(HOST)}) as mcp:
        assert mcp.servers["h"].protocol_version == "2026-07-28"
        out = _tools(mcp)["count_slowly"].fn(steps=3, _agentkit_mcp_context=_ctx(updates.append))
    assert out.value == "counted to 3"
    assert [(u["progress"], u["total"], u["message"]) for u in updates] == [
        (1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]


def test_a_failing_progress_listener_does_not_fail_the_call():
    def boom(_update):
        raise RuntimeError("listener broke")

    with connect_mcp({"h": stdio(HOST)}) as mcp:
        out = _tools(mcp)["count_slowly"].fn(steps=2, _agentkit_mcp_context=_ctx(boom))
    assert out.kind == "text" and out.value == "counted to 2"


def test_roots_sampling_and_elicitation_through_input_rounds(tmp_path):
    (tmp_path / "sub").mkdir()
    seen: list[SamplingRequest] = []

    def sample(request: SamplingRequest) -> SamplingResult:
        seen.append(request)
        return SamplingResult(text="one line", model="handler")

    answers = iter([ElicitationResult.accept({"name": "Grace"}), ElicitationResult.decline(),
                    ElicitationResult.cancel()])
    with connect_mcp({"h": stdio(HOST)}, roots=[tmp_path], sampling=sample,
                     elicitation=lambda _r: next(answers)) as mcp:
        tools = _tools(mcp)
        assert tools["show_roots"].fn().value == tmp_path.resolve().as_uri()
        mcp.set_roots([tmp_path / "sub", tmp_path])  # 2026-era servers ask on every call
        assert tools["show_roots"].fn().value.splitlines() == [(tmp_path / "sub").resolve().as_uri(),
                                                               tmp_path.resolve().as_uri()]
        assert tools["summarize"].fn(text="a very long text").value == "one line"
        assert [tools["ask_name"].fn().value for _ in range(3)] == ["hello Grace", "decline", "cancel"]
    assert seen[0].max_tokens == 50 and seen[0].system_prompt == "Summarize in one line."
    assert seen[0].messages[0].text == "a very long text"


def test_handlers_that_fail_or_refuse_give_the_server_an_error():
    def broken(_request: ElicitationRequest):
        raise RuntimeError("no terminal")

    def deny(_request: SamplingRequest):
        raise PermissionError("budget spent")

    model = ScriptedModel(["unused"])
    with connect_mcp({"h": stdio(HOST)}, sampling=model, approve_sampling=deny, elicitation=broken) as mcp:
        tools = _tools(mcp)
        refused = tools["summarize"].fn(text="x")
        failed = tools["ask_name"].fn()
    assert refused.kind == "error-text" and "refused the sampling request: budget spent" in refused.value
    assert model.request_count == 0
    assert failed.kind == "error-text" and "no terminal" in failed.value

    with connect_mcp({"h": stdio(HOST)}, sampling=lambda _r: 42, elicitation=lambda _r: "yes") as mcp:
        tools = _tools(mcp)
        assert "neither a SamplingResult nor a str" in tools["summarize"].fn(text="x").value
        assert "must return an ElicitationResult" in tools["ask_name"].fn().value

    with connect_mcp({"h": stdio(HOST)}, sampling=lambda _r: SamplingResult(text=None)) as mcp:  # type: ignore[arg-type]
        out = _tools(mcp)["summarize"].fn(text="x")
    assert out.kind == "error-text" and "sampling answer cannot be sent" in out.value


def test_resources_and_prompts_of_a_2026_server():
    with connect_mcp({"h": stdio(HOST)}) as mcp:
        (resource,) = mcp.list_resources("h")
        assert (resource.uri, resource.name, resource.mime_type) == ("note://welcome", "welcome", "text/plain")
        assert [p.text for p in mcp.read_resource("h", "note://welcome")] == ["Welcome to the notes server."]
        (prompt,) = mcp.list_prompts("h")
        assert prompt.name == "review" and [a.name for a in prompt.arguments] == ["topic"]
        assert [m.text for m in mcp.get_prompt("h", "review", {"topic": "docs"})] == ["Please review docs."]
    with pytest.raises(McpError, match="closed"):
        mcp.list_resources("h")


def test_options_are_checked_before_anything_starts():
    for kwargs, match in [({"sampling": 42}, "sampling must be a ChatModel, a model spec"),
                          ({"approve_sampling": 1}, "approve_sampling must be a callable"),
                          ({"elicitation": "ask"}, "elicitation must be a callable"),
                          ({"expose_resources": "yes"}, "expose_resources must be True or False"),
                          ({"roots": [42]}, "each root must be a path"),
                          ({"roots": ["file://remote-host/x"]}, "remote host")]:
        with pytest.raises(ConfigurationError, match=match):
            connect_mcp({"h": stdio(HOST)}, **kwargs)


def test_structured_content_restating_the_text_is_said_once():
    class Text:
        type = "text"

        def __init__(self, text):
            self.text = text

    class Result:
        is_error = False

        def __init__(self, text, structured):
            self.content = [Text(text)]
            self.structured_content = structured

    assert tool_result_to_output(Result("wrote a.txt", {"content": "wrote a.txt"})).value == "wrote a.txt"
    kept = tool_result_to_output(Result("wrote a.txt", {"content": "something else"}))
    assert kept.value == 'wrote a.txt\n{"content": "something else"}'
    assert tool_result_to_output(Result("[1, 2]", {"items": [1, 2]})).value == "[1, 2]"


def test_reference_servers_missing_skip_locally_and_fail_in_ci(tmp_path, monkeypatch):
    monkeypatch.setattr(reference, "NODE_DIR", tmp_path)
    monkeypatch.delenv("AGENTKIT_CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="npm ci --prefix tests/mcp_servers/node"):
        reference.reference_server("everything")
    monkeypatch.setenv("AGENTKIT_CI", "1")
    with pytest.raises(pytest.fail.Exception, match="AGENTKIT_CI=1"):
        reference.reference_server("everything")


def test_a_caller_built_client_gets_only_the_callbacks_it_lacks(tmp_path):
    import mcp_types as types
    from mcp import Client
    from mcp_servers import host_server

    async def own_sampling(_context, _params):
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="own"),
                                         model="caller")

    client = Client(host_server.server, sampling_callback=own_sampling)
    with connect_mcp({"h": client}, roots=[tmp_path], sampling=lambda _r: "agentkit") as mcp:
        tools = _tools(mcp)
        assert tools["show_roots"].fn().value == tmp_path.resolve().as_uri()
        assert tools["summarize"].fn(text="x").value == "own"  # the caller's callback wins


def test_resources_and_prompts_are_listed_page_by_page_like_tools():
    from mcp_servers.helpers import PAGED

    from agentkit.messages import ImagePart

    with connect_mcp({"p": stdio(PAGED, "normal")}) as mcp:
        names = [r.name for r in mcp.list_resources("p")]
        assert names == ["alpha", "beta", "gamma", "dotted.name", "dotted name", "x" * 80, "image"]
        assert [p.name for p in mcp.list_prompts("p")][:3] == ["alpha", "beta", "gamma"]
        (image,) = mcp.read_resource("p", "page://image")
        assert isinstance(image, ImagePart) and image.data.startswith(b"\x89PNG")
        assert [(m.role, m.text) for m in mcp.get_prompt("p", "beta")] == [("user", "ask beta"),
                                                                           ("assistant", "answered")]
    with connect_mcp({"p": stdio(PAGED, "repeat")}) as mcp:
        assert len(mcp.list_resources("p")) == 4  # the repeated cursor ends the listing
        assert any("resources/list returned cursor 'c1' a second time" in w for w in mcp.servers["p"].warnings)
    with connect_mcp({"p": stdio(PAGED, "endless")}, max_list_pages=3) as mcp:
        assert [p.name for p in mcp.list_prompts("p")] == ["t0", "t1", "t2"]
        assert any("prompts/list still had more pages" in w for w in mcp.servers["p"].warnings)


def test_roots_sampling_and_elicitation_over_streamable_http(tmp_path):
    from mcp_servers.helpers import http_server

    with http_server(script=HOST) as url, connect_mcp(
            {"h": {"url": url}}, roots=[tmp_path], sampling=lambda r: f"max {r.max_tokens}",
            elicitation=lambda _r: {"name": "Lin"}) as mcp:
        tools = _tools(mcp)
        assert tools["show_roots"].fn().value == tmp_path.resolve().as_uri()
        assert tools["summarize"].fn(text="x").value == "max 50"
        assert tools["ask_name"].fn().value == "hello Lin"
        updates: list[dict] = []
        tools["count_slowly"].fn(steps=2, _agentkit_mcp_context=_ctx(updates.append))
        assert [u["progress"] for u in updates] == [1.0, 2.0]


def test_resource_helpers_across_servers_and_their_failures(caplog):
    from mcp import Client
    from mcp.server.mcpserver import MCPServer
    from mcp_servers.helpers import PAGED

    from agentkit.messages import ImagePart

    clash = MCPServer("clash")

    @clash.tool()
    def mcp_read_resource(uri: str) -> str:
        """A server tool that happens to have the helper's name."""
        return f"the server's own {uri}"

    @clash.tool()
    def boom() -> str:
        """Nothing."""
        return "x"

    servers = {"p": stdio(PAGED, "normal"), "clash": Client(clash),
               "gone": {"command": "/nonexistent/mcp-server"}}
    with connect_mcp(servers, expose_resources=True, prefix_tool_names=False) as mcp:
        tools = _tools(mcp)
        assert tools["mcp_read_resource"].fn(uri="u").value == "the server's own u"  # the server's tool kept
        assert "already named 'mcp_read_resource'" in caplog.text
        listing = tools["mcp_list_resources"].fn().value
        assert [e["name"] for e in listing][:2] == ["alpha", "beta"]
        assert tools["mcp_list_resources"].fn(server="p").kind == "json"
        with pytest.raises(McpError, match="'gone' is not connected"):
            mcp.list_resources("gone")
        with pytest.raises(McpError, match="'clash' answered with an error: .*Unknown resource: page://x"):
            mcp.read_resource("clash", "page://x")
    with connect_mcp({"p": stdio(PAGED, "normal")}, expose_resources=True) as mcp:
        image = _tools(mcp)["mcp_read_resource"].fn(server="p", uri="page://image")
        assert image.kind == "content" and isinstance(image.value[0], ImagePart)


def test_an_elicitation_answer_that_mcp_cannot_carry_is_refused():
    with connect_mcp({"h": stdio(HOST)}, elicitation=lambda _r: {"name": {"first": "Ada"}}) as mcp:
        out = _tools(mcp)["ask_name"].fn()
    assert out.kind == "error-text"
    assert "does not match the requested schema" in out.value  # the schema says name is a string

    bad = ElicitationResult(action="accept", content={"name": "Ada", "tags": {"nested": True}})
    with connect_mcp({"h": stdio(HOST)}, elicitation=lambda _r: bad) as mcp:
        out = _tools(mcp)["ask_name"].fn()
    assert out.kind == "error-text" and "flat dict" in out.value


def test_closing_the_toolset_cancels_a_model_answering_a_sampling_request():
    import threading

    from mcp_servers.helpers import wait_for

    entered, saw_cancel = threading.Event(), threading.Event()

    def slow_turn(request):
        entered.set()
        while not request.cancel.cancelled:
            threading.Event().wait(0.02)
        saw_cancel.set()
        return "too late"

    mcp = connect_mcp({"h": stdio(HOST)}, sampling=ScriptedModel([slow_turn]))
    summarize = _tools(mcp)["summarize"]
    caller = threading.Thread(target=summarize.fn, kwargs={"text": "x"})
    caller.start()
    wait_for(entered.is_set, what="the model to be asked")
    mcp.close()
    wait_for(saw_cancel.is_set, what="the model request to be cancelled")
    caller.join(30)
    assert not caller.is_alive()


class _RecordingStream:
    """A provider stream as an iterator object (an HTTP response behind it) that never
    looks at the request's cancel token itself: it yields ``texts``, then ``dots`` more
    text deltas ``pause`` seconds apart, then the finish. It records what was read and
    whether it was closed."""

    def __init__(self, texts: list[str], dots: int = 0, pause: float = 0.0) -> None:
        import threading

        from agentkit.models import FinishEvent, TextDelta

        self._events = iter([*(TextDelta(text=t) for t in texts), *(TextDelta(text=".") for _ in range(dots)),
                             FinishEvent(reason="stop")])
        self._pause = pause
        self.read = 0
        self.reading = threading.Event()
        self.closed = threading.Event()

    def __iter__(self):
        return self

    def __next__(self):
        import threading

        if self.read:
            self.reading.set()
            threading.Event().wait(self._pause)
        self.read += 1
        return next(self._events)

    def close(self) -> None:
        self.closed.set()


class _StreamModel:
    model_name = "recording"

    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs
        self.streams: list[_RecordingStream] = []

    def stream(self, request):
        self.streams.append(_RecordingStream(**self.kwargs))
        return self.streams[-1]


def test_a_model_answering_a_sampling_request_has_its_stream_closed_when_read_to_the_end():
    model = _StreamModel(texts=["one ", "line"])
    with connect_mcp({"h": stdio(HOST)}, sampling=model) as mcp:
        assert _tools(mcp)["summarize"].fn(text="x").value == "one line"
    (stream,) = model.streams
    assert stream.closed.is_set()


def test_closing_the_toolset_stops_reading_a_sampling_stream_that_ignores_the_token_and_closes_it():
    import threading

    from mcp_servers.helpers import wait_for

    model = _StreamModel(texts=[], dots=3000, pause=0.01)  # 30 s of text unless stopped
    mcp = connect_mcp({"h": stdio(HOST)}, sampling=model)
    caller = threading.Thread(target=_tools(mcp)["summarize"].fn, kwargs={"text": "x"})
    caller.start()
    wait_for(lambda: bool(model.streams) and model.streams[0].reading.is_set(), what="the model to stream")
    mcp.close()
    (stream,) = model.streams
    wait_for(stream.closed.is_set, timeout=20, what="the sampling stream to be closed")
    read = stream.read
    assert read < 3000  # reading stopped at the event after the cancel, not at the end
    caller.join(30)
    assert not caller.is_alive() and stream.read == read  # and nothing was read after closing
