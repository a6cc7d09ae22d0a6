"""Handoffs (agentkit/loop/_handoffs.py, agentkit/tools/_handoffs.py): an agent hands the
conversation to another, which answers from then on; the handoff is a tool call that
passes the source's approvals and hooks, an event in the log and in the stream, and a
durable session reopened elsewhere goes on with the agent it was handed to."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentkit import (
    Agent,
    ApprovalPolicy,
    ConfigurationError,
    FileEventStore,
    FunctionModel,
    HookError,
    Hooks,
    Retention,
    ScriptedModel,
    Session,
    ToolCall,
    ToolContext,
    ToolDecision,
    ToolSearch,
    handoff,
    load_skills,
    run_agent,
    tool,
)
from agentkit.events import AssistantMessageEvent, ControlEvent, ToolResultEvent
from agentkit.messages import Message, ToolOutput
from agentkit.tools import Handoff

ROOT = Path(__file__).resolve().parents[1]


@tool(read_only=True)
def lookup_order(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


@tool
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def tool_names(request) -> list[str]:
    return [t.name for t in request.tools]


def handoff_events(events) -> list[ControlEvent]:
    return [e for e in events if isinstance(e, ControlEvent) and e.action == "handoff"]


def agents(triage_turns, billing_turns, **triage_options):
    billing = Agent(ScriptedModel(billing_turns), name="billing", tools=[refund], system="You do refunds.")
    triage = Agent(ScriptedModel(triage_turns), name="triage", tools=[lookup_order], system="You route.",
                   handoffs=[billing], **triage_options)
    return triage, billing


def test_after_a_handoff_the_target_answers_with_its_own_model_tools_and_system_prompt():
    triage, billing = agents([ToolCall(name="transfer_to_billing", input={}), "never called"],
                             [ToolCall(name="refund", input={"order": "42"}), "Refunded order 42."])
    result = triage.run("I want a refund for order 42")
    assert result.text == "Refunded order 42." and result.finish_reason == "stop"
    assert len(triage.model.requests) == 1  # the source model is not called again
    source_request = triage.model.requests[0]
    assert tool_names(source_request) == ["lookup_order", "transfer_to_billing"]  # never the target's tools
    for request in billing.model.requests:
        assert tool_names(request) == ["refund"]  # never the source's
        assert request.system == "You do refunds."
    first = billing.model.requests[0].messages
    assert first[0].role == "user" and first[0].text == "I want a refund for order 42"
    assert [r.tool_name for r in result.tool_calls] == ["transfer_to_billing", "refund"]
    assert result.tool_calls[0].output.as_text() == "Transferred to billing."
    assert len(result.steps) == 3


def test_the_handoff_is_an_event_in_the_log_and_in_the_stream():
    triage, _ = agents([ToolCall(name="transfer_to_billing", input={}, id="call-h")], ["Billing here."])
    with triage.session() as session:
        stream = session.ask_stream("refund please")
        kinds = [e.to_dict() for e in stream]
        assert stream.result.text == "Billing here."
        events = session.events
    handoffs = [k for k in kinds if k["type"] == "handoff"]
    assert handoffs == [{"type": "handoff", "tool_call_id": "call-h", "tool_name": "transfer_to_billing",
                         "source": "triage", "target": "billing"}]
    # after the handoff call's result, before the target's first step
    types = [k["type"] for k in kinds]
    assert types.index("tool-end") < types.index("handoff") < types.index("step-start", types.index("handoff"))
    (event,) = handoff_events(events)
    assert event.data == {"source": "triage", "target": "billing", "tool_name": "transfer_to_billing",
                          "tool_call_id": "call-h", "path": [["transfer_to_billing", "call-h"]]}
    result = next(e for e in events if isinstance(e, ToolResultEvent) and e.tool_call_id == "call-h")
    assert events.index(event) < events.index(result)  # the result confirms the handoff


def test_a_handoff_between_two_agents_with_different_tools_under_approvals():
    """The handoff call asks the source's approver like any call; after it, the target's
    own tools run under the target's approval policy, still answered by that approver."""
    asked = []

    def approver(request):
        asked.append(request.tool_name)
        return True

    billing = Agent(ScriptedModel([ToolCall(name="refund", input={"order": "7"}), "Refunded."]), name="billing",
                    tools=[refund], approval=ApprovalPolicy(mode="ask-writes"))
    triage = Agent(ScriptedModel([ToolCall(name="lookup_order", input={"order": "7"}),
                                  ToolCall(name="transfer_to_billing", input={}), "never called"]),
                   name="triage", tools=[lookup_order], handoffs=[billing],
                   approval=ApprovalPolicy(mode="ask-all"), approver=approver)
    result = triage.run("refund 7")
    assert result.text == "Refunded."
    # ask-all asks for the read-only lookup and the handoff; billing's ask-writes asks for refund only
    assert asked == ["lookup_order", "transfer_to_billing", "refund"]
    assert [r.output.as_text() for r in result.tool_calls] == ["order 7: shipped", "Transferred to billing.",
                                                              "refunded 7"]
    assert all(tool_names(r) == ["lookup_order", "transfer_to_billing"] for r in triage.model.requests)
    assert all(tool_names(r) == ["refund"] for r in billing.model.requests)


def test_a_denied_handoff_hands_nothing_over_and_the_source_reads_the_denial():
    triage, billing = agents([ToolCall(name="transfer_to_billing", input={}), "I will help you myself."],
                             ["never called"], approval=ApprovalPolicy(mode="ask-all"),
                             approver=lambda request: False)
    with triage.session() as session:
        result = session.ask("refund please")
        events = session.events
    assert result.text == "I will help you myself."
    assert billing.model.requests == []
    assert handoff_events(events) == []
    denial = triage.model.requests[1].messages[-1].content[0].output
    assert denial.is_error and "denied" in denial.as_text()


def test_a_before_tool_call_hook_can_block_a_handoff():
    def before(call, ctx):
        return ToolDecision.block("no transfers today") if call.tool_name.startswith("transfer_to_") else None

    triage, billing = agents([ToolCall(name="transfer_to_billing", input={}), "Staying with you."], ["never"],
                             hooks=Hooks(before_tool_call=before))
    result = triage.run("refund please")
    assert result.text == "Staying with you." and billing.model.requests == []
    assert "no transfers today" in result.tool_calls[0].output.as_text()


def test_an_after_tool_call_hook_that_makes_the_result_an_error_hands_nothing_over():
    def after(call, output, ctx):
        return ToolOutput.error("transfer failed") if call.tool_name == "transfer_to_billing" else None

    triage, billing = agents([ToolCall(name="transfer_to_billing", input={}), "Still me.", "Still me, again."],
                             ["never"], hooks=Hooks(after_tool_call=after))
    with triage.session() as session:
        result = session.ask("refund please")
        assert result.text == "Still me." and billing.model.requests == []
        assert len(handoff_events(session.events)) == 1  # made, but its result did not confirm it
        assert session.ask("and now?").text == "Still me, again."  # the next generation too
    assert billing.model.requests == []


def test_an_approval_waiting_in_the_log_hands_over_when_approved_in_a_later_generation(tmp_path):
    store = FileEventStore(tmp_path)
    triage, billing = agents([ToolCall(name="transfer_to_billing", input={}), "never called"], ["Billing here."],
                             approval=ApprovalPolicy(mode="ask-all"))
    with triage.session("s1", store) as session:
        first = session.ask("refund please")
        assert first.finish_reason == "approval-required" and billing.model.requests == []
        (request,) = session.pending_approvals()
        assert request.tool_name == "transfer_to_billing"
        session.approve(request.id)
        second = session.generate()
    assert second.text == "Billing here."
    assert len(triage.model.requests) == 1 and len(billing.model.requests) == 1


def test_only_the_first_handoff_call_of_an_answer_is_made():
    other = Agent(ScriptedModel(["never"]), name="other")
    billing = Agent(ScriptedModel(["Billing here."]), name="billing")
    triage = Agent(ScriptedModel([[ToolCall(name="transfer_to_other", input={}),
                                   ToolCall(name="transfer_to_billing", input={})]]),
                   handoffs=[billing, other])
    result = triage.run("hi")
    assert result.text == "never"  # the model named other first
    first, second = result.tool_calls
    assert first.output.as_text() == "Transferred to other."
    assert second.output.is_error and "only one handoff at a time" in second.output.as_text()
    assert billing.model.requests == []


def test_a_chain_of_handoffs_ends_with_the_last_target_answering():
    refunds = Agent(ScriptedModel(["Refunds here."]), name="refunds")
    billing = Agent(ScriptedModel([ToolCall(name="transfer_to_refunds", input={})]), name="billing",
                    handoffs=[refunds])
    triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={})]), name="triage",
                   handoffs=[billing])
    stream = triage.stream("refund")
    hops = [(e.source, e.target) for e in stream if e.type == "handoff"]
    assert hops == [("triage", "billing"), ("billing", "refunds")]
    assert stream.result.text == "Refunds here."
    assert tool_names(billing.model.requests[0]) == ["transfer_to_refunds"]
    assert tool_names(refunds.model.requests[0]) == []


def test_a_chain_that_never_ends_stops_at_max_steps():
    """Agents are immutable, so a chain is finite; each hop is a model call, and the
    generation's steps count together against max_steps."""
    last = Agent(ScriptedModel([]), name="agent5")
    for i in range(4, 0, -1):
        last = Agent(ScriptedModel([ToolCall(name=f"transfer_to_{last.name}", input={})]), name=f"agent{i}",
                     handoffs=[last], max_steps=3)
    result = last.run("go")
    assert result.finish_reason == "max-steps" and len(result.steps) == 3


def test_a_durable_session_reopened_in_another_process_goes_on_with_the_target(tmp_path):
    store = FileEventStore(tmp_path)
    triage, billing = agents([ToolCall(name="transfer_to_billing", input={})], ["Billing here."])
    with triage.session("s1", store) as session:
        assert session.ask("refund please").text == "Billing here."
    child = textwrap.dedent(f"""
        import json
        from agentkit import Agent, FileEventStore, ScriptedModel, tool

        @tool
        def refund(order: str) -> str:
            '''Refund an order.'''
            return "refunded " + order

        @tool(read_only=True)
        def lookup_order(order: str) -> str:
            '''Look an order up.'''
            return "shipped"

        billing = Agent(ScriptedModel(["Billing again."]), name="billing", tools=[refund], system="You do refunds.")
        triage = Agent(ScriptedModel(["triage, wrongly"]), name="triage", tools=[lookup_order], handoffs=[billing])
        with triage.session("s1", FileEventStore({str(tmp_path)!r})) as session:
            text = session.ask("and my other order?").text
        request = billing.model.requests[0]
        print(json.dumps({{"text": text, "triage_calls": len(triage.model.requests),
                          "system": request.system, "tools": [t.name for t in request.tools],
                          "user": [m.text for m in request.messages if m.role == "user"]}}))
    """)
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, check=True)
    seen = json.loads(out.stdout)
    assert seen == {"text": "Billing again.", "triage_calls": 0, "system": "You do refunds.", "tools": ["refund"],
                    "user": ["refund please", "and my other order?"]}


def test_a_second_session_object_on_the_store_goes_on_with_the_target_and_its_chain(tmp_path):
    refunds = Agent(ScriptedModel(["Refunds here.", "Refunds again."]), name="refunds")
    billing = Agent(ScriptedModel([ToolCall(name="transfer_to_refunds", input={})]), name="billing",
                    handoffs=[refunds])
    triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={})]), name="triage",
                   handoffs=[billing])
    with triage.session("s1", FileEventStore(tmp_path)) as first:
        first.ask("refund")
    with triage.session("s1", FileEventStore(tmp_path)) as second:
        assert second.ask("more").text == "Refunds again."
        (_, last) = handoff_events(second.events)
    assert last.data["path"][0][0] == "transfer_to_billing" and last.data["path"][1][0] == "transfer_to_refunds"
    assert len(triage.model.requests) == 1 and len(billing.model.requests) == 1


def test_a_session_opened_with_an_agent_whose_handoffs_do_not_lead_there_is_a_clear_error(tmp_path):
    triage, _ = agents([ToolCall(name="transfer_to_billing", input={})], ["Billing here."])
    with triage.session("s1", FileEventStore(tmp_path)) as session:
        session.ask("refund")
    stranger = Agent(ScriptedModel(["never"]), name="stranger",
                     handoffs=[Agent(ScriptedModel([]), name="sales")])
    with stranger.session("s1", FileEventStore(tmp_path)) as session:
        before = len(session.events)
        with pytest.raises(ConfigurationError, match="offers no handoff 'transfer_to_billing'.*open the session"):
            session.ask("hello?")
        assert len(session.events) == before  # refused before the prompt was committed
    assert stranger.model.requests == []


def test_the_input_filter_shapes_what_the_target_sees_of_the_conversation_before_it():
    seen = []

    def only_user_messages(messages: list[Message]) -> list[Message]:
        seen.append([m.role for m in messages])
        return [m for m in messages if m.role == "user"]

    billing = Agent(ScriptedModel([ToolCall(name="refund", input={"order": "1"}), "Done."]), name="billing",
                    tools=[refund])
    triage = Agent(ScriptedModel([ToolCall(name="lookup_order", input={"order": "1"}),
                                  ToolCall(name="transfer_to_billing", input={})]),
                   name="triage", tools=[lookup_order],
                   handoffs=[handoff(billing, input_filter=only_user_messages)])
    assert triage.run("refund order 1").text == "Done."
    assert seen[0] == ["user", "assistant", "tool", "assistant", "tool"]
    first, second = (r.messages for r in billing.model.requests)
    assert [m.role for m in first] == ["user"]
    # the target's own messages after the handoff are shown as they are
    assert [m.role for m in second] == ["user", "assistant", "tool"]


def test_an_input_filter_that_raises_ends_the_generation_with_a_hook_error_naming_it():
    def broken(messages):
        raise KeyError("oops")

    billing = Agent(ScriptedModel(["never"]), name="billing")
    triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={})]),
                   handoffs=[handoff(billing, input_filter=broken)])
    with pytest.raises(HookError, match="the input_filter of handoff 'transfer_to_billing' raised KeyError") as info:
        triage.run("hi")
    assert info.value.hook == "input_filter" and isinstance(info.value.__cause__, KeyError)
    assert billing.model.requests == []


def test_an_input_filter_that_returns_a_broken_history_is_a_clear_error():
    billing = Agent(ScriptedModel(["never"]), name="billing")
    for bad, message in ((lambda messages: "nope", "must return a list of Message"),
                         (lambda messages: messages[1:2], "input_filter of 'transfer_to_billing'")):
        triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={})]),
                       handoffs=[handoff(billing, input_filter=bad)])
        with pytest.raises(ConfigurationError, match=message):
            triage.run("hi")
    assert billing.model.requests == []


def test_run_agent_and_session_take_handoffs_too():
    billing = Agent(ScriptedModel(["From run_agent.", "From a Session."]), name="billing")
    model = ScriptedModel([ToolCall(name="transfer_to_billing", input={}),
                           ToolCall(name="transfer_to_billing", input={})])
    assert run_agent(model, "hi", handoffs=[billing]).text == "From run_agent."
    with Session(model, handoffs=[billing]) as session:
        assert session.ask("hi").text == "From a Session."


def test_tool_names_are_derived_and_customisable():
    named = Agent(ScriptedModel([]), name="Billing Desk!", system="You do billing.\nBe kind.")
    anonymous = Agent(ScriptedModel([]))
    anonymous2 = Agent(ScriptedModel([]))
    source = Agent(ScriptedModel(["ok"]), handoffs=[named, anonymous, anonymous2,
                                                 handoff(named, tool_name="escalate", description="Escalate.")])
    names = [h.tool_name for h in source.options.handoffs]
    assert names == ["transfer_to_Billing_Desk", "transfer_to_agent_1", "transfer_to_agent_2", "escalate"]
    assert all(isinstance(h, Handoff) for h in source.options.handoffs)
    first = source.options.handoffs[0]
    assert "Billing Desk!" in first.describe() and "Its instructions begin: You do billing. Be kind." in \
        first.describe()
    assert source.options.handoffs[3].describe() == "Escalate."
    assert tool_names(_request_of(source)) == names
    only = Agent(ScriptedModel([]), handoffs=[anonymous])
    assert [h.tool_name for h in only.options.handoffs] == ["transfer_to_agent"]
    assert named.name == "Billing Desk!" and anonymous.name is None


def _request_of(agent):
    agent.run("hi")
    return agent.model.requests[0]


def test_an_unnamed_target_answers_and_is_named_by_its_tool():
    anonymous = Agent(ScriptedModel(["Anonymous here."]))
    source = Agent(ScriptedModel([ToolCall(name="transfer_to_agent", input={})]), handoffs=[anonymous])
    stream = source.stream("hi")
    (event,) = [e for e in stream if e.type == "handoff"]
    assert (event.source, event.target) == (None, "transfer_to_agent")
    assert stream.result.text == "Anonymous here."
    assert stream.result.tool_calls[0].output.as_text() == "Transferred to transfer_to_agent."


@pytest.mark.parametrize("make, message", [
    (lambda b: Agent(ScriptedModel([]), handoffs=b), "handoffs must be a list"),
    (lambda b: Agent(ScriptedModel([]), handoffs=[b, "x"]), "a handoff's target must be an Agent"),
    (lambda b: Agent(ScriptedModel([]), handoffs=[b, b]), "two handoffs have the tool name 'transfer_to_billing'"),
    (lambda b: Agent(ScriptedModel([]), handoffs=[b], tools=[_named("transfer_to_billing")]),
     "a tool is named 'transfer_to_billing', the name of a handoff tool"),
    (lambda b: handoff(b, tool_name="no spaces"), "tool_name must be 1-64 characters"),
    (lambda b: handoff(b, input_filter="x"), "input_filter must be a callable"),
    (lambda b: handoff(b, description=3), "description must be a str"),
    (lambda b: Agent(ScriptedModel([]), name=""), "name must be a non-empty str"),
])
def test_bad_handoffs_are_refused_when_the_agent_is_made(make, message):
    billing = Agent(ScriptedModel([]), name="billing")
    with pytest.raises(ConfigurationError, match=message):
        make(billing)


def _named(name: str):
    @tool(name=name)
    def fn() -> str:
        """A tool."""
        return ""

    return fn


def test_tool_choice_may_force_a_handoff():
    billing = Agent(ScriptedModel(["Billing here."]), name="billing")
    triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={})]), handoffs=[billing],
                   tool_choice="transfer_to_billing")
    assert triage.run("hi").text == "Billing here."
    assert triage.model.requests[0].tool_choice == "transfer_to_billing"


def test_a_handoff_back_to_an_agent_made_later_goes_back_and_forth_with_a_short_path(tmp_path):
    """``handoff(lambda: triage, tool_name=...)``: a target made after its source, so
    two agents can hand the conversation back and forth; the path in the log stays the
    one that first led to an agent."""
    billing = Agent(ScriptedModel([ToolCall(name="back_to_triage", input={}),
                                   ToolCall(name="back_to_triage", input={})]), name="billing",
                    handoffs=[handoff(lambda: triage, tool_name="back_to_triage")])
    triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={}),
                                  "Triage again.",
                                  ToolCall(name="transfer_to_billing", input={}),
                                  "Triage once more."]),
                   name="triage", handoffs=[billing])
    with triage.session("s1", FileEventStore(tmp_path)) as session:
        stream = session.ask_stream("hi")
        hops = [(e.source, e.target) for e in stream if e.type == "handoff"]
        assert hops == [("triage", "billing"), ("billing", "triage")]
        assert stream.result.text == "Triage again."
        assert session.ask("again").text == "Triage once more."
        paths = [[p[0] for p in e.data["path"]] for e in handoff_events(session.events)]
    assert paths == [["transfer_to_billing"], ["transfer_to_billing", "back_to_triage"],
                     ["transfer_to_billing"], ["transfer_to_billing", "back_to_triage"]]
    assert tool_names(billing.model.requests[0]) == ["back_to_triage"]


def test_a_handoff_to_a_function_needs_a_tool_name_and_must_get_an_agent():
    with pytest.raises(ConfigurationError, match="needs tool_name="):
        handoff(lambda: None)
    source = Agent(ScriptedModel([]), handoffs=[handoff(lambda: "not an agent", tool_name="transfer_to_x")])
    with pytest.raises(ConfigurationError, match="must return an Agent, not str"):
        source.run("hi")


def test_retention_never_archives_who_answers(tmp_path):
    """The handoff event is covered by a compaction and archived; the compaction carries
    it, so a session reopened after that still goes on with the target."""
    def summary(messages, *, reason, cancel):
        return "earlier: a refund was asked for"

    billing = Agent(FunctionModel(lambda request: f"billing answer {len(request.messages)}"), name="billing")
    triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={})]), name="triage",
                   handoffs=[billing], compactor=summary)
    with triage.session("s1", FileEventStore(tmp_path), retention=Retention(max_events=8, keep_last=2)) as session:
        for i in range(6):
            assert session.ask(f"question {i}").text.startswith("billing answer")
        active = session.events
        archived = [e for e in session.history() if e not in active]
    assert any(e.action == "handoff" and "carried_by" not in e.data for e in handoff_events(archived))
    carried = [e for e in handoff_events(active) if "carried_by" in e.data]
    assert carried and carried[-1].data["path"][0][0] == "transfer_to_billing"
    with triage.session("s1", FileEventStore(tmp_path)) as reopened:
        assert reopened.ask("still billing?").text.startswith("billing answer")
    assert len(triage.model.requests) == 1


def test_a_process_killed_between_the_handoff_event_and_its_result_hands_over_when_reopened(tmp_path):
    """The child dies (os._exit in an after_tool_call hook) after the handoff event is
    durable and before the call's result is: the call is uncertain. Reopened, the handoff
    tool's reconcile probe finds the event, the call gets its result, and the target
    answers; the source model is not asked again."""
    child = textwrap.dedent(f"""
        import os
        from agentkit import Agent, FileEventStore, Hooks, ScriptedModel, ToolCall

        def die(call, output, ctx):
            if call.tool_name == "transfer_to_billing":
                os._exit(9)

        billing = Agent(ScriptedModel(["never in the child"]), name="billing")
        triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={{}})]), name="triage",
                       handoffs=[billing], hooks=Hooks(after_tool_call=die))
        with triage.session("s1", FileEventStore({str(tmp_path)!r})) as session:
            session.ask("refund please")
    """)
    died = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert died.returncode == 9, died.stderr
    triage, billing = agents(["triage, wrongly"], ["Billing here."])
    with triage.session("s1", FileEventStore(tmp_path)) as session:
        (event,) = handoff_events(session.events)
        assert not any(isinstance(e, ToolResultEvent) for e in session.events)  # the result never came
        assert session.generate().text == "Billing here."
        assert session.uncertain_tool_executions() == []
        result = next(e for e in session.events if isinstance(e, ToolResultEvent))
    assert result.tool_call_id == event.data["tool_call_id"] and not result.output.is_error
    assert triage.model.requests == []


def test_a_process_killed_before_the_handoff_event_makes_the_handoff_when_reopened(tmp_path):
    """Killed while the handoff call ran but before its event (a before_tool_call hook):
    reopened, the probe finds no event, the call runs again as the same call and hands
    over."""
    child = textwrap.dedent(f"""
        import os
        from agentkit import Agent, FileEventStore, Hooks, ScriptedModel, ToolCall

        def die(call, ctx):
            if call.tool_name == "transfer_to_billing":
                os._exit(9)

        billing = Agent(ScriptedModel(["never in the child"]), name="billing")
        triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={{}})]), name="triage",
                       handoffs=[billing], hooks=Hooks(before_tool_call=die))
        with triage.session("s1", FileEventStore({str(tmp_path)!r})) as session:
            session.ask("refund please")
    """)
    died = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert died.returncode == 9, died.stderr
    triage, billing = agents(["triage, wrongly"], ["Billing here."])
    with triage.session("s1", FileEventStore(tmp_path)) as session:
        assert handoff_events(session.events) == []
        assert session.generate().text == "Billing here."
        (event,) = handoff_events(session.events)
    assert triage.model.requests == []


def test_a_target_tool_call_waiting_for_approval_is_settled_by_the_target_in_a_later_generation(tmp_path):
    billing = Agent(ScriptedModel([ToolCall(name="refund", input={"order": "9"}), "Refunded 9."]), name="billing",
                    tools=[refund], approval=ApprovalPolicy(mode="ask-writes"))
    triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={})]), name="triage",
                   tools=[lookup_order], handoffs=[billing])
    with triage.session("s1", FileEventStore(tmp_path)) as session:
        assert session.ask("refund 9").finish_reason == "approval-required"
        (request,) = session.pending_approvals()
        assert request.tool_name == "refund"
        session.approve(request.id)
    with triage.session("s1", FileEventStore(tmp_path)) as again:  # another Session object on the store
        result = again.generate()
    assert result.text == "Refunded 9."
    assert [r.output.as_text() for r in result.tool_calls] == ["refunded 9"]
    assert len(triage.model.requests) == 1 and len(billing.model.requests) == 2


@pytest.mark.parametrize("outcome, answers", [("accepted", "billing"), ("rejected", "triage")])
def test_a_handoff_in_a_transactional_generation_counts_once_accepted(tmp_path, outcome, answers):
    triage, billing = agents([ToolCall(name="transfer_to_billing", input={}), "Triage answers."],
                             ["Billing in the transaction.", "Billing answers."])
    with triage.session("s1", FileEventStore(tmp_path)) as session:
        txn = session.begin_generation("refund please")
        assert session.generate(transaction=txn).text == "Billing in the transaction."
        session.finalize_generation(txn, outcome)
        text = session.ask("next question").text
    assert text == {"billing": "Billing answers.", "triage": "Triage answers."}[answers]


def test_under_tool_search_the_handoff_tools_are_always_shown():
    many = [_named(f"tool_{i}") for i in range(5)]
    billing = Agent(ScriptedModel(["Billing here."]), name="billing")
    triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={})]), tools=many,
                   tool_search=ToolSearch(threshold=2), handoffs=[billing])
    assert triage.run("hi").text == "Billing here."
    assert tool_names(triage.model.requests[0]) == ["find_tools", "transfer_to_billing"]


def test_a_target_with_skills_loads_them_after_the_handoff(tmp_path):
    skill = tmp_path / "skills" / "refunds"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: refunds\ndescription: How refunds are done.\n---\n"
                                    "Refund within 30 days.\n")
    billing = Agent(ScriptedModel([ToolCall(name="load_skill", input={"name": "refunds"}), "Within 30 days."]),
                    name="billing", skills=load_skills(tmp_path / "skills"))
    triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={})]), handoffs=[billing])
    result = triage.run("refund?")
    assert result.text == "Within 30 days."
    assert "Refund within 30 days." in result.tool_calls[1].output.as_text()
    assert "refunds" in billing.model.requests[0].system  # the skills index is the target's
    assert tool_names(billing.model.requests[0]) == ["load_skill", "read_skill_file"]


def test_the_generations_output_type_holds_across_a_handoff():
    from pydantic import BaseModel

    class Refund(BaseModel):
        order: str
        amount: int

    billing = Agent(ScriptedModel([ToolCall(name="final_answer", input={"order": "A-1", "amount": 5})]),
                    name="billing")  # no output_type of its own: answers with the generation's
    triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={})]), name="triage",
                   handoffs=[billing], output_type=Refund)
    assert triage.run("refund A-1").output == Refund(order="A-1", amount=5)
    assert "final_answer" in tool_names(billing.model.requests[0])
    typed = Agent(ScriptedModel([]), name="typed", output_type=int)
    with pytest.raises(ConfigurationError, match="has output_type 'int', but the generation's is 'Refund'"):
        Agent(ScriptedModel([]), handoffs=[typed], output_type=Refund)
    with pytest.raises(ConfigurationError, match="has output_type 'int', but the generation's is None"):
        Agent(ScriptedModel([]), handoffs=[typed])
    plain = Agent(ScriptedModel(["never"]), handoffs=[handoff(lambda: typed, tool_name="transfer_to_typed")])
    with pytest.raises(ConfigurationError, match="has output_type 'int', but the generation's is None"):
        plain.run("hi")  # nor a target made later, before any model call
    assert typed.model.requests == [] and plain.model.requests == []


def test_the_callers_deps_callbacks_and_redaction_carry_over_to_the_target():
    @tool
    def whoami(ctx: ToolContext) -> str:
        """Who is asking."""
        return f"user {ctx.deps['user']}"

    billing = Agent(ScriptedModel([[ToolCall(name="whoami", input={}),
                                    ToolCall(name="refund", input={"order": "sk-secret123"})], "Done."]),
                    name="billing", tools=[whoami, refund])
    triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={})]), name="triage",
                   handoffs=[billing], redact=r"sk-\w+")
    tokens, finished = [], []
    with triage.session() as session:
        result = session.ask("refund", deps={"user": "ada"}, on_token=tokens.append,
                             on_tool_call_finish=lambda record: finished.append(record.tool_name))
        events = session.events
    assert result.text == "Done." and "".join(tokens) == "Done."
    assert finished == ["transfer_to_billing", "whoami", "refund"]
    assert result.tool_calls[1].output.as_text() == "user ada"
    (call,) = [p for e in events if isinstance(e, AssistantMessageEvent) for p in e.content
               if getattr(p, "tool_name", None) == "refund"]
    assert call.input == {"order": "[redacted]"}  # the source's redact=, the target setting none


def test_calls_of_the_handing_over_answer_that_wait_for_approval_are_settled_by_the_source_first(tmp_path):
    """The answer calls refund (waiting for approval) and the handoff (allowed): the next
    generation settles refund with the source's tool and gate, then the target answers."""
    ran = []

    @tool
    def cancel_order(order: str) -> str:
        """Cancel an order (the source's tool only)."""
        ran.append(order)
        return f"cancelled {order}"

    billing = Agent(ScriptedModel(["Billing: the cancellation went through."]), name="billing", tools=[refund])
    triage = Agent(ScriptedModel([[ToolCall(name="cancel_order", input={"order": "5"}),
                                   ToolCall(name="transfer_to_billing", input={})], "never called"]),
                   name="triage", tools=[cancel_order], handoffs=[billing], approval=ApprovalPolicy(mode="ask-writes"))
    with triage.session("s1", FileEventStore(tmp_path)) as session:
        assert session.ask("cancel 5 and talk to billing").finish_reason == "approval-required"
        (request,) = session.pending_approvals()
        assert request.tool_name == "cancel_order"
        session.approve(request.id)
        stream = session.stream()
        kinds = [e.type for e in stream]
        result = stream.result
    assert ran == ["5"]  # the source's tool ran, not "unknown tool"
    assert result.tool_calls[0].output.as_text() == "cancelled 5"
    assert result.text == "Billing: the cancellation went through."
    assert "handoff" in kinds and len(triage.model.requests) == 1
    assert tool_names(billing.model.requests[0]) == ["refund"]


def test_the_stream_announces_the_targets_approvals_once():
    billing = Agent(ScriptedModel([ToolCall(name="refund", input={"order": "3"}), "Refunded."]), name="billing",
                    tools=[refund], approval=ApprovalPolicy(mode="ask-writes"))
    triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={})]), name="triage",
                   handoffs=[billing], approver=lambda request: True)
    stream = triage.stream("refund 3")
    kinds = [e.to_dict() for e in stream]
    assert stream.result.text == "Refunded."
    asked = [k for k in kinds if k["type"] == "approval-requested"]
    decided = [k for k in kinds if k["type"] == "approval-decided"]
    assert len(asked) == 1 and len(decided) == 1
    types = [k["type"] for k in kinds]
    assert types.index("handoff") < types.index("approval-requested")


_HANDING_CHILD = """
import sys
from agentkit import Agent, FileEventStore, ScriptedModel, ToolCall
kind, where, schema = sys.argv[1:4]
if kind == "file":
    store = FileEventStore(where)
else:
    from agentkit.stores.postgres import PostgresEventStore
    store = PostgresEventStore(where, schema=schema)
billing = Agent(ScriptedModel(["Billing, from the other process."]), name="billing")
triage = Agent(ScriptedModel([ToolCall(name="transfer_to_billing", input={})]), name="triage", handoffs=[billing])
with triage.session("shared", store) as session:
    print(session.ask("refund please").text)
"""


@pytest.mark.parametrize("kind", ["file", "postgres"])
def test_a_session_held_open_in_this_process_answers_with_the_target_another_process_handed_to(
        kind, tmp_path, request):
    """Two OS processes on one store: this one opened the session first and holds it (stale);
    the other hands the conversation over. This process's next ask reads the handoff (its
    log is current before the turn) and answers with the target: the source model here is
    never called, and the other process's handoff call is not made again."""
    if kind == "file":
        store, where, schema = FileEventStore(tmp_path), str(tmp_path), ""
    else:
        from agentkit.stores.postgres import PostgresEventStore

        cluster = request.getfixturevalue("pg_cluster")
        schema = cluster.fresh_schema()
        store, where = PostgresEventStore(cluster.conninfo, schema=schema), cluster.conninfo
        store.migrate()
    billing = Agent(ScriptedModel(["Billing, here."]), name="billing")
    triage = Agent(ScriptedModel(["triage, wrongly"]), name="triage", handoffs=[billing])
    try:
        with triage.session("shared", store) as stale:
            assert stale.events == ()
            out = subprocess.run([sys.executable, "-c", _HANDING_CHILD, kind, where, schema], capture_output=True,
                                 text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
            assert out.returncode == 0, out.stderr
            assert out.stdout.strip() == "Billing, from the other process."
            assert stale.ask("and my other order?").text == "Billing, here."
            assert triage.model.requests == []  # the source is not asked again, here either
            handoffs = [e for e in stale.events if isinstance(e, ControlEvent) and e.action == "handoff"]
            calls = [e for e in stale.events if isinstance(e, ToolResultEvent)]
            assert len(handoffs) == 1 and len(calls) == 1  # made once, by the other process
    finally:
        if kind == "postgres":
            store.close()
