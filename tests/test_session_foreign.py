"""LangChain objects accepted as they are at the front door (run_agent, Session): chat
models as model=, histories as messages=, tools and toolkits in tools= (issue 10 item 11).
Real langchain_core (and langchain_community) objects throughout."""

from __future__ import annotations

import warnings

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ChatMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseToolkit
from langchain_core.tools import tool as lc_tool

from agentkit import (
    ConfigurationError,
    FunctionModel,
    ScriptedModel,
    Session,
    ToolCall,
    ToolDefinitionError,
    run_agent,
)
from agentkit.tools import ToolRegistry


@lc_tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def test_a_langchain_chat_model_is_accepted_as_model():
    model = GenericFakeChatModel(messages=iter([AIMessage(content="hello from LangChain")]))
    result = run_agent(model, "hi")
    assert result.text == "hello from LangChain"


def test_a_session_takes_a_langchain_chat_model_and_one_per_generate():
    first = GenericFakeChatModel(messages=iter([AIMessage(content="one")]))
    second = GenericFakeChatModel(messages=iter([AIMessage(content="two")]))
    with Session(first) as session:
        session.push_user_message("a")
        assert session.generate().text == "one"
        session.push_user_message("b")
        assert session.generate(model=second).text == "two"


def test_a_langchain_history_is_accepted_as_messages():
    seen = []

    def reply(request):
        seen.append(request)
        return "ok"

    history = [
        SystemMessage(content="You are terse."),
        HumanMessage(content="What is 2+2?"),
        AIMessage(content="4"),
    ]
    result = run_agent(FunctionModel(reply), "And 3+3?", messages=history)
    assert result.text == "ok"
    [request] = seen
    assert request.system == "You are terse."
    assert [(m.role, m.text) for m in request.messages] == [
        ("user", "What is 2+2?"), ("assistant", "4"), ("user", "And 3+3?"),
    ]


def test_a_langchain_toolkit_goes_into_tools_as_it_is(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community's sunset notice
        from langchain_community.agent_toolkits import FileManagementToolkit
    toolkit = FileManagementToolkit(root_dir=str(tmp_path), selected_tools=["write_file", "read_file"])
    model = ScriptedModel([
        ToolCall(name="write_file", input={"file_path": "note.txt", "text": "from the toolkit"}),
        ToolCall(name="shout", input={"text": "done"}),
        "finished",
    ])
    result = run_agent(model, "write it", tools=[toolkit, shout])
    assert result.text == "finished"
    assert (tmp_path / "note.txt").read_text() == "from the toolkit"
    assert [r.output.as_text() for r in result.tool_calls][1] == "DONE"
    # a toolkit alone, not in a list
    with Session(ScriptedModel(["x"]), tools=toolkit) as session:
        assert session.model_messages() == []


class _Twins(BaseToolkit):
    def get_tools(self):
        return [shout, shout]


def test_a_failed_conversion_names_the_adapter():
    with pytest.raises(ToolDefinitionError, match="from_langchain_tools") as info:
        run_agent(ScriptedModel(["x"]), "go", tools=[_Twins()])
    assert "_Twins" in str(info.value) and "shout" in str(info.value)
    odd = [HumanMessage(content="hi"), ChatMessage(role="critic", content="meh")]
    with pytest.raises(ConfigurationError, match="messages_from_langchain") as info:
        run_agent(ScriptedModel(["x"]), "go", messages=odd)
    assert "critic" in str(info.value)


def test_bad_front_door_arguments_say_what_is_accepted():
    with pytest.raises(ConfigurationError, match="LangChain chat model"):
        Session(object())
    with pytest.raises(ToolDefinitionError, match="list of tools"):
        Session(ScriptedModel(["x"]), tools="shout")
    with pytest.raises(ConfigurationError, match="LangChain messages"):
        run_agent(ScriptedModel(["x"]), "go", messages=[{"role": "user"}])


def test_the_tool_port_itself_does_not_convert_foreign_tools():
    """Conversion happens at the front door; the registry (a port-level type) refuses a
    LangChain tool and says where it is converted."""
    with pytest.raises(ToolDefinitionError, match="from_langchain_tool"):
        ToolRegistry([shout])
