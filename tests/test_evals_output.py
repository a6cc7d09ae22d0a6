"""AgentOutput and a session's first turn as recorded (agentkit/evals/_output.py). Needs no
pydantic-evals."""

from __future__ import annotations

from agentkit import Agent, ScriptedModel, ToolCall, tool
from agentkit.evals import AgentOutput
from agentkit.evals._output import first_turn
from agentkit.events import AssistantMessageEvent, RuntimeEvent, UserMessageEvent
from agentkit.messages import TextPart, ToolCallPart


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"{order}: shipped"


def test_the_first_turn_is_what_the_run_of_the_first_prompt_returned():
    agent = Agent(ScriptedModel([ToolCall("lookup", {"order": "A1"}), "A1 has shipped.", "bye"]), tools=[lookup])
    with agent.session() as session:
        result = session.ask("Where is A1?")
        session.ask("thanks")
        prompt, recorded = first_turn(session.events)
    assert prompt == "Where is A1?"
    run = AgentOutput.from_result(result)
    assert recorded.text == run.text == "A1 has shipped."
    assert [(c.tool_call_id, c.tool_name, c.input, c.output) for c in recorded.tool_calls] == [
        (c.tool_call_id, c.tool_name, c.input, c.output) for c in run.tool_calls]
    assert recorded.usage == run.usage
    assert [(s.index, s.text, s.usage, s.finish_reason) for s in recorded.steps] == [
        (s.index, s.text, s.usage, s.finish_reason) for s in run.steps]


def test_no_user_message_is_none_and_a_call_without_a_result_says_so():
    assert first_turn([RuntimeEvent(runtime_type="note")]) is None
    call = ToolCallPart(tool_call_id="c1", tool_name="lookup", input={"order": "A1"})
    prompt, recorded = first_turn([UserMessageEvent(content=(TextPart(text="hi"),)),
                                   AssistantMessageEvent(content=(call,), finish_reason="tool-calls")])
    assert prompt == "hi" and recorded.text == ""
    assert recorded.tool_calls[0].output.is_error
    assert recorded.tool_calls[0].output.as_text() == "no result was recorded for this call"
    _, unanswered = first_turn([UserMessageEvent(content=(TextPart(text="hi"),))])
    assert unanswered == AgentOutput(finish_reason="other")
