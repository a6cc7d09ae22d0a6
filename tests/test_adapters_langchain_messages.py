"""LangChain message histories <-> agentkit messages and events, with real LangChain
message objects."""

from __future__ import annotations

import base64

import pytest
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from agentkit import ConfigurationError, ScriptedModel, Session, ToolCall, Usage, run_agent
from agentkit.adapters.langchain import events_from_langchain, messages_from_langchain, messages_to_langchain
from agentkit.events import AssistantMessageEvent, ToolResultEvent, UserMessageEvent
from agentkit.messages import (
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolOutput,
    ToolResultPart,
)

PNG = b"\x89PNG\r\n\x1a\n-not-really-an-image"
PNG_B64 = base64.b64encode(PNG).decode()
PDF = b"%PDF-1.4 tiny"


def _agentkit_history() -> list[Message]:
    return [
        Message.system("You are terse."),
        Message.user("What is in these?"),
        Message(
            role="user",
            content=(
                TextPart(text="Look:"),
                ImagePart(data=PNG, media_type="image/png"),
                ImagePart(url="https://example.test/cat.jpg", media_type="image/jpeg"),
                FilePart(data=PDF, media_type="application/pdf", filename="report.pdf"),
                FilePart(url="https://example.test/clip.wav", media_type="audio/wav"),
            ),
        ),
        Message(
            role="assistant",
            content=(
                ReasoningPart(text="The user wants a description.", signature="sig-abc"),
                TextPart(text="Checking."),
                ToolCallPart(tool_call_id="c1", tool_name="describe", input={"what": "image"}),
                ToolCallPart(tool_call_id="c2", tool_name="stats", input={"file": "report.pdf"}),
                ToolCallPart(tool_call_id="c3", tool_name="describe", input='{"what": ', input_error="truncated JSON"),
            ),
        ),
        Message(
            role="tool",
            content=(
                ToolResultPart(tool_call_id="c1", tool_name="describe", output=ToolOutput.text("a cat")),
                ToolResultPart(
                    tool_call_id="c2",
                    tool_name="stats",
                    output=ToolOutput(kind="json", value={"pages": 1, "ok": True},
                                      metadata={"artifact": {"raw": [1, 2]}, "return_direct": True}),
                ),
                ToolResultPart(tool_call_id="c3", tool_name="describe", output=ToolOutput.error("bad arguments")),
            ),
        ),
        Message(role="assistant", content=(ToolCallPart(tool_call_id="c4", tool_name="render", input={}),)),
        Message(
            role="tool",
            content=(
                ToolResultPart(
                    tool_call_id="c4",
                    tool_name="render",
                    output=ToolOutput(kind="content", value=(TextPart(text="chart:"), ImagePart(data=PNG))),
                ),
            ),
        ),
        Message(role="assistant", content=(ToolCallPart(tool_call_id="c5", tool_name="render", input={}),)),
        Message(
            role="tool",
            content=(
                ToolResultPart(
                    tool_call_id="c5", tool_name="render",
                    output=ToolOutput(kind="error-json", value={"code": 7}),
                ),
            ),
        ),
        Message(role="assistant", content=(ReasoningPart(redacted_data="opaque"), ReasoningPart(text="unsigned"),
                                           TextPart(text="A cat and a one-page report."))),
    ]


def test_agentkit_to_langchain_to_agentkit_is_equal():
    history = _agentkit_history()
    lc = messages_to_langchain(history)
    assert [type(m).__name__ for m in lc] == [
        "SystemMessage", "HumanMessage", "HumanMessage", "AIMessage", "ToolMessage", "ToolMessage",
        "ToolMessage", "AIMessage", "ToolMessage", "AIMessage", "ToolMessage", "AIMessage",
    ]
    assert messages_from_langchain(lc) == history


def test_agentkit_to_langchain_uses_langchain_shapes():
    lc = messages_to_langchain(_agentkit_history())
    assert lc[1] == HumanMessage("What is in these?")
    assert lc[2].content[1] == {"type": "image", "base64": PNG_B64, "mime_type": "image/png"}
    assert lc[2].content[3]["extras"] == {"filename": "report.pdf"}
    assert lc[2].content[4] == {"type": "audio", "url": "https://example.test/clip.wav", "mime_type": "audio/wav"}
    ai = lc[3]
    assert [tc["id"] for tc in ai.tool_calls] == ["c1", "c2"]
    assert ai.tool_calls[0]["args"] == {"what": "image"}
    assert ai.invalid_tool_calls[0]["args"] == '{"what": ' and ai.invalid_tool_calls[0]["error"] == "truncated JSON"
    # signed reasoning in Anthropic's own form, which ChatAnthropic sends back as its API requires
    assert ai.content[0] == {"type": "thinking", "thinking": "The user wants a description.",
                             "signature": "sig-abc"}
    text, stats, error = lc[4], lc[5], lc[6]
    assert (text.content, text.status, text.name) == ("a cat", "success", "describe")
    assert stats.content == '{"pages": 1, "ok": true}' and stats.artifact == {"raw": [1, 2]}
    assert (error.content, error.status) == ("bad arguments", "error")
    assert lc[8].content == [{"type": "text", "text": "chart:"},
                             {"type": "image", "base64": PNG_B64, "mime_type": "image/png"}]
    assert lc[-1].content == [{"type": "redacted_thinking", "data": "opaque"},
                              {"type": "reasoning", "reasoning": "unsigned"},
                              {"type": "text", "text": "A cat and a one-page report."}]
    # LangChain itself reads our blocks as standard content blocks
    assert [b["type"] for b in lc[2].content_blocks] == ["text", "image", "image", "file", "audio"]


def _langchain_history() -> list:
    return [
        SystemMessage("Be brief."),
        HumanMessage("Weather in Paris and Oslo?"),
        AIMessage(
            "",
            tool_calls=[
                {"name": "weather", "args": {"city": "Paris"}, "id": "call_a", "type": "tool_call"},
                {"name": "weather", "args": {"city": "Oslo"}, "id": "call_b", "type": "tool_call"},
            ],
        ),
        ToolMessage("18C", tool_call_id="call_a", name="weather"),
        ToolMessage("service down", tool_call_id="call_b", name="weather", status="error",
                    artifact={"http": 503}),
        AIMessage("Paris is 18C; Oslo is unknown.", invalid_tool_calls=[
            {"name": "weather", "args": "{city: Oslo}", "id": "call_c", "error": "not JSON",
             "type": "invalid_tool_call"}]),
        ToolMessage("retry later", tool_call_id="call_c", name="weather", status="error"),
        HumanMessage(content=[{"type": "text", "text": "And this?"},
                              {"type": "image", "base64": PNG_B64, "mime_type": "image/png"}]),
        AIMessage("A sketch."),
    ]


def test_langchain_to_agentkit_to_langchain_is_equal():
    history = _langchain_history()
    messages = messages_from_langchain(history)
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "user",
                                          "assistant"]
    assert messages[3].content[1].output == ToolOutput(kind="error-text", value="service down",
                                                       metadata={"artifact": {"http": 503}})
    bad = messages[4].tool_calls[0]
    assert (bad.tool_call_id, bad.input, bad.input_error) == ("call_c", "{city: Oslo}", "not JSON")
    assert messages_to_langchain(messages) == history


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
         ImagePart(url=f"data:image/png;base64,{PNG_B64}", media_type="image/png")),
        ({"type": "image_url", "image_url": "https://example.test/a.gif"},
         ImagePart(url="https://example.test/a.gif")),
        ({"type": "image", "source_type": "base64", "data": PNG_B64, "mime_type": "image/webp"},
         ImagePart(data=PNG, media_type="image/webp")),
        ({"type": "image", "source_type": "url", "url": "https://example.test/b.png"},
         ImagePart(url="https://example.test/b.png")),
        ({"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG_B64}},
         ImagePart(data=PNG, media_type="image/jpeg")),
        ({"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                         "data": base64.b64encode(PDF).decode()}},
         FilePart(data=PDF, media_type="application/pdf")),
        ({"type": "file", "file": {"filename": "r.pdf",
                                   "file_data": "data:application/pdf;base64," + base64.b64encode(PDF).decode()}},
         FilePart(data=PDF, media_type="application/pdf", filename="r.pdf")),
        ({"type": "file", "base64": base64.b64encode(PDF).decode(), "mime_type": "application/pdf",
          "filename": "x.pdf"},
         FilePart(data=PDF, media_type="application/pdf", filename="x.pdf")),
        ({"type": "text-plain", "text": "notes", "mime_type": "text/plain"},
         FilePart(data=b"notes", media_type="text/plain")),
        ({"type": "input_audio", "input_audio": {"data": base64.b64encode(b"RIFF").decode(), "format": "mp3"}},
         FilePart(data=b"RIFF", media_type="audio/mp3")),
        ("plain string block", TextPart(text="plain string block")),
    ],
    ids=["openai-data-url", "openai-url", "v0-base64", "v0-url", "anthropic-image", "anthropic-document",
         "openai-file", "v1-file", "text-plain", "openai-audio", "str"],
)
def test_multimodal_block_formats(block, expected):
    (msg,) = messages_from_langchain([HumanMessage(content=[block])])
    assert msg.content == (expected,)


def test_anthropic_thinking_blocks_become_reasoning():
    ai = AIMessage(content=[
        {"type": "thinking", "thinking": "hmm", "signature": "s1"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "Answer."},
        {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
    ], tool_calls=[{"name": "f", "args": {}, "id": "t1"}])
    (msg,) = messages_from_langchain([HumanMessage("q"), ai])[1:]
    assert msg.content == (
        ReasoningPart(text="hmm", signature="s1"),
        ReasoningPart(redacted_data="opaque"),
        TextPart(text="Answer."),
        ToolCallPart(tool_call_id="t1", tool_name="f", input={}),
    )


def test_tool_message_without_name_takes_the_name_of_its_call():
    history = [
        AIMessage("", tool_calls=[{"name": "clock", "args": {}, "id": "k1"}]),
        ToolMessage("noon", tool_call_id="k1"),
    ]
    assert messages_from_langchain(history)[1].content[0].tool_name == "clock"
    with pytest.raises(ConfigurationError, match="'zz' answers no tool call"):
        messages_from_langchain([ToolMessage("noon", tool_call_id="zz")])


def test_chat_message_roles():
    msgs = messages_from_langchain(
        [ChatMessage(role="developer", content="rules"), ChatMessage(role="user", content="hi"),
         ChatMessage(role="assistant", content="hello")]
    )
    assert msgs == [Message.system("rules"), Message.user("hi"), Message.assistant("hello")]
    with pytest.raises(ConfigurationError, match="ChatMessage role 'critic'"):
        messages_from_langchain([ChatMessage(role="critic", content="meh")])


@pytest.mark.parametrize(
    ("message", "match"),
    [
        (FunctionMessage(content="x", name="f"), "cannot express a FunctionMessage"),
        (HumanMessage(content=[{"type": "image", "file_id": "file-123"}]), "provider file id"),
        (HumanMessage(content=[{"type": "non_standard", "value": {}}]), "'non_standard' content block"),
        (HumanMessage(content=[{"type": "image", "base64": "@@not base64@@", "mime_type": "image/png"}]),
         "not valid base64"),
        (SystemMessage(content=[{"type": "image", "url": "https://example.test/x.png"}]), "text only"),
    ],
    ids=["function-message", "file-id", "non-standard", "bad-base64", "system-image"],
)
def test_what_agentkit_cannot_express_is_a_clear_error(message, match):
    with pytest.raises(ConfigurationError, match=match) as info:
        messages_from_langchain([message])
    assert "message 0" in str(info.value)


def test_message_likes_and_wrong_input():
    assert messages_from_langchain([("user", "hi"), {"role": "assistant", "content": "yo"}]) == [
        Message.user("hi"), Message.assistant("yo")
    ]
    with pytest.raises(ConfigurationError, match="not an agentkit Message"):
        messages_to_langchain([HumanMessage("hi")])
    with pytest.raises(ConfigurationError, match="could not read"):
        messages_from_langchain([object()])


def test_events_from_langchain_keeps_usage_finish_model_and_ids():
    history = [
        SystemMessage("Be brief."),
        HumanMessage("2+2?", id="h1"),
        AIMessage(
            "",
            id="a1",
            tool_calls=[{"name": "add", "args": {"a": 2, "b": 2}, "id": "call_1"}],
            usage_metadata={"input_tokens": 30, "output_tokens": 5, "total_tokens": 35,
                            "input_token_details": {"cache_read": 20, "cache_creation": 4}},
            response_metadata={"finish_reason": "tool_calls", "model_name": "gpt-test"},
        ),
        ToolMessage("4", tool_call_id="call_1", id="t1"),
        AIMessage("4", id="a2", response_metadata={"stop_reason": "end_turn"}),
        SystemMessage("Answer in words."),
    ]
    history_out = events_from_langchain(history)
    assert history_out.system == "Be brief.\n\nAnswer in words."
    user, call, result, answer = history_out.events
    assert isinstance(user, UserMessageEvent) and user.id == "h1"
    assert isinstance(call, AssistantMessageEvent) and call.id == "a1"
    assert call.usage == Usage(input_tokens=30, output_tokens=5, total_tokens=35, cache_read_tokens=20,
                               cache_write_tokens=4)
    assert (call.finish_reason, call.model) == ("tool-calls", "gpt-test")
    assert isinstance(result, ToolResultEvent) and (result.id, result.tool_name) == ("t1", "add")
    assert answer.finish_reason == "stop" and answer.usage is None
    with pytest.raises(ConfigurationError, match="id 'h1'"):
        events_from_langchain([HumanMessage("a", id="h1"), HumanMessage("b", id="h1")])


def test_a_langchain_history_continues_in_an_agentkit_session():
    history = events_from_langchain(_langchain_history())
    model = ScriptedModel([ToolCall("weather", {"city": "Oslo"}), "Oslo is 9C."])

    def weather(city: str) -> str:
        """Weather for a city."""
        return "9C"

    with Session(model, system=history.system, events=history.events, tools=[weather]) as session:
        session.push_user_message("Try Oslo again.")
        result = session.generate()
    first = model.requests[0]
    assert first.system == "Be brief."
    assert list(first.messages[:-1]) == messages_from_langchain(_langchain_history())[1:]
    assert result.text == "Oslo is 9C."
    back = messages_to_langchain(result.messages)
    assert back[:8] == _langchain_history()[1:]
    assert back[-3].tool_calls[0]["args"] == {"city": "Oslo"}
    assert back[-2] == ToolMessage("9C", tool_call_id=back[-3].tool_calls[0]["id"], name="weather")
    assert back[-1] == AIMessage("Oslo is 9C.")


def test_run_agent_takes_a_converted_history_with_its_system_message():
    model = ScriptedModel(["Still brief."])
    run_agent(model, "and now?", messages=messages_from_langchain(_langchain_history()))
    assert model.requests[0].system == "Be brief."
    assert model.requests[0].messages[-1] == Message.user("and now?")
