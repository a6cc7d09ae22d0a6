"""OpenAIChatModel over the real openai SDK against a loopback Chat Completions server.

The fake server enforces the Chat Completions request rules (tool messages answer the
calls before them, stream_options only on streamed requests), so every test also checks
that the adapter sends a request the real API would accept.
"""

from __future__ import annotations

import base64
import json

import pytest
from _tools import ADD_SPEC as ADD
from _tools import add
from fakes import openai_wire as w
from fakes.server import FakeServer, Reply

from agentkit import (
    AuthenticationError,
    ConfigurationError,
    ContextOverflowError,
    ProviderError,
    ProviderUnavailableError,
    Session,
    run_agent,
)
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
from agentkit.models import (
    FinishEvent,
    ModelRequest,
    ModelSettings,
    ReasoningDelta,
    ReasoningDone,
    RetryPolicy,
    TextDelta,
    ToolCallEvent,
    UsageEvent,
)
from agentkit.models.openai import OpenAIChatModel

FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.01)


@pytest.fixture
def server(openai_server):
    return openai_server


def model(server: FakeServer, **kw) -> OpenAIChatModel:
    kw.setdefault("retry", FAST)
    return OpenAIChatModel("gpt-4.1-mini", base_url=server.url + "/v1", **kw)


def req(*messages: Message, **kw) -> ModelRequest:
    return ModelRequest(messages=messages or (Message.user("hi"),), **kw)


def test_streams_text_deltas_usage_and_finish(server):
    server.add(w.text_stream("Hel", "lo", "!", usage_=w.usage(prompt=30, completion=5, cached=20)))
    events = list(model(server, cache=True).stream(req(system="be brief", session_id="sess-1")))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo", "!"]
    usage = [e.usage for e in events if isinstance(e, UsageEvent)]
    assert len(usage) == 1
    assert (usage[0].input_tokens, usage[0].output_tokens, usage[0].total_tokens) == (30, 5, 35)
    assert usage[0].cache_read_tokens == 20
    assert events[-1] == FinishEvent("stop", "stop")
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert sent.body["prompt_cache_key"] == "sess-1"


def test_prompt_cache_key_off_when_caching_is_off(server):
    server.add(w.text_stream("a"), w.text_stream("b"))
    list(model(server, cache=True).stream(req(session_id="s", cache=False)))
    list(model(server, cache=False).stream(req(session_id="s")))
    assert all("prompt_cache_key" not in b for b in server.bodies)


def test_openai_gets_the_session_id_as_prompt_cache_key_by_default(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")  # stands in for api.openai.com
    server.add(w.text_stream("a"))
    list(OpenAIChatModel("gpt-4.1-mini", api_key="sk-test", retry=FAST).stream(req(session_id="sess-9")))
    assert server.bodies[0]["prompt_cache_key"] == "sess-9"


def test_quirk_strict_compatible_server_gets_no_prompt_cache_key_by_default(server):
    # Groq, Cerebras and NVIDIA answer 400 "property 'prompt_cache_key' is unsupported"
    server.check = w.reject_unknown_fields
    server.add(w.text_stream("fine"), w.text_stream("never"))
    with Session(model(server), session_id="sess-1") as session:
        session.push_user_message("hi")
        assert session.generate().text == "fine"
    assert "prompt_cache_key" not in server.bodies[0]
    with pytest.raises(ProviderError, match="'prompt_cache_key' is unsupported"):
        list(model(server, cache=True).stream(req(session_id="s")))


def test_parallel_tool_call_fragments_are_assembled(server):
    server.add(
        w.tool_stream(
            [
                ("call_a", "add", ['{"a"', ": 1, ", '"b": 2}']),
                ("call_b", "add", ['{"a": 5', ', "b": 6}']),
            ]
        )
    )
    events = list(model(server).stream(req(tools=(ADD,))))
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [
        ToolCallEvent(tool_call_id="call_a", tool_name="add", input={"a": 1, "b": 2}),
        ToolCallEvent(tool_call_id="call_b", tool_name="add", input={"a": 5, "b": 6}),
    ]
    assert events[-1].reason == "tool-calls"
    body = server.bodies[0]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add two integers.",
                "parameters": dict(ADD.input_schema),
            },
        }
    ]
    assert body["tool_choice"] == "auto"


def test_quirk_repeated_id_and_name_in_every_chunk_are_not_concatenated(server):
    server.add(w.tool_stream([("call_r", "add", ['{"a": 1,', ' "b": 2}'])], repeat_id_and_name=True))
    calls = [e for e in model(server).stream(req(tools=(ADD,))) if isinstance(e, ToolCallEvent)]
    assert calls == [ToolCallEvent(tool_call_id="call_r", tool_name="add", input={"a": 1, "b": 2})]


def test_malformed_tool_arguments_become_an_input_error(server):
    server.add(w.tool_stream([("call_x", "add", ['{"a": 1,', ' "b": '])]))
    (call,) = [e for e in model(server).stream(req(tools=(ADD,))) if isinstance(e, ToolCallEvent)]
    assert call.input == '{"a": 1, "b": '
    assert call.input_error is not None and "not valid JSON" in call.input_error


def test_tool_arguments_that_are_not_plain_json_become_an_input_error_with_the_raw_text(server):
    deep = '{"a": ' + "[" * 1000 + "]" * 1000 + ', "b": 2}'
    server.add(w.tool_stream([("c1", "add", [deep]), ("c2", "add", ['{"a": NaN, "b": 2}'])]))
    first, second = [e for e in model(server).stream(req(tools=(ADD,))) if isinstance(e, ToolCallEvent)]
    assert first.input == deep and "not plain JSON: $.a[0][0]" in first.input_error
    assert "nested deeper than 500 levels" in first.input_error
    assert second.input == '{"a": NaN, "b": 2}'
    assert second.input_error == "the arguments are not valid JSON (NaN is not JSON)"


def test_non_object_tool_arguments_become_an_input_error(server):
    server.add(w.tool_stream([("call_y", "add", ["[1, 2]"])]))
    (call,) = [e for e in model(server).stream(req(tools=(ADD,))) if isinstance(e, ToolCallEvent)]
    assert call.input == "[1, 2]" and "JSON object" in call.input_error


def test_quirk_server_that_cannot_stream_uses_plain_completions(server):
    server.add(
        w.completion(
            "Sum is 3",
            tool_calls=[("call_1", "add", {"a": 1, "b": 2})],
            usage_=w.usage(prompt=40, completion=9),
            reasoning="adding",
        )
    )
    events = list(model(server, stream=False).stream(req(tools=(ADD,))))
    assert "stream" not in server.bodies[0] and "stream_options" not in server.bodies[0]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Sum is 3"]
    assert ReasoningDelta("adding") in events
    assert [e for e in events if isinstance(e, ToolCallEvent)][0].input == {"a": 1, "b": 2}
    (usage,) = [e.usage for e in events if isinstance(e, UsageEvent)]
    assert (usage.input_tokens, usage.output_tokens) == (40, 9)
    assert events[-1].reason == "tool-calls"


def test_quirk_empty_stream_is_a_clear_error_not_an_empty_answer(server):
    server.add(w.sse([], done=False), w.sse([], done=True))
    m = model(server, retry=RetryPolicy(max_retries=1, initial_delay=0.001))
    with pytest.raises(ProviderUnavailableError, match="stream ended without any chunk"):
        list(m.stream(req()))
    assert len(server.requests) == 2  # retried once: nothing had been yielded


def test_stream_that_stops_before_a_finish_reason_is_an_error(server):
    server.add(w.sse([w.chunk({"content": "half an ans"})], done=False))
    events = []
    with pytest.raises(ProviderUnavailableError, match="finish_reason"):
        for ev in model(server).stream(req()):
            events.append(ev)
    assert events == [TextDelta("half an ans")]
    assert len(server.requests) == 1  # a stream that already yielded is never retried


def test_quirk_assistant_tool_call_message_content_is_an_empty_string(server):
    server.check = lambda rec: w.reject_null_content(rec) or w.validate(rec)
    server.add(w.text_stream("done"))
    history = (
        Message.user("add 1 and 2"),
        Message(
            role="assistant",
            content=(ToolCallPart(tool_call_id="c1", tool_name="add", input={"a": 1, "b": 2}),),
        ),
        Message(
            role="tool",
            content=(
                ToolResultPart(tool_call_id="c1", tool_name="add", output=ToolOutput(kind="json", value=3)),
            ),
        ),
    )
    events = list(model(server).stream(req(*history, tools=(ADD,))))
    assert events[-1].reason == "stop"
    msgs = server.bodies[0]["messages"]
    assert msgs[1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}
        ],
    }
    assert msgs[2] == {"role": "tool", "tool_call_id": "c1", "content": "3"}


def test_reasoning_deltas_from_compatible_servers(server):
    server.add(
        w.text_stream("42", reasoning=["think ", "hard"]),
        w.text_stream("ok", reasoning=["via ollama"], reasoning_field="reasoning"),
    )
    events = list(model(server).stream(req()))
    assert events[:3] == [
        ReasoningDelta("think "),
        ReasoningDelta("hard"),
        ReasoningDone(ReasoningPart(text="think hard")),
    ]
    assert events[3] == TextDelta("42")
    assert ReasoningDelta("via ollama") in list(model(server).stream(req()))


@pytest.mark.parametrize(
    ("raw", "reason"),
    [("length", "length"), ("content_filter", "content-filter"), ("weird", "other"), ("stop", "stop")],
)
def test_finish_reasons_are_mapped(server, raw, reason):
    server.add(w.text_stream("x", finish=raw))
    assert list(model(server).stream(req()))[-1] == FinishEvent(reason, raw)


def test_message_conversion_images_files_reasoning_and_tool_results(server):
    png = b"\x89PNG\r\n\x1a\nfake"
    pdf = b"%PDF-1.4 fake"
    server.add(w.text_stream("seen"))
    history = (
        Message.user(
            [
                "look",
                ImagePart(data=png, media_type="image/png"),
                ImagePart.from_base64(base64.b64encode(b"jpg").decode(), media_type="image/jpeg"),
                ImagePart(url="https://example.com/cat.png"),
                FilePart(data=pdf, media_type="application/pdf", filename="a.pdf"),
                FilePart(data=b"col1,col2", media_type="text/csv", filename="t.csv"),
            ]
        ),
        Message(
            role="assistant",
            content=(
                ReasoningPart(text="private thoughts"),
                TextPart(text="calling"),
                ToolCallPart(tool_call_id="c1", tool_name="add", input={"a": 1}),
                ToolCallPart(tool_call_id="c2", tool_name="add", input="{oops", input_error="bad json"),
            ),
        ),
        Message(
            role="tool",
            content=(
                ToolResultPart(tool_call_id="c1", tool_name="add", output=ToolOutput.error("boom")),
                ToolResultPart(
                    tool_call_id="c2",
                    tool_name="add",
                    output=ToolOutput(kind="content", value=(TextPart(text="chart"), ImagePart(data=png))),
                ),
            ),
        ),
    )
    list(model(server).stream(req(*history)))
    msgs = server.bodies[0]["messages"]
    user = msgs[0]["content"]
    assert user[0] == {"type": "text", "text": "look"}
    assert user[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(png).decode()
    assert user[2]["image_url"]["url"] == "data:image/jpeg;base64," + base64.b64encode(b"jpg").decode()
    assert user[3] == {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    assert user[4] == {
        "type": "file",
        "file": {
            "file_data": "data:application/pdf;base64," + base64.b64encode(pdf).decode(),
            "filename": "a.pdf",
        },
    }
    assert user[5]["type"] == "text" and "col1,col2" in user[5]["text"]
    assistant = msgs[1]
    assert assistant["content"] == "calling"  # reasoning is not sent back to Chat Completions
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == ['{"a": 1}', "{}"]
    assert msgs[2] == {"role": "tool", "tool_call_id": "c1", "content": "Error: boom"}
    assert msgs[3] == {"role": "tool", "tool_call_id": "c2", "content": "chart"}
    # tool messages carry text only: the image follows as a user message
    assert msgs[4]["role"] == "user"
    assert msgs[4]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_file_by_url_is_rejected_before_any_request(server):
    m = model(server)
    with pytest.raises(ConfigurationError, match="download it"):
        m.stream(req(Message.user([FilePart(url="https://example.com/a.pdf", media_type="application/pdf")])))
    assert server.requests == []


def test_unknown_tool_choice_is_rejected_before_any_request(server):
    with pytest.raises(ConfigurationError, match="nor the name of one of the tools"):
        model(server).stream(req(tools=(ADD,), tool_choice="mul"))
    assert server.requests == []


def test_settings_tool_choice_and_provider_options(server):
    server.add(w.text_stream("a"), w.text_stream("b"))
    settings = ModelSettings(temperature=0.2, top_p=0.9, max_tokens=64, stop=("END",), seed=7)
    list(
        model(server).stream(
            req(
                tools=(ADD,),
                tool_choice="add",
                settings=settings,
                session_id="s1",
                provider_options={"prompt_cache_key": "mine", "top_k": 5, "parallel_tool_calls": False},
            )
        )
    )
    body = server.bodies[0]
    assert body["temperature"] == 0.2 and body["top_p"] == 0.9 and body["seed"] == 7
    assert body["stop"] == ["END"]
    assert body["max_tokens"] == 64  # an OpenAI-compatible server (base_url) gets max_tokens
    assert body["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert body["prompt_cache_key"] == "mine"  # the caller's option wins
    assert body["top_k"] == 5  # not an SDK parameter: sent through extra_body
    assert body["parallel_tool_calls"] is False
    list(model(server, max_tokens_param="max_completion_tokens").stream(req(settings=settings)))
    assert server.bodies[1]["max_completion_tokens"] == 64 and "max_tokens" not in server.bodies[1]


def test_authentication_error_is_not_retried_and_keeps_the_message(server):
    server.add(w.error(401, "Incorrect API key provided: sk-bad", code="invalid_api_key"))
    with pytest.raises(AuthenticationError, match="Incorrect API key provided") as info:
        list(model(server).stream(req()))
    assert info.value.status_code == 401 and info.value.provider == "openai"
    assert len(server.requests) == 1


def test_invalid_request_is_not_retried(server):
    server.add(w.error(400, "Invalid value for 'temperature'"))
    with pytest.raises(ProviderError, match="Invalid value for 'temperature'") as info:
        list(model(server).stream(req()))
    assert type(info.value) is ProviderError and info.value.status_code == 400
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "reply",
    [
        w.error(400, "This model's maximum context length is 128000 tokens.", code="context_length_exceeded"),
        w.error(
            400,
            "the request exceeds the available context size, try increasing it",
            type_="exceed_context_size_error",
        ),
    ],
)
def test_context_window_errors_become_context_overflow(server, reply):
    server.add(reply)
    with pytest.raises(ContextOverflowError):
        list(model(server).stream(req()))
    assert len(server.requests) == 1


def test_in_stream_error_before_any_event_is_retried(server):
    server.add(
        Reply(events=[(None, {"error": {"message": "The server had an error", "type": "server_error"}})]),
        w.text_stream("recovered"),
    )
    events = list(model(server).stream(req()))
    assert TextDelta("recovered") in events
    assert len(server.requests) == 2


def test_missing_api_key_for_openai_is_a_configuration_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4.1-mini")


def test_api_key_is_sent_as_bearer_token(server):
    server.add(w.text_stream("a"))
    list(OpenAIChatModel("m", base_url=server.url + "/v1", api_key="sk-test-123").stream(req()))
    assert server.requests[0].headers["authorization"] == "Bearer sk-test-123"


def test_run_agent_loop_with_parallel_tools(server):
    server.add(
        w.tool_stream([("call_1", "add", ['{"a": 2, "b": 3}']), ("call_2", "add", ['{"a": 10, "b": 1}'])]),
        w.tool_stream([("call_3", "add", ['{"a": 1,'])]),  # malformed: the model reads an error
        w.text_stream("The sums are 5 and 11."),
    )
    tokens: list[str] = []
    result = run_agent(model(server), "add things", tools=[add], on_token=tokens.append)
    assert result.text == "The sums are 5 and 11."
    assert "".join(tokens) == "The sums are 5 and 11."
    assert [r.output.value for r in result.tool_calls[:2]] == [5, 11]
    assert result.tool_calls[2].output.is_error
    assert result.usage.input_tokens == 33  # three calls of 11 prompt tokens each
    second = server.bodies[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    assert [m["content"] for m in second[2:]] == ["5", "11"]
    third = server.bodies[2]["messages"]
    assert third[-1]["role"] == "tool" and "could not be parsed" in third[-1]["content"]


def test_session_accepts_a_spec_string(server):
    server.add(w.text_stream("hello from spec"))
    with Session(f"openai-compatible:local-model@{server.url}/v1", system="sys") as session:
        session.push_user_message("hi")
        result = session.generate()
    assert result.text == "hello from spec"
    assert server.bodies[0]["model"] == "local-model"
    assert json.dumps(server.bodies[0]["messages"][0]) == json.dumps({"role": "system", "content": "sys"})


def test_refusal_is_shown_as_text(server):
    server.add(
        w.sse([w.chunk({"role": "assistant", "refusal": "I can't help with that."}), w.chunk({}, "stop")])
    )
    events = list(model(server).stream(req()))
    assert events[0] == TextDelta("I can't help with that.")
    assert events[-1] == FinishEvent("stop", "stop")


def test_deltas_are_forwarded_as_they_arrive(server):
    import threading

    gate = threading.Event()
    reply = w.sse(
        [
            w.chunk({"role": "assistant", "content": "first "}),
            w.chunk({"content": "second"}),
            w.chunk({}, "stop"),
        ]
    )
    reply.events = [reply.events[0], (None, gate), *reply.events[1:]]
    server.add(reply)
    result = run_agent(model(server), "hi", on_token=lambda t: gate.set() if t == "first " else None)
    assert result.text == "first second"
    # the server held back the rest until the first token had reached on_token
    assert reply.gates_passed == [True]


def test_system_role_can_be_developer(server):
    server.add(w.text_stream("ok"))
    list(
        model(server, system_role="developer").stream(
            req(Message.system("more"), Message.user("hi"), system="base")
        )
    )
    assert [m["role"] for m in server.bodies[0]["messages"]] == ["developer", "developer", "user"]
    with pytest.raises(ConfigurationError, match="system_role"):
        model(server, system_role="boss")


def test_per_run_stream_option_decides_whether_usage_is_requested(server):
    server.add(w.completion("plain"), w.text_stream("streamed", usage_=w.usage(prompt=3, completion=2)))
    events = list(model(server).stream(req(provider_options={"stream": False})))
    assert events[0] == TextDelta("plain")
    assert server.bodies[0].get("stream") is False and "stream_options" not in server.bodies[0]
    events = list(model(server, stream=False).stream(req(provider_options={"stream": True})))
    assert server.bodies[1]["stream_options"] == {"include_usage": True}
    assert [e.usage.input_tokens for e in events if isinstance(e, UsageEvent)] == [3]


def test_context_length_exceeded_reaches_the_loops_overflow_handling(server):
    server.add(
        w.error(400, "This model's maximum context length is 128000 tokens.", code="context_length_exceeded"),
        w.text_stream("short enough now"),
    )
    history = [Message.user("old question"), Message.assistant("old answer")]
    result = run_agent(
        model(server), "new question", messages=history, on_context_overflow=lambda msgs, cancel: msgs[-1:]
    )
    assert result.text == "short enough now"
    assert [len(b["messages"]) for b in server.bodies] == [3, 1]


def test_quirk_non_streaming_server_runs_the_whole_tool_loop(server):
    server.add(
        w.completion(tool_calls=[("call_1", "add", {"a": 1, "b": 2})], usage_=w.usage(prompt=20, completion=5)),
        w.completion("1 + 2 = 3", usage_=w.usage(prompt=30, completion=6)),
    )
    tokens: list[str] = []
    result = run_agent(model(server, stream=False), "add 1 and 2", tools=[add], on_token=tokens.append)
    assert result.text == "1 + 2 = 3" and tokens == ["1 + 2 = 3"]
    assert [r.output.value for r in result.tool_calls] == [3]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (50, 11)
    assert all("stream" not in b for b in server.bodies)
