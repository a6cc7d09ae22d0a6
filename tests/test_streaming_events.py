"""The complete event stream: message start and end, usage per step, and what the log
records beside the conversation (approvals, budgets, compaction), plus model retries,
as agent events in the order they happen."""

from __future__ import annotations

import json

import pytest
from _tools import add
from fakes import openai_wire as ow
from fakes.server import FakeServer

from agentkit import (
    ApprovalDecision,
    ApprovalPolicy,
    ContextOverflowError,
    FileEventStore,
    FunctionModel,
    Limits,
    Retention,
    ScriptedModel,
    Session,
    Threshold,
    ToolCall,
    Usage,
    run_agent_stream,
    tool,
)
from agentkit.events import ControlEvent
from agentkit.models import RetryPolicy, Turn
from agentkit.models.openai import OpenAIChatModel
from agentkit.streaming import (
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    BudgetExceededEvent,
    CompactedEvent,
    MessageEndEvent,
    MessageStartEvent,
    RetryEvent,
    StepUsageEvent,
)


@tool
def write_note(text: str) -> str:
    """Write a note (not read-only: the approval policy asks)."""
    return f"wrote {text}"


def types(events) -> list[str]:
    return [e.type for e in events]


def runs(kinds: list[str]) -> list[str]:
    """``kinds`` with repeats in a row written once (deltas come in chunks)."""
    return [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]


def dicts(events) -> list[dict]:
    """Every event as JSON, and back (each must serialise)."""
    return [json.loads(json.dumps(e.to_dict())) for e in events]


def summary(messages, *, reason, cancel):
    return f"summary ({reason}) of {len(messages)} messages"


# -- the assistant message and usage -----------------------------------------------------


def test_message_start_and_end_enclose_every_assistant_message_also_one_with_only_tool_calls():
    model = ScriptedModel([ToolCall(name="add", input={"a": 1, "b": 2}, id="c1"),
                           Turn(text="three", reasoning="1 + 2")], chunk_size=2)
    with run_agent_stream(model, "add", tools=[add]) as stream:
        events = list(stream)
    assert runs(types(events)) == [
        "generation-start",
        "step-start", "message-start", "tool-call", "message-end", "usage", "tool-start", "tool-end", "step-end",
        "step-start", "message-start", "reasoning-delta", "text-delta", "message-end", "usage", "step-end",
        "generation-end",
    ]
    assert types(events).count("text-delta") == 3  # "three" in chunks of 2
    starts = [e for e in events if isinstance(e, MessageStartEvent)]
    ends = [e for e in events if isinstance(e, MessageEndEvent)]
    assert [e.index for e in starts] == [e.index for e in ends] == [0, 1]
    first, second = ends
    assert first.message.role == "assistant" and first.message.text == ""
    assert [c.tool_call_id for c in first.message.tool_calls] == ["c1"]
    assert second.message.text == "three" and second.finish_reason == "stop"
    as_json = [d for d in dicts(events) if d["type"] == "message-end"]
    assert as_json[0]["tool_calls"] == [{"tool_call_id": "c1", "tool_name": "add", "input": {"a": 1, "b": 2}}]
    assert as_json[1]["text"] == "three" and as_json[1]["message"]["role"] == "assistant"


def test_an_empty_answer_still_has_its_message_start_and_end():
    with run_agent_stream(FunctionModel(lambda request: ""), "say nothing") as stream:
        kinds = types(stream)
    assert kinds == ["generation-start", "step-start", "message-start", "message-end", "usage", "step-end",
                     "generation-end"]


def test_usage_is_reported_per_step_with_the_running_total():
    model = ScriptedModel([ToolCall(name="add", input={"a": 1, "b": 2}), ToolCall(name="add", input={"a": 3, "b": 4}),
                           "done"])
    with run_agent_stream(model, "add twice", tools=[add]) as stream:
        events = list(stream)
        result = stream.result
    usages = [e for e in events if isinstance(e, StepUsageEvent)]
    steps = [e.step for e in events if e.type == "step-end"]
    assert [u.index for u in usages] == [0, 1, 2]
    assert [u.usage for u in usages] == [s.usage for s in steps]
    running = Usage()
    for u in usages:
        running = running + u.usage
        assert u.total == running
    assert usages[-1].total == result.usage and result.usage.total_tokens > 0
    # each comes after its message and before its tools
    kinds = types(events)
    assert kinds.index("usage") == kinds.index("message-end") + 1 < kinds.index("tool-start")
    assert dicts(usages)[-1]["total"]["total_tokens"] == result.usage.total_tokens


def test_callbacks_alone_build_no_new_events_and_see_the_same_run():
    tokens: list[str] = []
    model = ScriptedModel(["hello there"], chunk_size=5)
    with Session(model) as s:
        result = s.ask("hi", on_token=tokens.append)
    assert "".join(tokens) == result.text == "hello there"


# -- approvals ---------------------------------------------------------------------------


def test_an_in_process_approver_streams_the_request_and_its_decision_before_the_call():
    asked = []

    def approver(request):
        asked.append(request.tool_call_id)
        return request.input["text"] != "secret" or ApprovalDecision.deny("not that one", note="reviewer")

    model = ScriptedModel([Turn(tool_calls=(ToolCall(name="write_note", input={"text": "hi"}, id="c1"),
                                            ToolCall(name="write_note", input={"text": "secret"}, id="c2"))),
                           "done"])
    with Session(model, tools=[write_note], approval=ApprovalPolicy(mode="ask-writes"), approver=approver) as s:
        s.push_user_message("write two notes")
        with s.stream() as stream:
            events = list(stream)
        seen = [m for r in model.requests for m in r.messages]
    kinds = types(events)
    assert kinds[:12] == [
        "generation-start", "step-start", "message-start", "tool-call", "tool-call", "message-end", "usage",
        "approval-requested", "approval-requested", "approval-decided", "approval-decided", "tool-start",
    ]
    requested = [e for e in events if isinstance(e, ApprovalRequestedEvent)]
    decided = [e for e in events if isinstance(e, ApprovalDecidedEvent)]
    assert [r.request.tool_call_id for r in requested] == ["c1", "c2"] == asked
    assert all(r.approver for r in requested) and requested[0].request.input == {"text": "hi"}
    assert [(d.tool_call_id, d.approved, d.source) for d in decided] == [("c1", True, "approver"),
                                                                        ("c2", False, "approver")]
    assert decided[1].reason == "not that one" and decided[1].note == "reviewer"
    assert {d.request_id for d in decided} == {r.request.id for r in requested}
    as_json = dicts(requested + decided)
    assert as_json[0]["request_id"] == requested[0].request.id and as_json[0]["approver"] is True
    assert as_json[3] == {"type": "approval-decided", "request_id": requested[1].request.id, "tool_call_id": "c2",
                          "tool_name": "write_note", "approved": False, "reason": "not that one",
                          "remember": False, "note": "reviewer", "source": "approver"}
    # the model never sees approval events: only the results (the denied call's is an error)
    shown = json.dumps([m.to_dict() for m in seen])
    assert "approval" not in shown and "denied: not that one" in shown


def test_a_deferred_approval_streams_the_request_then_the_hosts_decision_when_the_calls_go_on():
    model = ScriptedModel([ToolCall(name="write_note", input={"text": "hi"}, id="c1"), "noted"])
    with Session(model, tools=[write_note], approval=ApprovalPolicy(mode="ask-writes")) as s:
        s.push_user_message("write a note")
        with s.stream() as first:
            before = list(first)
        assert first.result.finish_reason == "approval-required"
        assert types(before) == ["generation-start", "step-start", "message-start", "tool-call", "message-end",
                                 "usage", "approval-requested", "step-end", "generation-end"]
        (requested,) = [e for e in before if isinstance(e, ApprovalRequestedEvent)]
        assert requested.approver is False
        assert [r.id for r in s.pending_approvals()] == [requested.request.id]
        s.approve(requested.request.id, note="ok by me")
        with s.stream() as second:
            after = list(second)
        assert second.result.text == "noted"
    assert types(after)[:4] == ["generation-start", "approval-decided", "tool-start", "tool-end"]
    decided = after[1]
    assert isinstance(decided, ApprovalDecidedEvent)
    assert (decided.request_id, decided.tool_call_id, decided.approved, decided.source, decided.note) == (
        requested.request.id, "c1", True, "host", "ok by me")
    assert after[3].record.output.value == "wrote hi"
    assert "approval-decided" not in types(after)[2:]  # announced once


def test_a_hosts_earlier_decision_is_announced_before_the_approver_answers_the_rest():
    model = ScriptedModel([Turn(tool_calls=(ToolCall(name="write_note", input={"text": "a"}, id="c1"),
                                            ToolCall(name="write_note", input={"text": "b"}, id="c2"))),
                           "both written"])
    with Session(model, tools=[write_note], approval=ApprovalPolicy(mode="ask-writes")) as s:
        s.push_user_message("write two notes")
        assert s.generate().finish_reason == "approval-required"
        first = [r for r in s.pending_approvals() if r.tool_call_id == "c1"][0]
        s.approve(first.id)
        with s.stream(approver=lambda request: True) as stream:  # answers the one still open
            events = list(stream)
        assert stream.result.text == "both written"
    decided = [(e.tool_call_id, e.source) for e in events if isinstance(e, ApprovalDecidedEvent)]
    assert decided == [("c1", "host"), ("c2", "approver")]
    assert types(events)[:4] == ["generation-start", "approval-decided", "approval-decided", "tool-start"]


def test_a_deferred_denial_is_announced_before_the_error_result():
    model = ScriptedModel([ToolCall(name="write_note", input={"text": "hi"}, id="c1"), "ok, I will not"])
    with Session(model, tools=[write_note], approval=ApprovalPolicy(mode="ask-writes")) as s:
        s.push_user_message("write a note")
        s.generate()
        (request,) = s.pending_approvals()
        s.deny(request.id, reason="no notes today")
        with s.stream() as stream:
            events = list(stream)
    decided = events[1]
    assert isinstance(decided, ApprovalDecidedEvent) and not decided.approved
    assert decided.reason == "no notes today"
    assert events[3].type == "tool-end" and events[3].record.output.is_error


# -- budgets and compaction --------------------------------------------------------------


def test_a_reached_limit_streams_budget_exceeded_before_the_end():
    model = ScriptedModel([ToolCall(name="add", input={"a": 1, "b": 2}), "never asked"])
    with run_agent_stream(model, "add", tools=[add], limits=Limits(model_calls=1)) as stream:
        events = list(stream)
        result = stream.result
    assert result.finish_reason == "budget-exceeded"
    assert types(events)[-3:] == ["step-end", "budget-exceeded", "generation-end"]
    exceeded = events[-2]
    assert isinstance(exceeded, BudgetExceededEvent)
    assert (exceeded.limit, exceeded.maximum, exceeded.used) == ("model_calls", 1, 1)
    assert dicts([exceeded]) == [{"type": "budget-exceeded", "limit": "model_calls", "maximum": 1, "used": 1}]


def test_auto_compaction_is_streamed_before_the_model_call_it_shrank():
    model = FunctionModel(lambda request: "x" * 400)
    with Session(model, compactor=summary, auto_compact=Threshold(tokens=300, keep_last=2)) as s:
        for i in range(3):
            s.ask(f"question {i}")
        s.push_user_message("question 3")
        with s.stream() as stream:
            events = list(stream)
        logged = [e for e in s.events if e.type == "compaction"]
    assert types(events)[:3] == ["generation-start", "compacted", "step-start"]
    compacted = events[1]
    assert isinstance(compacted, CompactedEvent) and compacted.reason == "auto"
    assert compacted.compaction_id == logged[-1].id and compacted.covered == logged[-1].covered > 0
    assert "summary (auto) of" in compacted.summary[0].text
    assert dicts([compacted])[0]["covered_through"] == logged[-1].covered_through


def test_overflow_compaction_is_streamed_between_the_failed_and_the_repeated_step():
    def reply(request):
        if len(request.messages) > 4:
            raise ContextOverflowError("prompt is too long")
        return "short enough"

    with Session(FunctionModel(reply), compactor=summary) as s:
        for i in range(2):
            s.push_user_message(f"question {i}")
            s.push_event(ControlEvent(action="note", data={}))
        s.ask("a")
        s.push_user_message("b")
        s.push_user_message("c")
        with s.stream() as stream:
            events = list(stream)
    kinds = types(events)
    assert kinds[:4] == ["generation-start", "step-start", "compacted", "step-start"]
    assert events[2].reason == "context-overflow" and stream.result.text == "short enough"


def test_retention_compaction_is_streamed_after_the_last_step(tmp_path):
    with Session(FunctionModel(lambda request: "ok"), compactor=summary, store=FileEventStore(tmp_path),
                 session_id="kept", retention=Retention(max_events=4, keep_last=2)) as s:
        s.ask("one")
        s.ask("two")  # four events: not more than max_events yet
        with s.ask_stream("three") as stream:
            events = list(stream)
    assert types(events)[-3:] == ["step-end", "compacted", "generation-end"]
    assert events[-2].reason == "retention"


# -- retries against a real HTTP server --------------------------------------------------


def test_model_retries_are_streamed_with_attempt_delay_and_error():
    with FakeServer() as server:
        server.add(
            ow.error(429, "Rate limit reached", type_="requests", headers={"retry-after": "0.05"}),
            ow.error(503, "busy", type_="server_error"),
            ow.text_stream("recovered"),
        )
        seen = []
        model = OpenAIChatModel("gpt-4.1-mini", base_url=server.url + "/v1", api_key="test",
                                retry=RetryPolicy(max_retries=3, initial_delay=0.001, max_delay=0.005),
                                on_retry=seen.append)
        with run_agent_stream(model, "hi") as stream:
            events = list(stream)
        assert stream.result.text == "recovered" and len(server.requests) == 3
    kinds = types(events)
    assert kinds[:5] == ["generation-start", "step-start", "retry", "retry", "message-start"]
    retries = [e for e in events if isinstance(e, RetryEvent)]
    assert [(r.attempt, r.retry_after) for r in retries] == [(1, 0.05), (2, None)]
    assert retries[0].delay == 0.05 and 0 < retries[1].delay <= 0.005
    assert [r.attempt for r in seen] == [1, 2]  # the model's own on_retry still hears them
    as_json = dicts(retries)
    assert as_json[0]["error"]["type"] == "RateLimitError" and as_json[0]["error"]["status_code"] == 429
    assert as_json[1]["error"]["status_code"] == 503 and as_json[0]["error"]["provider"] == "openai"


def test_every_new_event_kind_serialises_to_json():
    for event in [MessageStartEvent(index=0), StepUsageEvent(index=0, usage=Usage(), total=Usage()),
                  BudgetExceededEvent(limit="total_tokens", maximum=1, used=2)]:
        assert json.loads(json.dumps(event.to_dict()))["type"] == event.type


@pytest.mark.parametrize("stream_it", [False, True])
def test_a_plain_run_and_a_streamed_run_commit_the_same_log(stream_it):
    model = ScriptedModel([ToolCall(name="add", input={"a": 1, "b": 2}), "three"])
    with Session(model, tools=[add], limits=Limits(tool_calls=5)) as s:
        if stream_it:
            with s.ask_stream("add") as stream:
                list(stream)
        else:
            s.ask("add")
        assert [e.type for e in s.events] == ["user-message", "assistant-message", "tool-result",
                                              "assistant-message"]

