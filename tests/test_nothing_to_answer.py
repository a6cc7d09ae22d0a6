"""generate() with nothing new to answer calls no model: it returns a result with
``finish_reason == "nothing-to-answer"``; anything new (a message, a runtime event, an
open tool call, an approval decision, a transaction) still runs a generation."""

from __future__ import annotations

from agentkit import ApprovalPolicy, FileEventStore, FunctionModel, Session, ToolCall, tool
from agentkit.events import AssistantMessageEvent
from agentkit.messages import ToolCallPart
from agentkit.models import ModelRequest


class Recorder:
    """A model that records the conversation of each request and answers ``reply``."""

    def __init__(self, reply="ok"):
        self.requests: list[ModelRequest] = []
        self.reply = reply
        self.model = FunctionModel(self._reply)

    def _reply(self, request):
        self.requests.append(request)
        return self.reply(request) if callable(self.reply) else self.reply

    def sizes(self) -> list[int]:
        return [len(r.messages) for r in self.requests]


def test_generate_ask_generate_generate_calls_the_model_once():
    rec = Recorder()
    with Session(rec.model) as s:
        first = s.generate()  # an empty conversation
        answered = s.ask("q")
        second, third = s.generate(), s.generate()  # it ends in the model's own answer
    assert rec.sizes() == [1]
    assert answered.finish_reason == "stop" and answered.text == "ok"
    for result in (first, second, third):
        assert result.finish_reason == "nothing-to-answer"
        assert result.text == "" and result.steps == () and result.tool_calls == ()
        assert result.usage.total_tokens == 0
    assert [m.role for m in third.messages] == ["user", "assistant"]
    assert len(s.events) == 2  # nothing was committed


def test_a_pushed_message_or_runtime_event_is_something_to_answer():
    rec = Recorder()
    with Session(rec.model) as s:
        s.ask("q")
        s.push_runtime_event("timer-fired", {"at": "noon"})
        assert s.generate().finish_reason == "stop"
        s.push_user_message("and?")
        assert s.generate().finish_reason == "stop"
        assert s.generate().finish_reason == "nothing-to-answer"
    assert rec.sizes() == [1, 3, 5]


def test_a_job_output_event_hidden_from_the_conversation_still_runs_a_generation():
    rec = Recorder()
    with Session(rec.model) as s:
        s.ask("q")
        s.push_runtime_event("job-output", {"execution_id": "j1", "chunk": "line"})
        assert [m.role for m in s.model_messages()] == ["user", "assistant"]  # not shown itself
        assert s.generate().finish_reason == "stop"
    assert len(rec.requests) == 2


def test_job_output_committed_while_the_model_answered_is_something_to_answer():
    def reply(request):  # a job writes output while the model is answering
        if len(rec.requests) == 1:
            session.push_runtime_event("job-output", {"execution_id": "j1", "chunk": "late line"})
        return "ok"

    rec = Recorder(reply)
    with Session(rec.model) as session:
        session.ask("q")
        assert session.generate().finish_reason == "stop"  # the model did not see that output
        assert session.generate().finish_reason == "nothing-to-answer"
    assert len(rec.requests) == 2


def test_a_reopened_session_with_a_runtime_event_after_its_answer_runs(tmp_path):
    rec = Recorder()
    with Session(rec.model, session_id="s1", store=FileEventStore(tmp_path)) as s:
        s.ask("q")
    with Session(rec.model, session_id="s1", store=FileEventStore(tmp_path)) as s:
        assert s.generate().finish_reason == "nothing-to-answer"
        s.push_runtime_event("job-finished", {"execution_id": "j1"})
    with Session(rec.model, session_id="s1", store=FileEventStore(tmp_path)) as s:
        assert s.generate().text == "ok"
    assert rec.sizes() == [1, 3]


def test_a_tool_call_left_open_by_a_crash_is_settled_and_answered(tmp_path):
    rec = Recorder()
    with Session(rec.model, session_id="s1", store=FileEventStore(tmp_path)) as s:
        s.ask("q")
        # the process died after the model asked for a tool: the call has no result
        s.push_event(AssistantMessageEvent(content=(ToolCallPart(tool_call_id="c1", tool_name="t", input={}),)))
    with Session(rec.model, session_id="s1", store=FileEventStore(tmp_path)) as s:
        result = s.generate()
    assert result.finish_reason == "stop" and len(rec.requests) == 2
    assert "interrupted" in rec.requests[1].messages[-1].content[0].output.as_text()


def test_an_approval_decision_resumes_the_waiting_call():
    ran = []

    @tool
    def write(text: str) -> str:
        """Write ``text``."""
        ran.append(text)
        return "written"

    rec = Recorder(lambda request: ToolCall("write", {"text": "x"}) if len(rec.requests) == 1 else "done")
    with Session(rec.model, tools=[write], approval=ApprovalPolicy(mode="ask-all")) as s:
        assert s.ask("go").finish_reason == "approval-required"
        assert s.generate().finish_reason == "approval-required"  # still waiting: no model call
        assert len(rec.requests) == 1
        s.approve(s.pending_approvals()[0].id)
        assert s.generate().text == "done"
    assert ran == ["x"] and len(rec.requests) == 2


def test_a_transactional_generation_runs():
    rec = Recorder()
    with Session(rec.model) as s:
        s.ask("q")
        txn = s.begin_generation("again")
        assert s.generate(transaction=txn).text == "ok"
    assert rec.sizes() == [1, 3]


def test_a_stream_with_nothing_to_answer_ends_at_once():
    rec = Recorder()
    with Session(rec.model) as s:
        with s.stream() as stream:
            kinds = [type(e).__name__ for e in stream]
        assert stream.result.finish_reason == "nothing-to-answer"
    assert rec.requests == [] and kinds[-1] == "GenerationEndEvent"
