"""subagent_tool: a child agent as one tool, isolated, bounded, accounted and cancellable."""

from __future__ import annotations

import json
import threading
import time

import pytest
from _procs import wait_for, within

from agentkit import (
    CancelledError,
    CancelToken,
    ConfigurationError,
    FileEventStore,
    FunctionModel,
    Limits,
    ScriptedModel,
    Session,
    ToolCall,
    ToolContext,
    Usage,
    run_agent,
    subagent_tool,
    tool,
)
from agentkit.tools import SubagentEndEvent, SubagentEvent, SubagentStartEvent, child_session_id


def two_calls(name: str = "research") -> list:
    """A parent script: two calls of the subagent in one step, then an answer built from
    their results."""
    return [
        [ToolCall(name=name, input={"task": "task A"}, id="call_a"),
         ToolCall(name=name, input={"task": "task B"}, id="call_b")],
        lambda r: "combined: " + " | ".join(p.output.as_text() for p in r.messages[-1].content),
    ]


class Intervals:
    """When each child model call ran, to detect overlap without timing assertions."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[tuple[str, float, float]] = []
        self.running = 0
        self.max_running = 0
        self.both_in = threading.Barrier(2)

    def model(self, linger: float) -> FunctionModel:
        def answer(request):
            task = request.messages[-1].content[0].text
            start = time.monotonic()
            with self.lock:
                self.running += 1
                self.max_running = max(self.max_running, self.running)
            try:
                # give a second child every chance to start meanwhile: under
                # max_concurrent=1 it cannot, so the barrier times out
                self.both_in.wait(linger)
            except threading.BrokenBarrierError:
                pass
            with self.lock:
                self.running -= 1
                self.spans.append((task, start, time.monotonic()))
            return f"done {task}"

        return FunctionModel(answer)


def test_two_parallel_calls_under_max_concurrent_1_run_one_after_the_other():
    spans = Intervals()
    research = subagent_tool({"model": spans.model(0.3)}, name="research",
                             description="Research a question", max_concurrent=1)
    result = run_agent(ScriptedModel(two_calls()), "go", tools=[research])
    assert result.text == "combined: done task A | done task B"
    assert spans.max_running == 1
    (_, s1, e1), (_, s2, e2) = sorted(spans.spans, key=lambda s: s[1])
    assert e1 <= s2, f"the calls overlapped: {spans.spans}"


def test_the_same_calls_overlap_when_two_may_run_at_once():
    spans = Intervals()
    research = subagent_tool({"model": spans.model(10)}, name="research",
                             description="Research a question", max_concurrent=2)
    result = within(lambda: run_agent(ScriptedModel(two_calls()), "go", tools=[research]))
    assert result.text == "combined: done task A | done task B"
    assert spans.max_running == 2  # both children were inside the model at once


def test_child_events_reach_the_parent_stream_as_subagent_events():
    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    child = ScriptedModel([ToolCall(name="lookup", input={"q": "x"}), "child answer"])
    research = subagent_tool({"model": child, "tools": [lookup], "system": "Be brief."},
                             name="research", description="Research a question")
    parent = ScriptedModel([ToolCall(name="research", input={"task": "find x"}, id="c1"), "parent done"])
    with Session(parent, tools=[research]) as s:
        s.push_user_message("go")
        with s.stream() as stream:
            events = list(stream)
    kinds = [e.type for e in events]
    start = kinds.index("subagent-start")
    end = kinds.index("subagent-end")
    assert kinds.index("tool-start") < start < end < kinds.index("tool-end")
    inner = [e for e in events if isinstance(e, SubagentEvent)]
    assert [e.event.type for e in inner][0] == "generation-start"
    assert [e.event.type for e in inner][-1] == "generation-end"
    assert "tool-end" in [e.event.type for e in inner]  # the child's own lookup call
    assert all(e.tool_call_id == "c1" and e.name == "research" for e in inner)
    started = events[start]
    assert isinstance(started, SubagentStartEvent) and started.task == "find x"
    ended = events[end]
    assert isinstance(ended, SubagentEndEvent) and ended.text == "child answer" and ended.error is None
    decoded = [json.loads(json.dumps(e.to_dict())) for e in events]  # serialisable, all of them
    wrapped = [d for d in decoded if d["type"] == "subagent-event"]
    assert wrapped[0]["event"]["type"] == "generation-start"
    assert child.requests[0].system == "Be brief."
    # the child had its own context: the parent's conversation never reached it
    assert [m.text for m in child.requests[0].messages] == ["find x"]


def test_child_usage_is_added_to_the_parent_result():
    child = FunctionModel(lambda r: "a long enough child answer " * 10)
    research = subagent_tool({"model": child}, name="research", description="d")
    ends: list[SubagentEndEvent] = []
    with Session(ScriptedModel(two_calls()), tools=[research]) as s:
        s.push_user_message("go")
        with s.stream() as stream:
            ends = [e for e in stream if isinstance(e, SubagentEndEvent)]
            result = stream.result
    own = sum((step.usage for step in result.steps), Usage())
    children = sum((e.usage for e in ends), Usage())
    assert len(ends) == 2 and children.total_tokens > 0
    assert result.usage == own + children


def test_child_usage_counts_against_the_parent_limits_and_stops_the_child():
    @tool
    def dig(n: int) -> str:
        """Dig deeper."""
        return "x" * 400

    child = FunctionModel(lambda r: ToolCall(name="dig", input={"n": len(r.messages)}))
    research = subagent_tool({"model": child, "tools": [dig], "max_steps": 50}, name="research",
                             description="d")
    parent = FunctionModel(lambda r: ToolCall(name="research", input={"task": "dig forever"}))
    with Session(parent, tools=[research], limits=Limits(total_tokens=2000)) as s:
        s.push_user_message("go")
        result = s.generate()
    assert result.finish_reason == "budget-exceeded"
    assert len(parent.requests) == 1  # the child's tokens refused the parent's second call
    assert 1 < child.request_count < 50  # the child was stopped at the limit, not at max_steps
    assert result.usage.total_tokens >= 2000
    error = result.tool_calls[0].output.as_text()
    assert "token limit was reached" in error and result.tool_calls[0].is_error


def test_cancelling_the_parent_cancels_the_child_and_a_call_waiting_for_a_slot(tmp_path):
    started = threading.Event()
    seen: list[str | None] = []

    @tool
    def block(ctx: ToolContext) -> str:
        """Wait until cancelled."""
        started.set()
        ctx.cancel.wait(30)
        seen.append(ctx.cancel.reason)
        return "stopped"

    child = FunctionModel(lambda r: ToolCall(name="block", input={}) if len(r.messages) == 1 else "never")
    research = subagent_tool({"model": child, "tools": [block]}, name="research", description="d",
                             max_concurrent=1)
    token = CancelToken()
    events: list = []
    store = FileEventStore(tmp_path)
    with Session(ScriptedModel(two_calls()), tools=[research], store=store, session_id="p") as s:
        s.push_user_message("go")
        stream = s.stream(cancel=token)
        threading.Thread(target=lambda: (started.wait(10), token.cancel("user pressed stop")), daemon=True).start()
        events = within(lambda: list(stream))
        with pytest.raises(CancelledError):
            _ = stream.result
    # the parent stops waiting at once; the child's tool hears the cancel on its thread
    assert wait_for(lambda: seen, 10, "the child's tool to see the cancel") == ["user pressed stop"]
    starts = [e for e in events if isinstance(e, SubagentStartEvent)]
    assert len(starts) == 1  # the second call never got its slot; it left the queue
    assert child_session_id("p", "call_a") in store.list_sessions()
    assert child_session_id("p", "call_b") not in store.list_sessions()

    def child_aborted():
        stored = store.load(child_session_id("p", "call_a"))
        return [e.data["reason"] for e in stored.events if getattr(e, "action", None) == "generation-aborted"]

    assert wait_for(child_aborted, 10, "the child generation to abort") == ["user pressed stop"]


def test_timeout_cancels_the_child_and_the_model_reads_an_error_result():
    reasons: list[str | None] = []

    @tool
    def slow(ctx: ToolContext) -> str:
        """Take forever."""
        ctx.cancel.wait(30)
        reasons.append(ctx.cancel.reason)
        return "late"

    child = FunctionModel(lambda r: ToolCall(name="slow", input={}) if len(r.messages) == 1 else "never")
    research = subagent_tool({"model": child, "tools": [slow]}, name="research", description="d", timeout=0.2)
    parent = ScriptedModel([ToolCall(name="research", input={"task": "t"}), "gave up"])
    result = within(lambda: run_agent(parent, "go", tools=[research]))
    assert result.text == "gave up"
    record = result.tool_calls[0]
    assert record.is_error and "stopped: timed out after 0.2s" in record.output.as_text()
    assert reasons == ["timed out after 0.2s"]


def test_durable_parent_stores_the_child_under_a_derived_id(tmp_path):
    store = FileEventStore(tmp_path)
    child = ScriptedModel(["the child's answer"])
    research = subagent_tool({"model": child}, name="research", description="d")
    parent = ScriptedModel([ToolCall(name="research", input={"task": "look"}, id="toolu_01:x"), "ok"])
    with Session(parent, tools=[research], store=store, session_id="parent-1") as s:
        s.push_user_message("go")
        assert s.generate().tool_calls[0].output.as_text() == "the child's answer"
    sid = child_session_id("parent-1", "toolu_01:x")
    assert sid == "parent-1.sub.toolu_01_x"
    assert sid in store.list_sessions()
    with Session.open(sid, store=store) as stored:
        assert [m.text for m in stored.model_messages()] == ["look", "the child's answer"]
    # the same call again (a replay) returns the stored answer without a model call
    again = ScriptedModel([ToolCall(name="research", input={"task": "look"}, id="toolu_01:x"), "ok"])
    with Session(again, tools=[research], store=store, session_id="parent-1") as s:
        s.push_user_message("again")
        assert s.generate().tool_calls[0].output.as_text() == "the child's answer"
    assert child.request_count == 1


def test_child_session_ids_are_valid_and_distinct_even_for_long_ids():
    long_parent = "p" * 120
    a = child_session_id(long_parent, "call_1")
    b = child_session_id(long_parent, "call_2")
    assert a != b and len(a) <= 128 and a.startswith("p" * 40) and ".sub." in a
    assert child_session_id("s", "../../etc") == "s.sub.______etc"


def test_a_failing_child_is_an_error_result_the_parent_model_reads():
    research = subagent_tool({"model": ScriptedModel([])}, name="research", description="d")
    parent = ScriptedModel([ToolCall(name="research", input={"task": "t"}), "recovered"])
    result = run_agent(parent, "go", tools=[research])
    assert result.text == "recovered"
    assert "subagent 'research' failed: ScriptExhaustedError" in result.tool_calls[0].output.as_text()


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    ({}, {}, "needs a model"),
    ({"model": "echo", "store": None}, {}, "may not set store"),
    ({"model": "echo", "session_id": "x"}, {}, "may not set session_id"),
    ({"model": "echo"}, {"max_concurrent": 0}, "max_concurrent"),
    ({"model": "echo"}, {"timeout": -1}, "timeout"),
    ({"model": "echo"}, {"description": " "}, "description"),
    ({"model": "echo", "max_stepz": 3}, {}, "max_stepz"),
    (42, {}, "takes an Agent or a mapping"),
])
def test_bad_configuration_is_refused_before_any_call(args, kwargs, message):
    kw = {"name": "research", "description": "d", **kwargs}
    with pytest.raises(ConfigurationError, match=message):
        subagent_tool(args, **kw)


def test_an_agent_child_gets_the_parents_deps_and_returns_its_structured_output():
    from dataclasses import dataclass

    from pydantic import BaseModel

    from agentkit import Agent

    @dataclass
    class Db:
        rows: dict

    class Finding(BaseModel):
        answer: str
        confidence: float

    @tool
    def query(key: str, ctx: ToolContext) -> str:
        """Query the database."""
        return ctx.deps.rows[key]

    child_model = ScriptedModel([ToolCall(name="query", input={"key": "capital"}),
                                 ToolCall(name="final_answer", input={"answer": "Lisbon", "confidence": 0.9})])
    analyst = Agent(child_model, tools=[query], deps_type=Db, output_type=Finding)
    tool_ = subagent_tool(analyst, name="analyst", description="Look facts up")
    parent = ScriptedModel([ToolCall(name="analyst", input={"task": "capital of Portugal?"}), "Lisbon."])
    result = run_agent(parent, "go", tools=[tool_], deps=Db(rows={"capital": "Lisbon"}))
    record = result.tool_calls[0]
    assert not record.is_error, record.output
    assert record.output.kind == "json" and record.output.value == {"answer": "Lisbon", "confidence": 0.9}
    # the child's tool read the parent's deps
    assert child_model.requests[1].messages[-1].content[0].output.value == "Lisbon"


def test_a_reused_call_id_with_another_task_gets_a_fresh_child(tmp_path):
    store = FileEventStore(tmp_path)
    child = FunctionModel(lambda r: f"answer to {r.messages[-1].content[0].text}")
    research = subagent_tool({"model": child}, name="research", description="d")
    for task in ("first task", "second task", "first task"):
        # the same call id each time (as a provider that repeats ids would give)
        parent = ScriptedModel([ToolCall(name="research", input={"task": task}, id="call_1"), "ok"])
        with Session(parent, tools=[research], store=store, session_id="p") as s:
            s.push_user_message(task)
            assert s.generate().tool_calls[0].output.as_text() == f"answer to {task}"
    assert child.request_count == 2  # the third call replayed the first child's answer
    with Session.open("p.sub.call_1-2", store=store) as second:
        assert [m.text for m in second.model_messages()] == ["second task", "answer to second task"]
    with Session.open("p.sub.call_1", store=store) as first:
        assert [m.text for m in first.model_messages()] == ["first task", "answer to first task"]


def test_report_usage_is_checked_and_harmless_outside_the_loop():
    ctx = ToolContext(tool_call_id="c", tool_name="t", cancel=CancelToken())
    assert ctx.report_usage(Usage(input_tokens=5, total_tokens=5)) is True
    assert ctx.streaming is False
    ctx.emit(SubagentStartEvent(tool_call_id="c", name="t", task="x"))  # nobody listens: a no-op
    with pytest.raises(ConfigurationError, match="takes a Usage"):
        ctx.report_usage({"input_tokens": 5})
    with pytest.raises(ConfigurationError, match="total_tokens is negative"):
        ctx.report_usage(Usage(total_tokens=-100))
