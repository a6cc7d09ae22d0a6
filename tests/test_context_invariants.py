"""Histories from outside are checked against the providers' structural rules."""

from __future__ import annotations

import pytest

from agentkit import ConfigurationError, ScriptedModel, Session, run_agent
from agentkit.context import check_events, check_messages
from agentkit.events import AssistantMessageEvent, ToolResultEvent, UserMessageEvent
from agentkit.messages import Message, TextPart, ToolCallPart, ToolOutput, ToolResultPart

CALL = ToolCallPart(tool_call_id="c1", tool_name="add", input={"a": 1})
RESULT = ToolResultPart(tool_call_id="c1", tool_name="add", output=ToolOutput.text("2"))
USER = Message.user("hi")
ASKS = Message(role="assistant", content=(CALL,))
ANSWERS = Message(role="tool", content=(RESULT,))


@pytest.mark.parametrize(
    ("history", "index", "rule"),
    [
        ([Message.assistant("hello")], 0, "first message must be a user message"),
        ([Message(role="tool", content=(RESULT,))], 0, "first message must be a user message"),
        ([USER, ANSWERS], 1, "does not follow an assistant message with tool calls"),
        ([USER, ASKS, Message(role="tool", content=(RESULT, RESULT))], 2, "more than one result"),
        ([USER, ASKS, Message(role="tool", content=(
            ToolResultPart(tool_call_id="zz", tool_name="add", output=ToolOutput.text("2")),))],
         2, "answers no tool call"),
        ([USER, ASKS, ANSWERS, ANSWERS], 3, "does not follow an assistant message"),
        ([USER, Message(role="assistant", content=(CALL, CALL))], 1, "ids of one assistant message must be unique"),
        ([USER, Message.system("be nice")], 1, "system message cannot be part of the history"),
    ],
)
def test_a_broken_history_is_refused_naming_the_index_and_the_rule(history, index, rule):
    model = ScriptedModel(["never"])
    with pytest.raises(ConfigurationError, match=rf"messages\[{index}\] breaks a conversation rule: .*{rule}"):
        check_messages(history)
    if history[-1].role != "system":
        with pytest.raises(ConfigurationError, match=rule):
            run_agent(model, "next", messages=history)
    assert model.requests == []


def test_valid_histories_pass_and_orphaned_calls_are_still_repaired():
    check_messages([USER, ASKS, ANSWERS, Message.assistant("2")])
    # calls without results (an interrupted run) are closed as interrupted, as before
    result = run_agent(ScriptedModel(["ok"]), "next", messages=[USER, ASKS])
    assert result.messages[2].role == "tool" and result.messages[2].content[0].output.is_error


def test_an_empty_assistant_event_is_refused():
    with pytest.raises(ConfigurationError, match=r"events\[1\].*must not be empty"):
        check_events([UserMessageEvent(content=(TextPart(text="hi"),)), AssistantMessageEvent(content=())])


def test_seed_events_are_checked_but_a_user_message_between_call_and_result_is_allowed():
    user = UserMessageEvent(content=(TextPart(text="hi"),))
    asks = AssistantMessageEvent(content=(CALL,))
    result = ToolResultEvent(tool_call_id="c1", tool_name="add", output=ToolOutput.text("2"))
    check_events([user, asks, UserMessageEvent(content=(TextPart(text="meanwhile"),)), result])
    with pytest.raises(ConfigurationError, match=r"events\[0\].*first message must be a user message"):
        Session(ScriptedModel([]), events=[asks, result])


def test_a_broken_on_context_overflow_replacement_is_refused():
    from agentkit import ContextOverflowError, FunctionModel

    calls = [0]

    def reply(request):
        calls[0] += 1
        raise ContextOverflowError("too long")

    with pytest.raises(ConfigurationError, match=r"on_context_overflow result\[0\].*first message"):
        run_agent(FunctionModel(reply), "hi", on_context_overflow=lambda msgs, cancel: [Message.assistant("x")])
    assert calls[0] == 1
