"""OpenTelemetry spans (agentkit.observability, agentkit.observability._tracing) recorded by the real
OpenTelemetry SDK's in-memory exporter, and the logging hierarchy.

The global tracer provider can be set once per process; the ``tracing`` fixture resets
the API's globals around each test (as OpenTelemetry's own test utilities do), so other
tests in the process run with no provider.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time

import pytest
from _procs import wait_for
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from opentelemetry.util._once import Once

import agentkit
from agentkit import (
    FunctionModel,
    ProviderUnavailableError,
    ScriptedModel,
    Session,
    ToolCall,
    run_agent,
    run_agent_stream,
    shell_tools,
    tool,
)
from agentkit.execution import LocalExecutionContext
from agentkit.models import Turn
from agentkit.observability import configure, recording_content


def _reset_globals() -> None:
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]


@pytest.fixture
def no_provider():
    _reset_globals()
    yield
    _reset_globals()


@pytest.fixture
def tracing(no_provider, monkeypatch):
    """An SDK tracer provider with an in-memory exporter, set as the global provider."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    yield exporter
    configure(record_content=None)
    provider.shutdown()


def by_name(spans, name):
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def parent_id(span):
    return span.parent.span_id if span.parent is not None else None


# -- the span tree ----------------------------------------------------------------------


def test_span_tree_of_a_two_step_run_with_parallel_tools(tracing):
    seen = {}
    both_running = threading.Barrier(2, timeout=10)  # proves the two calls overlap

    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        both_running.wait()
        seen[city] = (threading.current_thread().name, trace.get_current_span().get_span_context().span_id)
        return f"{city}: sunny"

    model = ScriptedModel([
        Turn(tool_calls=[ToolCall(name="lookup", input={"city": "Oslo"}, id="c1"),
                         ToolCall(name="lookup", input={"city": "Rome"}, id="c2")]),
        Turn(text="Both sunny."),
    ])
    tracer = trace.get_tracer("host")
    with tracer.start_as_current_span("request") as outer:
        with Session(model, tools=[lookup], session_id="s-1") as session:
            result = session.ask("weather?")
    assert result.text == "Both sunny."
    spans = tracing.get_finished_spans()
    assert sorted(s.name for s in spans) == [
        "chat scripted", "chat scripted", "execute_tool lookup", "execute_tool lookup", "invoke_agent", "request",
    ]
    run = by_name(spans, "invoke_agent")
    chats = sorted((s for s in spans if s.name == "chat scripted"), key=lambda s: s.start_time)
    tools = {s.attributes["gen_ai.tool.call.id"]: s for s in spans if s.name == "execute_tool lookup"}
    # parent/child links, exactly
    assert parent_id(run) == outer.get_span_context().span_id
    assert {parent_id(s) for s in [*chats, *tools.values()]} == {run.context.span_id}
    assert len({s.context.trace_id for s in spans}) == 1
    # each tool ran on a worker thread with its own execute_tool span current
    for cid, city in (("c1", "Oslo"), ("c2", "Rome")):
        thread_name, current = seen[city]
        assert thread_name != threading.current_thread().name
        assert current == tools[cid].context.span_id
    # order: chat, both tools, chat
    assert chats[0].end_time <= min(t.start_time for t in tools.values())
    assert max(t.end_time for t in tools.values()) <= chats[1].start_time
    # attributes of the conventions
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.conversation.id"] == "s-1"
    assert run.attributes["gen_ai.usage.input_tokens"] == result.usage.input_tokens
    assert run.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    first = chats[0].attributes
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.request.model"] == "scripted"
    assert first["gen_ai.response.finish_reasons"] == ("tool-calls",)
    assert first["gen_ai.usage.input_tokens"] == result.steps[0].usage.input_tokens
    assert first["gen_ai.usage.output_tokens"] == result.steps[0].usage.output_tokens
    assert chats[0].kind == trace.SpanKind.CLIENT
    assert tools["c1"].attributes["gen_ai.tool.name"] == "lookup"
    assert tools["c1"].attributes["gen_ai.operation.name"] == "execute_tool"
    assert all(s.status.status_code == StatusCode.UNSET for s in spans)


def test_a_failing_tool_sets_error_status_and_type(tracing):
    @tool
    def explode() -> str:
        """Fail."""
        raise ValueError("kaput")

    @tool(timeout=0.05)
    def dawdle() -> str:
        """Too slow."""
        time.sleep(2)
        return "late"

    model = ScriptedModel([
        Turn(tool_calls=[ToolCall(name="explode", input={}), ToolCall(name="dawdle", input={}),
                         ToolCall(name="missing", input={})]),
        Turn(text="sorry"),
    ])
    run_agent(model, "go", tools=[explode, dawdle])
    spans = tracing.get_finished_spans()
    boom, slow, unknown = (by_name(spans, f"execute_tool {n}") for n in ("explode", "dawdle", "missing"))
    assert boom.status.status_code == StatusCode.ERROR
    assert boom.attributes["error.type"] == "ValueError"
    assert boom.events == ()  # the exception (whose message may quote input) only with content on
    assert slow.attributes["error.type"] == "timeout"
    assert unknown.status.status_code == StatusCode.ERROR
    assert unknown.attributes["error.type"] == "tool_error"
    assert by_name(spans, "invoke_agent").status.status_code == StatusCode.UNSET  # the run itself went on


def test_a_tool_that_asks_a_person_ends_its_span_without_an_error(tracing):
    from agentkit import ToolContext

    @tool
    def confirm(ctx: ToolContext) -> str:
        """Ask first."""
        return str(ctx.ask_human("go on?"))

    with Session(ScriptedModel([Turn(tool_calls=[ToolCall(name="confirm", input={})]), Turn(text="ok")]),
                 tools=[confirm]) as session:
        assert session.ask("go").finish_reason == "input-required"
        (request,) = session.pending_inputs()
    span = by_name(tracing.get_finished_spans(), "execute_tool confirm")
    assert span.status.status_code == StatusCode.UNSET  # a pause, not a failure
    assert span.attributes["tool.input_request_id"] == request.id


def test_a_failing_model_call_marks_the_chat_and_run_spans(tracing):
    def broken(request):
        raise ProviderUnavailableError("down", provider="fake")

    with pytest.raises(ProviderUnavailableError):
        run_agent(FunctionModel(broken), "hi")
    spans = tracing.get_finished_spans()
    run = by_name(spans, "invoke_agent")
    (chat,) = [s for s in spans if s.name.startswith("chat ")]
    for span in (run, chat):
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes["error.type"] == "ProviderUnavailableError"
    assert parent_id(chat) == run.context.span_id


def test_a_background_job_span_is_a_child_of_the_tool_call_that_started_it(tracing, tmp_path):
    context = LocalExecutionContext(tmp_path)
    model = ScriptedModel([
        Turn(tool_calls=[ToolCall(name="start_shell", input={"command": "sh", "args": ["-c", "exit 0"]})]),
        Turn(text="started"),
    ])
    try:
        with Session(model, tools=shell_tools(context), execution_context=context) as session:
            result = session.ask("start it")
            execution_id = json.loads(result.tool_calls[0].output.as_text())["execution_id"]
            wait_for(lambda: any(s.name == "background_job" for s in tracing.get_finished_spans()), 20,
                     "the job's span to end")
    finally:
        context.close()
    spans = tracing.get_finished_spans()
    job = by_name(spans, "background_job")
    starter = by_name(spans, "execute_tool start_shell")
    assert parent_id(job) == starter.context.span_id
    assert job.context.trace_id == starter.context.trace_id
    assert job.attributes["agentkit.job.execution_id"] == execution_id
    assert job.attributes["agentkit.job.state"] == "finished"
    assert job.attributes["process.exit.code"] == 0
    assert job.status.status_code == StatusCode.UNSET


def test_a_stream_is_a_child_of_the_callers_span(tracing):
    tracer = trace.get_tracer("host")
    with tracer.start_as_current_span("request") as outer:
        with run_agent_stream(ScriptedModel([Turn(text="hi there")]), "hello") as stream:
            assert "".join(e.text for e in stream if e.type == "text-delta") == "hi there"
    run = by_name(tracing.get_finished_spans(), "invoke_agent")
    assert parent_id(run) == outer.get_span_context().span_id


# -- content only on opt-in -------------------------------------------------------------

CONTENT_KEYS = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
                "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}


def _run_with_a_tool():
    @tool
    def echo(text: str) -> str:
        """Echo."""
        return f"echoed {text}"

    model = ScriptedModel([Turn(tool_calls=[ToolCall(name="echo", input={"text": "PRIVATE-ARG"}, id="e1")]),
                           Turn(text="PRIVATE-ANSWER")])
    return run_agent(model, "PRIVATE-PROMPT", tools=[echo], system="PRIVATE-SYSTEM")


def test_no_content_is_recorded_without_opt_in(tracing):
    assert recording_content() is False
    _run_with_a_tool()
    spans = tracing.get_finished_spans()
    assert len(spans) == 4
    for span in spans:
        assert not CONTENT_KEYS & set(span.attributes)
        assert "PRIVATE" not in json.dumps(dict(span.attributes), default=str)


def test_content_is_recorded_with_configure(tracing):
    configure(record_content=True)
    _run_with_a_tool()
    spans = tracing.get_finished_spans()
    chats = sorted((s for s in spans if s.name.startswith("chat")), key=lambda s: s.start_time)
    assert json.loads(chats[0].attributes["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "PRIVATE-SYSTEM"}]
    assert json.loads(chats[0].attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "PRIVATE-PROMPT"}]}]
    assert json.loads(chats[0].attributes["gen_ai.output.messages"]) == [
        {"role": "assistant", "finish_reason": "tool-calls",
         "parts": [{"type": "tool_call", "id": "e1", "name": "echo", "arguments": {"text": "PRIVATE-ARG"}}]}]
    second_input = json.loads(chats[1].attributes["gen_ai.input.messages"])
    assert second_input[-1] == {"role": "tool", "parts": [
        {"type": "tool_call_response", "id": "e1", "response": "echoed PRIVATE-ARG"}]}
    echo = by_name(spans, "execute_tool echo")
    assert json.loads(echo.attributes["gen_ai.tool.call.arguments"]) == {"text": "PRIVATE-ARG"}
    assert echo.attributes["gen_ai.tool.call.result"] == "echoed PRIVATE-ARG"
    run = by_name(spans, "invoke_agent")
    assert json.loads(run.attributes["gen_ai.output.messages"])[0]["parts"][0]["content"] == "PRIVATE-ANSWER"


def test_content_opt_in_through_the_conventions_environment_variable(tracing, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    assert recording_content() is True
    configure(record_content=False)  # an explicit choice wins over the environment
    assert recording_content() is False
    configure(record_content=None)
    _run_with_a_tool()
    assert "gen_ai.tool.call.result" in by_name(tracing.get_finished_spans(), "execute_tool echo").attributes
    for value, on in (("NO_CONTENT", False), ("EVENT_ONLY", False), ("SPAN_ONLY", True),
                      ("span_and_event", True), ("false", False), ("", False), ("nonsense", False)):
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", value)
        assert recording_content() is on, value


def test_recorded_content_is_redacted_like_the_log(tracing):
    configure(record_content=True)

    @tool
    def login(password: str) -> str:
        """Log in."""
        return f"token for {password}"

    model = ScriptedModel([Turn(tool_calls=[ToolCall(name="login", input={"password": "sk-live-123456"})]),
                           Turn(text="done")])
    run_agent(model, "log in", tools=[login], redact=[r"sk-live-\d+"])
    dumped = json.dumps([dict(s.attributes) for s in tracing.get_finished_spans()], default=str)
    assert "sk-live-123456" not in dumped
    assert "[redacted]" in dumped


def test_configure_rejects_a_non_bool():
    with pytest.raises(agentkit.ConfigurationError, match="record_content must be True, False or None"):
        configure(record_content="yes")  # type: ignore[arg-type]


# -- no provider, no work ---------------------------------------------------------------


def test_no_span_objects_without_a_configured_provider(no_provider, monkeypatch):
    from agentkit.observability import _tracing

    made = []
    monkeypatch.setattr(trace.ProxyTracerProvider, "get_tracer", lambda *a, **k: made.append(a))
    monkeypatch.setattr(trace.NonRecordingSpan, "__init__", lambda *a, **k: made.append(a))
    assert _tracing.start_run(model=ScriptedModel([]), session_id=None) is None

    @tool
    def noop() -> str:
        """Nothing."""
        return "ok"

    model = ScriptedModel([Turn(tool_calls=[ToolCall(name="noop", input={})]), Turn(text="fine")])
    assert run_agent(model, "hi", tools=[noop]).text == "fine"
    assert made == []


def test_opentelemetry_is_never_imported_by_agentkit():
    # redis blocked: portalocker imports it when installed, and redis 8 imports opentelemetry
    code = "import sys; sys.modules['redis'] = None\n" + (
        "import sys, agentkit\n"
        "from agentkit import ScriptedModel, run_agent\n"
        "from agentkit.models.scripted import Turn\n"
        "assert run_agent(ScriptedModel([Turn(text='ok')]), 'hi').text == 'ok'\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_provider_set_after_import_is_honoured(no_provider):
    model = ScriptedModel([Turn(text="one"), Turn(text="two")])
    with Session(model) as session:
        session.ask("before")  # no provider yet: nothing recorded, nothing kept
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        session.ask("after")
    assert sorted(s.name for s in exporter.get_finished_spans()) == ["chat scripted", "invoke_agent"]


# -- logging ----------------------------------------------------------------------------


def test_the_package_logger_has_a_null_handler():
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("agentkit").handlers)


def test_retries_are_logged_without_prompt_content(caplog):
    from fakes import openai_wire as ow
    from fakes.server import FakeServer

    from agentkit.models import RetryPolicy
    from agentkit.models.openai import OpenAIChatModel

    with FakeServer() as server:
        server.add(ow.error(503, "overloaded", type_="server_error"), ow.text_stream("fine"))
        model = OpenAIChatModel("gpt-4.1-mini", base_url=server.url + "/v1",
                                retry=RetryPolicy(max_retries=1, initial_delay=0.001))
        with caplog.at_level(logging.DEBUG, logger="agentkit"):
            assert run_agent(model, "SECRET-PROMPT-TEXT").text == "fine"
    retries = [r for r in caplog.records if r.name == "agentkit.models"]
    assert len(retries) == 1 and retries[0].levelno == logging.INFO
    assert "retrying" in retries[0].getMessage()
    assert all("SECRET-PROMPT-TEXT" not in r.getMessage() for r in caplog.records)


def test_listener_removal_is_logged(caplog):
    def bad_listener(event):
        raise RuntimeError("listener bug")

    with caplog.at_level(logging.WARNING, logger="agentkit"):
        with Session(ScriptedModel([Turn(text="ok")])) as session:
            session.subscribe(bad_listener)
            with pytest.warns(RuntimeWarning, match="removed session listener"):
                session.ask("hi")
                session.close()
    (record,) = [r for r in caplog.records if "removed session listener" in r.getMessage()]
    assert record.name == "agentkit.session" and record.levelno == logging.WARNING


def test_a_store_failure_is_logged(caplog, tmp_path):
    from agentkit import InMemoryEventStore, SessionFailedError

    class BrokenStore(InMemoryEventStore):
        def append(self, session_id, events, expected_revision, lease=None):
            raise OSError("disk on fire")

    with caplog.at_level(logging.WARNING, logger="agentkit"):
        session = Session(ScriptedModel([Turn(text="ok")]), store=BrokenStore(), session_id="s-9")
        with pytest.raises(SessionFailedError):
            session.ask("SECRET-PROMPT-TEXT")
    (record,) = [r for r in caplog.records if r.name == "agentkit.session"]
    assert record.levelno == logging.ERROR
    assert "s-9" in record.getMessage() and "disk on fire" in record.getMessage()
    assert "SECRET-PROMPT-TEXT" not in record.getMessage()


def test_a_torn_tail_is_logged_by_the_file_store(caplog, tmp_path):
    from agentkit import FileEventStore

    store = FileEventStore(tmp_path)
    with Session(ScriptedModel([]), store=store, session_id="torn") as session:
        session.push_user_message("hello")
    log_file = next(tmp_path.rglob("events.jsonl"))
    with open(log_file, "ab") as f:
        f.write(b'{"half a rec')  # a crash in the middle of an append
    with caplog.at_level(logging.WARNING, logger="agentkit"):
        assert FileEventStore(tmp_path).load("torn") is not None
    (record,) = [r for r in caplog.records if r.name == "agentkit.stores"]
    assert "incomplete record" in record.getMessage() and "torn" in record.getMessage()


def test_a_generation_inside_a_tool_nests_under_its_tool_span(tracing):
    @tool
    def ask_helper(question: str) -> str:
        """Ask a helper agent."""
        return run_agent(ScriptedModel([Turn(text="42")]), question).text

    model = ScriptedModel([Turn(tool_calls=[ToolCall(name="ask_helper", input={"question": "meaning?"})]),
                           Turn(text="It is 42.")])
    run_agent(model, "ask the helper", tools=[ask_helper])
    spans = tracing.get_finished_spans()
    runs = [s for s in spans if s.name == "invoke_agent"]
    assert len(runs) == 2
    outer = next(s for s in runs if s.parent is None)
    inner = next(s for s in runs if s.parent is not None)
    helper = by_name(spans, "execute_tool ask_helper")
    assert parent_id(helper) == outer.context.span_id
    assert parent_id(inner) == helper.context.span_id
    inner_chats = [s for s in spans if s.name.startswith("chat") and parent_id(s) == inner.context.span_id]
    assert len(inner_chats) == 1


def test_a_cancelled_generation_ends_its_spans_with_an_error(tracing):
    from agentkit import CancelledError, CancelToken

    token = CancelToken()

    @tool
    def stop_everything() -> str:
        """Cancel the run."""
        token.cancel("host stopped it")
        return "stopping"

    model = ScriptedModel([Turn(tool_calls=[ToolCall(name="stop_everything", input={})]), Turn(text="never")])
    with pytest.raises(CancelledError):
        run_agent(model, "go", tools=[stop_everything], cancel=token)
    spans = tracing.get_finished_spans()
    run = by_name(spans, "invoke_agent")
    assert run.status.status_code == StatusCode.ERROR
    assert run.attributes["error.type"] == "CancelledError"
    assert by_name(spans, "execute_tool stop_everything").end_time is not None


def test_an_mcp_server_failure_is_logged(caplog):
    from agentkit.mcp import connect_mcp

    with caplog.at_level(logging.WARNING, logger="agentkit"):
        with connect_mcp({"gone": {"command": "/nonexistent/mcp-server"}}, connect_timeout=10) as toolset:
            assert toolset.servers["gone"].status == "failed"
    failures = [r for r in caplog.records if r.name == "agentkit.mcp" and "'gone' failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].levelno == logging.ERROR
