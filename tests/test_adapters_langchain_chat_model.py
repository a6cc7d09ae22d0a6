"""LangChain chat models as agentkit ChatModels, driven by real LangChain chat model
classes (LangChain's own fake models, and a small BaseChatModel subclass that scripts
streamed chunks the way provider integrations stream them)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from _tools import add
from langchain_core import exceptions as lc_errors
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field

from agentkit import (
    AuthenticationError,
    CancelledError,
    CancelToken,
    ConfigurationError,
    ContextOverflowError,
    ModelError,
    ProviderUnavailableError,
    RateLimitError,
    Session,
    Usage,
    run_agent,
)
from agentkit.adapters.langchain import LangChainChatModel
from agentkit.messages import Message, ReasoningPart, TextPart
from agentkit.models import (
    FinishEvent,
    ModelRequest,
    ModelSettings,
    ReasoningDelta,
    ReasoningDone,
    TextDelta,
    ToolCallEvent,
    ToolSpec,
    UsageEvent,
)


class ChunkScriptModel(BaseChatModel):
    """Streams scripted AIMessageChunks; records what it was sent. Its ``bind_tools``
    binds the tools as call keyword arguments, as LangChain integrations do."""

    replies: list[Any]
    received: list[tuple[list[BaseMessage], dict[str, Any]]] = Field(default_factory=list)
    error: Any = None

    @property
    def _llm_type(self) -> str:
        return "chunk-script"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=tools, **kwargs)

    def _stream(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        self.received.append((list(messages), {**kwargs, "stop": stop}))
        if self.error is not None:
            raise self.error
        reply = self.replies.pop(0)
        for chunk in reply:
            yield ChatGenerationChunk(message=chunk)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        chunks = list(self._stream(messages, stop, run_manager, **kwargs))
        total = chunks[0].message
        for c in chunks[1:]:
            total = total + c.message
        return ChatResult(generations=[ChatGeneration(message=AIMessage(**total.model_dump(exclude={"type"})))])


def _request(**kwargs: Any) -> ModelRequest:
    kwargs.setdefault("messages", (Message.user("hi"),))
    return ModelRequest(**kwargs)


def test_full_run_agent_loop_with_streamed_tool_call_chunks():
    model = ChunkScriptModel(
        replies=[
            [
                AIMessageChunk(content="Let me "),
                AIMessageChunk(content="add."),
                AIMessageChunk(content="", tool_call_chunks=[
                    {"name": "add", "args": '{"a": 2,', "id": "call_1", "index": 0}]),
                AIMessageChunk(content="", tool_call_chunks=[
                    {"name": None, "args": ' "b": 3}', "id": None, "index": 0}]),
                AIMessageChunk(content="", tool_call_chunks=[
                    {"name": "add", "args": '{"a": 10, "b": 1}', "id": "call_2", "index": 1}]),
                AIMessageChunk(content="", usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
                               response_metadata={"finish_reason": "tool_calls"}),
            ],
            [
                AIMessageChunk(content="2+3=5 "),
                AIMessageChunk(content="and 10+1=11", usage_metadata={"input_tokens": 30, "output_tokens": 6,
                                                                      "total_tokens": 36},
                               response_metadata={"finish_reason": "stop"}),
            ],
        ]
    )
    tokens: list[str] = []
    result = run_agent(LangChainChatModel(model), "add things", system="Use tools.", tools=[add],
                       on_token=tokens.append)
    assert result.text == "2+3=5 and 10+1=11"
    assert "".join(tokens) == "Let me add.2+3=5 and 10+1=11"
    assert [(c.tool_call_id, c.input, c.output.value) for c in result.tool_calls] == [
        ("call_1", {"a": 2, "b": 3}, 5), ("call_2", {"a": 10, "b": 1}, 11)]
    assert result.usage == Usage(input_tokens=42, output_tokens=13, total_tokens=55)
    assert [s.finish_reason for s in result.steps] == ["tool-calls", "stop"]

    first_messages, first_kwargs = model.received[0]
    assert first_messages == [SystemMessage("Use tools."), HumanMessage("add things")]
    assert first_kwargs["tools"] == [{"type": "function", "function": {
        "name": "add", "description": "Add two integers.", "parameters": dict(add.input_schema)}}]
    second_messages, _ = model.received[1]
    assert second_messages[2] == AIMessage(
        "Let me add.",
        tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "call_1"},
                    {"name": "add", "args": {"a": 10, "b": 1}, "id": "call_2"}],
    )
    # a JSON result reaches LangChain as text; response_metadata records it was JSON
    json_kind = {"agentkit": {"kind": "json"}}
    assert second_messages[3:] == [
        ToolMessage("5", tool_call_id="call_1", name="add", response_metadata=json_kind),
        ToolMessage("11", tool_call_id="call_2", name="add", response_metadata=json_kind),
    ]


def test_generic_fake_chat_model_streams_text_and_openai_style_tool_calls():
    class ToolCallingFake(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self.bind(tools=tools, **kwargs)

    fake = ToolCallingFake(messages=iter([
        AIMessage("", additional_kwargs={"tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "add", "arguments": '{"a": 4, "b": 4}'}}]}),
        "The sum is eight",
    ]))
    deltas: list[str] = []
    result = run_agent(LangChainChatModel(fake), "4+4?", tools=[add], on_token=deltas.append)
    assert result.tool_calls[0].output.value == 8
    assert result.text == "The sum is eight"
    assert deltas == ["The", " ", "sum", " ", "is", " ", "eight"]  # streamed, not one blob


def test_model_without_streaming_yields_one_message_with_calls_and_usage():
    class ListModel(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self.bind(tools=tools, **kwargs)

    fake = ListModel(responses=[
        AIMessage(
            "thinking aloud",
            tool_calls=[{"name": "add", "args": {"a": 1, "b": 1}, "id": "c1"}],
            invalid_tool_calls=[{"name": "add", "args": "{oops", "id": "c2", "error": "unparsable"}],
            usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
        ),
        AIMessage("done"),
    ])
    result = run_agent(LangChainChatModel(fake), "go", tools=[add])
    ok, bad = result.tool_calls
    assert ok.output.value == 2
    assert bad.is_error and "unparsable" in bad.error and bad.input == "{oops"
    assert result.steps[0].usage == Usage(input_tokens=3, output_tokens=4, total_tokens=7)
    assert result.text == "done"


def test_stream_events_for_malformed_args_reasoning_and_finish():
    model = ChunkScriptModel(replies=[[
        AIMessageChunk(content=[{"type": "thinking", "thinking": "Let me ", "index": 0}]),
        AIMessageChunk(content=[{"type": "thinking", "thinking": "think.", "index": 0}]),
        AIMessageChunk(content=[{"type": "thinking", "signature": "sig-1", "index": 0}]),
        AIMessageChunk(content=[{"type": "text", "text": "Answer", "index": 1}]),
        AIMessageChunk(content="", tool_call_chunks=[{"name": "add", "args": '{"a": 1, "b"', "id": "x", "index": 2}]),
        AIMessageChunk(content="", tool_call_chunks=[{"name": "add", "args": "[1, 2]", "id": "y", "index": 3}]),
        AIMessageChunk(content="", usage_metadata={"input_tokens": 5, "output_tokens": 2, "total_tokens": 7,
                                                   "input_token_details": {"cache_read": 3}},
                       response_metadata={"stop_reason": "max_tokens"}),
    ]])
    events = list(LangChainChatModel(model).stream(_request(tools=(add.spec,))))
    assert events[:4] == [ReasoningDelta("Let me "), ReasoningDelta("think."),
                          ReasoningDone(ReasoningPart(text="", signature="sig-1")), TextDelta("Answer")]
    assert events[4] == UsageEvent(Usage(input_tokens=5, output_tokens=2, total_tokens=7, cache_read_tokens=3))
    broken, not_object = events[5], events[6]
    assert isinstance(broken, ToolCallEvent) and broken.input == '{"a": 1, "b"'
    assert "not valid JSON" in broken.input_error
    assert not_object.input == "[1, 2]" and "JSON object" in not_object.input_error
    assert events[7] == FinishEvent("length", "max_tokens")


def test_parallel_calls_sharing_an_index_are_told_apart_by_id_as_langchain_merges_them():
    # some OpenAI-compatible servers number every parallel call 0 and give each its id
    chunks = [
        AIMessageChunk(content="", tool_call_chunks=[{"name": "add", "args": '{"a": 1,', "id": "c1", "index": 0}]),
        AIMessageChunk(content="", tool_call_chunks=[{"name": None, "args": ' "b": 2}', "id": None, "index": 0}]),
        AIMessageChunk(content="", tool_call_chunks=[{"name": "add", "args": '{"a": 3, "b": 4}', "id": "c2",
                                                      "index": 0}]),
    ]
    model = ChunkScriptModel(replies=[chunks])
    events = list(LangChainChatModel(model).stream(_request(tools=(add.spec,))))
    calls = [(e.tool_call_id, e.tool_name, e.input) for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [("c1", "add", {"a": 1, "b": 2}), ("c2", "add", {"a": 3, "b": 4})]
    # recent langchain-core merges the chunks into the same two calls (1.0 glued them into one)
    merged = chunks[0] + chunks[1] + chunks[2]
    if len(merged.tool_calls) == 2:
        assert calls == [(tc["id"], tc["name"], tc["args"]) for tc in merged.tool_calls]
    assert events[-1] == FinishEvent("tool-calls", None)


def test_reasoning_with_signature_is_kept_in_the_assistant_message():
    model = ChunkScriptModel(replies=[[
        AIMessageChunk(content=[{"type": "thinking", "thinking": "hmm", "index": 0}]),
        AIMessageChunk(content=[{"type": "thinking", "signature": "sig-9", "index": 0}]),
        AIMessageChunk(content=[{"type": "text", "text": "ok", "index": 1}]),
    ]])
    result = run_agent(LangChainChatModel(model), "q")
    assert result.messages[-1].content == (ReasoningPart(text="hmm", signature="sig-9"), TextPart(text="ok"))


def test_signed_thinking_goes_back_to_the_model_before_its_tool_call():
    # ChatAnthropic with extended thinking streams like this, and its API refuses a tool-use
    # turn sent back without the signed thinking block that came before the call
    model = ChunkScriptModel(replies=[
        [
            AIMessageChunk(content=[{"type": "thinking", "thinking": "need add", "index": 0}]),
            AIMessageChunk(content=[{"type": "thinking", "signature": "sig-7", "index": 0}]),
            AIMessageChunk(content=[{"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}, "index": 1}],
                           tool_call_chunks=[{"name": "add", "args": "", "id": "toolu_1", "index": 1}]),
            AIMessageChunk(content="", tool_call_chunks=[{"name": None, "args": '{"a": 1, "b": 2}', "id": None,
                                                          "index": 1}],
                           response_metadata={"stop_reason": "tool_use"}),
        ],
        [AIMessageChunk(content="3")],
    ])
    result = run_agent(LangChainChatModel(model), "1+2?", tools=[add])
    assert result.text == "3"
    replayed = model.received[1][0][1]
    assert replayed.content == [{"type": "thinking", "thinking": "need add", "signature": "sig-7"}]
    assert replayed.tool_calls == [{"name": "add", "args": {"a": 1, "b": 2}, "id": "toolu_1", "type": "tool_call"}]


def test_settings_tool_choice_and_provider_options_reach_the_model():
    model = ChunkScriptModel(replies=[[AIMessageChunk(content="ok")]] * 3)
    wrapped = LangChainChatModel(model)
    list(wrapped.stream(_request(
        tools=(add.spec,), tool_choice="required",
        settings=ModelSettings(temperature=0.2, max_tokens=50, stop=("END",)),
        provider_options={"logprobs": True},
    )))
    kwargs = model.received[-1][1]
    assert kwargs["tool_choice"] == "any"
    assert (kwargs["temperature"], kwargs["max_tokens"], kwargs["stop"], kwargs["logprobs"]) == (0.2, 50, ["END"], True)
    list(wrapped.stream(_request(tools=(add.spec,), tool_choice="add")))
    assert model.received[-1][1]["tool_choice"] == "add"
    list(wrapped.stream(_request()))
    assert "tools" not in model.received[-1][1] and "temperature" not in model.received[-1][1]


def test_tool_choice_none_offers_no_tools():
    # bind_tools has no common "none" (ChatAnthropic would read it as a tool named "none")
    model = ChunkScriptModel(replies=[[AIMessageChunk(content="no tools")]])
    events = list(LangChainChatModel(model).stream(_request(tools=(add.spec,), tool_choice="none")))
    assert events[0] == TextDelta("no tools")
    assert "tools" not in model.received[-1][1] and "tool_choice" not in model.received[-1][1]
    without_bind_tools = GenericFakeChatModel(messages=iter(["fine"]))
    events = list(LangChainChatModel(without_bind_tools).stream(_request(tools=(add.spec,), tool_choice="none")))
    assert events[0] == TextDelta("fine")


@pytest.mark.parametrize("setting", [{"reasoning_budget": 2048}, {"reasoning_effort": "high"}])
def test_reasoning_settings_are_refused_before_the_call(setting):
    model = ChunkScriptModel(replies=[[AIMessageChunk(content="ok")]])
    (name,) = setting
    with pytest.raises(ConfigurationError, match=f"{name}.*ChunkScriptModel itself"):
        LangChainChatModel(model).stream(_request(settings=ModelSettings(**setting)))
    assert model.received == []


def test_model_without_bind_tools_is_a_clear_error_before_the_call():
    fake = GenericFakeChatModel(messages=iter(["never"]))
    wrapped = LangChainChatModel(fake)
    with pytest.raises(ConfigurationError, match="does not implement bind_tools"):
        wrapped.stream(_request(tools=(ToolSpec(name="t", description="", input_schema={"type": "object"}),)))
    assert [e for e in wrapped.stream(_request()) if isinstance(e, TextDelta)] == [TextDelta("never")]
    with pytest.raises(ConfigurationError, match="BaseChatModel"):
        LangChainChatModel(object())  # type: ignore[arg-type]

    class Picky(ChunkScriptModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            raise ValueError("tool_choice 'add' names no bound tool")

    picky = Picky(replies=[[AIMessageChunk(content="never")]])
    with pytest.raises(ConfigurationError, match=r"Picky.bind_tools refused the tools \(add\) with tool_choice='add'"):
        LangChainChatModel(picky).stream(_request(tools=(add.spec,), tool_choice="add"))
    assert picky.received == []


class _StatusError(Exception):
    """Like an SDK error an integration lets through (openai.APIStatusError...)."""

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


# langchain-core's typed model errors are newer than the langchain-core>=1.0 the extra
# allows; with an older core, errors are told apart by their status code alone
_TYPED = [
    (name, args, expected)
    for name, args, expected in [
        ("ContextOverflowError", ("prompt too long",), ContextOverflowError),
        ("ModelRateLimitError", ("slow down",), RateLimitError),
        ("ModelAuthenticationError", ("bad key",), AuthenticationError),
        ("ModelAPIError", ("upstream 503",), ProviderUnavailableError),
    ]
    if hasattr(lc_errors, name)
]


@pytest.mark.parametrize(
    ("error", "expected"),
    [(getattr(lc_errors, name)(*args), expected) for name, args, expected in _TYPED]
    + [
        (_StatusError("Rate limit reached", 429), RateLimitError),
        (_StatusError("Incorrect API key", 401), AuthenticationError),
        (_StatusError("Bad gateway", 502), ProviderUnavailableError),
        (_StatusError("This model's maximum context length is 8192 tokens", 400), ContextOverflowError),
        (RuntimeError("driver bug"), ModelError),
    ],
    ids=[name for name, _, _ in _TYPED] + ["status-429", "status-401", "status-502", "overflow-text", "other"],
)
def test_langchain_errors_become_agentkit_errors(error, expected):
    model = ChunkScriptModel(replies=[], error=error)
    with pytest.raises(expected) as info:
        list(LangChainChatModel(model).stream(_request()))
    assert "ChunkScriptModel failed" in str(info.value) and info.value.__cause__ is error


def test_cancel_stops_the_stream():
    cancel = CancelToken()
    release = threading.Event()

    class Slow(ChunkScriptModel):
        def _stream(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            yield ChatGenerationChunk(message=AIMessageChunk(content="first "))
            release.wait(5)
            yield ChatGenerationChunk(message=AIMessageChunk(content="second"))

    stream = LangChainChatModel(Slow(replies=[])).stream(_request(cancel=cancel))
    assert next(stream) == TextDelta("first ")
    cancel.cancel("user pressed stop")
    release.set()
    with pytest.raises(CancelledError, match="user pressed stop"):
        next(stream)


def test_model_name_is_recorded_on_assistant_events():
    model = ChunkScriptModel(replies=[[AIMessageChunk(content="hi")]])
    wrapped = LangChainChatModel(model, model_name="my-model")
    with Session(wrapped) as session:
        session.push_user_message("hello")
        session.generate()
        assert session.events[-1].model == "my-model"
    assert LangChainChatModel(ChunkScriptModel(replies=[])).model_name == "chunk-script"
