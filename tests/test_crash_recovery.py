"""Crashes around approved tool calls: a call approved in one process and killed inside its
tool is uncertain in every process that reopens the session, is never run again on its
own, and keeps its idempotency key; a call that only waits for approval, or that the gate
denied, has no execution intent."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from _crash_child import refund_tool

from agentkit import ApprovalPolicy, FileEventStore, InMemoryEventStore, ScriptedModel, Session, ToolCall, tool
from agentkit.events import ControlEvent, ToolResultEvent

CHILD = Path(__file__).resolve().parent / "_crash_child.py"
ASK = ApprovalPolicy(mode="ask-writes")


def intents(events) -> list[ControlEvent]:
    return [e for e in events if isinstance(e, ControlEvent) and e.action == "tool-execution-intent"]


def test_an_approved_call_killed_inside_its_tool_is_uncertain_and_never_runs_again(tmp_path):
    root, marker = tmp_path / "store", tmp_path / "refunds.txt"
    store = FileEventStore(root)
    # A: the model asks for a refund, which waits for a person's approval
    model = ScriptedModel([ToolCall(name="refund", input={"order": "o-7"})])
    with Session.open("order", store=store, model=model, tools=[refund_tool(marker, die=False)],
                      approval=ASK) as a:
        assert a.ask("refund order o-7").finish_reason == "approval-required"
        # waiting for an answer is not running: no intent, nothing uncertain
        assert intents(a.events) == [] and a.uncertain_tool_executions() == []
    # B, its own process: approves, the tool's side effect happens, the process dies
    proc = subprocess.run([sys.executable, str(CHILD), "approve-and-die", str(root), "order", str(marker)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    (line,) = marker.read_text().splitlines()
    call_id, key = line.split()

    # C, a fresh process: the call is uncertain, under the key the tool got
    model = ScriptedModel(["I cannot tell whether the refund went through."])
    with Session.open("order", store=FileEventStore(root), model=model, tools=[refund_tool(marker, die=False)],
                      approval=ASK) as c:
        (unknown,) = c.uncertain_tool_executions()
        assert (unknown.tool_call_id, unknown.intent_id, unknown.tool_name, unknown.input) == (
            call_id, key, "refund", {"order": "o-7"})
        assert c.pending_approvals() == []
        answer = c.ask("did the refund work?")
        assert answer.text == "I cannot tell whether the refund went through."
        assert marker.read_text().splitlines() == [line]  # not run again
        shown = model.requests[0].messages[2].content[0]  # user, assistant call, its result
        assert shown.tool_call_id == call_id and shown.output.is_error
        assert "may or may not have taken effect" in shown.output.value
        assert [u.intent_id for u in c.uncertain_tool_executions()] == [key]
        assert len(intents(c.events)) == 1  # one intent: the call was never declared again

    # D, another resume: the same call, the same key; generate() does not run it either
    model = ScriptedModel(["Still unknown."])
    with Session.open("order", store=FileEventStore(root), model=model, tools=[refund_tool(marker, die=False)],
                      approval=ASK) as d:
        assert [(u.tool_call_id, u.intent_id) for u in d.uncertain_tool_executions()] == [(call_id, key)]
        d.push_user_message("and now?")
        assert d.generate().text == "Still unknown."
        assert marker.read_text().splitlines() == [line]
        d.reconcile_tool_execution(key, "executed", output="refunded o-7")
        assert d.uncertain_tool_executions() == []


def test_an_approved_call_whose_intent_is_committed_is_not_run_on_resume():
    """The same in one process, from the log a crash leaves: the request approved, the
    intent committed, no result."""
    runs: list[str] = []

    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        runs.append(order)
        return "refunded"

    store = InMemoryEventStore()
    model = ScriptedModel([ToolCall(name="refund", input={"order": "o-8"}), "Unknown outcome."])
    with Session.open("o", store=store, model=model, tools=[refund], approval=ASK) as s:
        s.ask("refund o-8")
        (request,) = s.pending_approvals()
        s.approve(request.id)
    stored = store.load("o")
    call = next(e for e in stored.events if e.type == "assistant-message").tool_calls[0]
    intent = ControlEvent(action="tool-execution-intent", seq=stored.events[-1].seq + 1,
                          data={"tool_call_id": call.tool_call_id, "tool_name": "refund", "input": {"order": "o-8"}})
    store.append("o", [intent], expected_revision=stored.revision)  # what the dead process wrote
    with Session.open("o", store=store, model=model, tools=[refund], approval=ASK) as s:
        assert s.generate().text == "Unknown outcome."
        assert runs == []
        (closed,) = [e for e in s.events if isinstance(e, ToolResultEvent)]
        assert closed.intent_id is None and closed.output.is_error  # the intent stays open
        assert [u.intent_id for u in s.uncertain_tool_executions()] == [intent.id]


def test_a_call_the_gate_denies_gets_no_intent():
    ran: list[str] = []

    @tool
    def wipe(path: str) -> str:
        """Delete everything under path."""
        ran.append(path)
        return "wiped"

    @tool(read_only=True)
    def look(path: str) -> str:
        """List a directory."""
        return "a b c"

    model = ScriptedModel([[ToolCall(name="wipe", input={"path": "/"}), ToolCall(name="look", input={"path": "/"})],
                           ToolCall(name="wipe", input={"path": "/tmp"}), "done"])
    answers = iter([False])
    policy = ApprovalPolicy(mode="ask-writes", rules={"wipe": "deny"})
    with Session.open("d", store=InMemoryEventStore(), model=model, tools=[wipe, look], approval=policy) as s:
        s.ask("clean up")
        declared = [e.data["tool_name"] for e in intents(s.events)]
        assert declared == ["look"]  # the denied wipe never ran: nothing to be uncertain about
        denied = [e for e in s.events if isinstance(e, ToolResultEvent) and e.tool_name == "wipe"]
        assert len(denied) == 2 and all(e.intent_id is None and e.output.is_error for e in denied)
        assert ran == [] and s.uncertain_tool_executions() == []
    # an approver's "no" in the same step, and a person's deny on resume: no intent either
    model = ScriptedModel([ToolCall(name="wipe", input={"path": "/"}), "ok", ToolCall(name="wipe", input={"path": "/"}),
                           "ok"])
    with Session.open("e", store=InMemoryEventStore(), model=model, tools=[wipe], approval=ASK,
                      approver=lambda request: next(answers)) as s:
        s.ask("clean up")
        assert intents(s.events) == [] and ran == []
    with Session.open("f", store=InMemoryEventStore(), model=model, tools=[wipe], approval=ASK) as s:
        s.ask("clean up")
        (request,) = s.pending_approvals()
        s.deny(request.id, reason="not today")
        s.generate()
        assert intents(s.events) == [] and ran == []
