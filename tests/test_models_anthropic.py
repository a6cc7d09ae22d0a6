"""AnthropicModel over the real anthropic SDK against a loopback Messages API server.

The fake server enforces the Messages API request rules (alternating roles, tool results
first in the next user turn, signed thinking blocks, at most four cache breakpoints), so
every test also checks that the adapter sends a request the real API would accept.
"""

from __future__ import annotations

import base64

import pytest
from _tools import ADD_SPEC as ADD
from _tools import add
from fakes import anthropic_wire as w
from fakes.server import FakeServer

from agentkit import (
    AuthenticationError,
    ConfigurationError,
    ContextOverflowError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    Session,
    run_agent,
    tool,
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
from agentkit.models.anthropic import AnthropicModel

FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.01)


@pytest.fixture
def server(anthropic_server):
    return anthropic_server


def model(server: FakeServer, **kw) -> AnthropicModel:
    kw.setdefault("retry", FAST)
    return AnthropicModel("claude-fake-1", base_url=server.url, api_key="sk-ant-test", **kw)


def req(*messages: Message, **kw) -> ModelRequest:
    return ModelRequest(messages=messages or (Message.user("hi"),), **kw)


def cache_marks(body: dict) -> list[str]:
    """Where the request placed cache_control breakpoints."""
    marks = [f"system[{i}]" for i, b in enumerate(body.get("system") or []) if "cache_control" in b]
    marks += [f"tools[{i}]" for i, t in enumerate(body.get("tools") or []) if "cache_control" in t]
    for i, m in enumerate(body["messages"]):
        marks += [f"messages[{i}][{j}]" for j, b in enumerate(m["content"]) if "cache_control" in b]
    return marks


def test_streams_text_usage_and_finish(server):
    server.add(
        w.stream(
            w.text("Hello world", pieces=3), input_tokens=10, output_tokens=4, cache_read=100, cache_write=50
        )
    )
    events = list(model(server).stream(req(system="be nice")))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello world"
    assert len([e for e in events if isinstance(e, TextDelta)]) == 3
    (usage,) = [e.usage for e in events if isinstance(e, UsageEvent)]
    assert usage.input_tokens == 160  # uncached + cache read + cache write
    assert (usage.output_tokens, usage.total_tokens) == (4, 164)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (100, 50)
    assert events[-1] == FinishEvent("stop", "end_turn")
    sent = server.requests[0]
    assert sent.path == "/v1/messages"
    # the key travels as x-api-key (older SDKs) or a bearer token (newer ones)
    assert "sk-ant-test" in (sent.headers.get("x-api-key", ""), sent.headers.get("authorization", "")[7:])
    assert sent.body["max_tokens"] == 4096 and sent.body["stream"] is True
    assert sent.body["system"][0]["text"] == "be nice"


def test_parallel_tool_uses_and_malformed_input(server):
    server.add(
        w.stream(
            w.text("Let me add."),
            w.tool_use("toolu_1", "add", ['{"a": 1', ', "b": 2}']),
            w.tool_use("toolu_2", "add", ['{"a": ']),
        )
    )
    events = list(model(server).stream(req(tools=(ADD,))))
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert calls[0] == ToolCallEvent(tool_call_id="toolu_1", tool_name="add", input={"a": 1, "b": 2})
    assert calls[1].input == '{"a": ' and "not valid JSON" in calls[1].input_error
    assert events[-1] == FinishEvent("tool-calls", "tool_use")
    body = server.bodies[0]
    assert body["tools"][0]["name"] == "add" and body["tools"][0]["input_schema"] == dict(ADD.input_schema)
    assert body["tool_choice"] == {"type": "auto"}


@pytest.mark.parametrize(
    ("choice", "sent"),
    [("required", {"type": "any"}), ("none", {"type": "none"}), ("add", {"type": "tool", "name": "add"})],
)
def test_tool_choice_mapping(server, choice, sent):
    server.add(w.stream(w.text("ok")))
    list(model(server).stream(req(tools=(ADD,), tool_choice=choice)))
    assert server.bodies[0]["tool_choice"] == sent


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("max_tokens", "length"),
        ("refusal", "content-filter"),
        ("stop_sequence", "stop"),
        ("pause_turn", "other"),
    ],
)
def test_finish_reasons_are_mapped(server, raw, reason):
    server.add(w.stream(w.text("x"), stop_reason=raw))
    assert list(model(server).stream(req()))[-1] == FinishEvent(reason, raw)


def test_extended_thinking_streams_reasoning_with_signature_and_redacted_blocks(server):
    server.add(w.stream(w.thinking("Let me think.", "sig-abc"), w.redacted("ENCRYPTED=="), w.text("42")))
    settings = ModelSettings(reasoning_budget=2048)
    events = list(model(server).stream(req(settings=settings)))
    assert events[:4] == [
        ReasoningDelta("Let me "),
        ReasoningDelta("think."),
        ReasoningDone(ReasoningPart(text="Let me think.", signature="sig-abc")),
        ReasoningDone(ReasoningPart(text="", redacted_data="ENCRYPTED==")),
    ]
    body = server.bodies[0]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] > 2048


def test_thinking_budget_is_validated_before_any_request(server):
    with pytest.raises(ConfigurationError, match="at least 1024"):
        model(server).stream(req(settings=ModelSettings(reasoning_budget=100)))
    with pytest.raises(ConfigurationError, match="greater than reasoning_budget"):
        model(server).stream(req(settings=ModelSettings(reasoning_budget=2048, max_tokens=1000)))
    assert server.requests == []


def test_run_agent_sends_thinking_blocks_back_unchanged(server):
    server.add(
        w.stream(
            w.thinking("I should add.", "sig-1"),
            w.redacted("REDACTED-DATA"),
            w.tool_use("toolu_a", "add", ['{"a": 2, "b": 3}']),
            w.tool_use("toolu_b", "add", ['{"a": 1}']),  # missing b: the tool answers with an error
        ),
        w.stream(w.thinking("Now answer.", "sig-2"), w.text("2 + 3 = 5")),
    )
    reasoning: list[str] = []
    result = run_agent(
        model(server),
        "what is 2 + 3?",
        tools=[add],
        settings=ModelSettings(reasoning_budget=1024),
        on_reasoning=reasoning.append,
    )
    assert result.text == "2 + 3 = 5"
    assert "".join(reasoning) == "I should add.Now answer."
    second = server.bodies[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assistant = second[1]["content"]
    assert assistant[0] == {"type": "thinking", "thinking": "I should add.", "signature": "sig-1"}
    assert assistant[1] == {"type": "redacted_thinking", "data": "REDACTED-DATA"}
    assert assistant[2] == {"type": "tool_use", "id": "toolu_a", "name": "add", "input": {"a": 2, "b": 3}}
    results = second[2]["content"]
    assert results[0]["type"] == "tool_result" and results[0]["tool_use_id"] == "toolu_a"
    assert results[0]["content"] == "5" and "is_error" not in results[0]
    assert results[1]["tool_use_id"] == "toolu_b" and results[1]["is_error"] is True


def test_runtime_event_after_tool_results_joins_the_same_user_turn(server):
    holder: dict[str, Session] = {}

    @tool
    def start_job() -> str:
        """Start a background job."""
        holder["s"].push_runtime_event("job-finished", {"job": "j1", "ok": True})
        return "started"

    server.add(
        w.stream(w.tool_use("toolu_1", "start_job", ["{}"])),
        w.stream(w.text("The job finished.")),
    )
    with Session(model(server), tools=[start_job]) as session:
        holder["s"] = session
        session.push_user_message("run the job")
        result = session.generate()
    assert result.text == "The job finished."
    last = server.bodies[1]["messages"][-1]
    assert last["role"] == "user"
    kinds = [b["type"] for b in last["content"]]
    assert kinds[0] == "tool_result" and kinds[1:] == ["text"]
    assert "job-finished" in last["content"][1]["text"]


def test_message_conversion_merges_roles_and_converts_media(server):
    png = b"\x89PNG fake"
    pdf = b"%PDF-1.7 fake"
    server.add(w.stream(w.text("seen")))
    history = (
        Message.user("first"),
        Message.user(
            [
                ImagePart(data=png, media_type="image/png"),
                ImagePart(url="data:image/jpeg;base64," + base64.b64encode(b"jpg").decode()),
                ImagePart(url="https://example.com/cat.png"),
                FilePart(data=pdf, media_type="application/pdf"),
                FilePart(url="https://example.com/doc.pdf", media_type="application/pdf"),
                FilePart(data=b"hello file", media_type="text/plain", filename="a.txt"),
            ]
        ),
        Message(role="assistant", content=(ReasoningPart(text="unsigned thoughts"), TextPart(text="ok"))),
        Message.assistant("and more"),
        Message(
            role="assistant", content=(ToolCallPart(tool_call_id="t1", tool_name="add", input={"a": 1}),)
        ),
        Message(
            role="tool",
            content=(
                ToolResultPart(
                    tool_call_id="t1",
                    tool_name="add",
                    output=ToolOutput(kind="content", value=(TextPart(text="plot"), ImagePart(data=png))),
                ),
            ),
        ),
    )
    list(model(server).stream(req(*history)))
    msgs = server.bodies[0]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    user = msgs[0]["content"]
    assert user[0]["text"] == "first"
    assert user[1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": base64.b64encode(png).decode(),
    }
    assert user[2]["source"] == {
        "type": "base64",
        "media_type": "image/jpeg",
        "data": base64.b64encode(b"jpg").decode(),
    }
    assert user[3]["source"] == {"type": "url", "url": "https://example.com/cat.png"}
    assert user[4] == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": base64.b64encode(pdf).decode()},
    }
    assert user[5]["source"] == {"type": "url", "url": "https://example.com/doc.pdf"}
    assert user[6]["type"] == "text" and "hello file" in user[6]["text"]
    # unsigned reasoning (from another provider) is dropped; consecutive assistants merge
    assert [b["type"] for b in msgs[1]["content"]] == ["text", "text", "tool_use"]
    result = msgs[2]["content"][0]
    assert result["type"] == "tool_result"
    assert result["content"][0] == {"type": "text", "text": "plot"}
    assert result["content"][1]["type"] == "image"


def test_unsupported_file_type_is_rejected_before_any_request(server):
    with pytest.raises(ConfigurationError, match="PDF and text files"):
        model(server).stream(req(Message.user([FilePart(data=b"x", media_type="application/zip")])))
    assert server.requests == []


def test_cache_breakpoints_on_system_and_recent_user_turns(server):
    server.add(w.stream(w.text("a")))
    history = (
        Message.user("q1"),
        Message.assistant("a1"),
        Message.user("q2"),
        Message.assistant("a2"),
        Message.user("q3"),
    )
    list(model(server).stream(req(*history, system="sys", tools=(ADD,))))
    assert cache_marks(server.bodies[0]) == ["system[0]", "messages[2][0]", "messages[4][0]"]


def test_cache_breakpoints_on_tools_when_there_is_no_system_prompt(server):
    server.add(w.stream(w.text("a")))
    list(
        model(server, cache_messages=3).stream(req(*(Message.user(f"q{i}") for i in range(1)), tools=(ADD,)))
    )
    assert cache_marks(server.bodies[0]) == ["tools[0]", "messages[0][0]"]


def test_never_more_than_four_breakpoints(server):
    server.add(w.stream(w.text("a")))
    history = []
    for i in range(6):
        history += [Message.user(f"q{i}"), Message.assistant(f"a{i}")]
    history.append(Message.user("last"))
    list(model(server, cache_messages=3).stream(req(*history, system="sys")))
    assert len(cache_marks(server.bodies[0])) == 4  # the fake rejects a fifth, as the API does


def test_caching_can_be_switched_off_or_tuned(server):
    server.add(w.stream(w.text("a")), w.stream(w.text("b")), w.stream(w.text("c")), w.stream(w.text("d")))
    list(model(server).stream(req(system="sys", cache=False)))
    list(model(server, cache=False).stream(req(system="sys")))
    list(model(server).stream(req(system="sys", provider_options={"cache_control": None})))
    assert [cache_marks(b) for b in server.bodies] == [[], [], []]
    list(
        model(server).stream(
            req(system="sys", provider_options={"cache_control": {"type": "ephemeral", "ttl": "1h"}})
        )
    )
    body = server.bodies[3]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "cache_control" not in {k for k in body if k != "system"}  # consumed, not sent top-level


def test_provider_options_pass_through_and_win(server):
    server.add(w.stream(w.text("a")))
    settings = ModelSettings(temperature=0.5, max_tokens=100, stop=("END",), top_p=0.8)
    list(
        model(server).stream(
            req(
                settings=settings,
                provider_options={"max_tokens": 222, "metadata": {"user_id": "u1"}, "top_k": 3},
            )
        )
    )
    body = server.bodies[0]
    assert body["max_tokens"] == 222  # explicit caller option wins
    assert body["metadata"] == {"user_id": "u1"} and body["top_k"] == 3
    assert body["temperature"] == 0.5 and body["top_p"] == 0.8 and body["stop_sequences"] == ["END"]


def test_authentication_error(server):
    server.add(w.error(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(AuthenticationError, match="invalid x-api-key") as info:
        list(model(server).stream(req()))
    assert info.value.provider == "anthropic" and info.value.status_code == 401
    assert len(server.requests) == 1


def test_invalid_request_error_is_not_retried(server):
    server.add(w.error(400, "invalid_request_error", "messages.0.content: Field required"))
    with pytest.raises(ProviderError, match="Field required") as info:
        list(model(server).stream(req()))
    assert type(info.value) is ProviderError
    assert len(server.requests) == 1


def test_prompt_too_long_is_context_overflow(server):
    server.add(w.error(400, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"))
    with pytest.raises(ContextOverflowError, match="prompt is too long"):
        list(model(server).stream(req()))


def test_overloaded_529_and_stream_error_event_are_retried(server):
    server.add(
        w.error(529, "overloaded_error", "Overloaded"),
        w.stream_error("overloaded_error", "Overloaded"),
        w.stream(w.text("finally", pieces=1)),
    )
    events = list(model(server).stream(req()))
    assert TextDelta("finally") in events
    assert len(server.requests) == 3


def test_rate_limit_exhausts_into_rate_limit_error(server):
    for _ in range(3):
        server.add(w.error(429, "rate_limit_error", "Number of request tokens has exceeded your rate limit"))
    with pytest.raises(RateLimitError, match="giving up after 3 attempts"):
        list(model(server).stream(req()))
    assert len(server.requests) == 3


def test_stream_cut_before_message_stop_is_an_error(server):
    server.add(w.stream(w.text("partial"), message_stop=False))
    with pytest.raises(ProviderUnavailableError, match="message_stop"):
        list(model(server).stream(req()))
    assert len(server.requests) == 1


def test_missing_api_key_is_a_configuration_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-sonnet-4-5")


def test_thinking_deltas_are_forwarded_as_they_arrive(server):
    import threading

    gate = threading.Event()
    reply = w.stream(w.thinking("step one. step two.", "sig"), w.text("done"))
    first_delta = next(i for i, (name, _) in enumerate(reply.events) if name == "content_block_delta")
    reply.events = [*reply.events[: first_delta + 1], (None, gate), *reply.events[first_delta + 1 :]]
    server.add(reply)
    result = run_agent(
        model(server), "hi", settings=ModelSettings(reasoning_budget=1024), on_reasoning=lambda t: gate.set()
    )
    assert result.text == "done"
    assert reply.gates_passed == [True]


def test_stream_false_in_provider_options_is_rejected(server):
    with pytest.raises(ConfigurationError, match="always streams"):
        model(server).stream(req(provider_options={"stream": False}))
    assert server.requests == []


def test_system_messages_join_the_system_prompt(server):
    server.add(w.stream(w.text("ok")))
    list(model(server).stream(req(Message.system("extra rules"), Message.user("hi"), system="base rules")))
    body = server.bodies[0]
    assert [b["text"] for b in body["system"]] == ["base rules", "extra rules"]
    assert "cache_control" in body["system"][-1] and "cache_control" not in body["system"][0]
    assert [m["role"] for m in body["messages"]] == ["user"]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"tool_choice": "required"}, "forced tool use"),
        ({"tool_choice": "add"}, "forced tool use"),
        ({"settings": ModelSettings(reasoning_budget=1024, temperature=0.2)}, "temperature 1"),
        ({"settings": ModelSettings(reasoning_budget=1024, top_p=0.5)}, "top_p"),
        ({"provider_options": {"top_k": 5}}, "top_k"),
    ],
)
def test_what_extended_thinking_forbids_is_rejected_before_any_request(server, kw, message):
    kw.setdefault("settings", ModelSettings(reasoning_budget=1024))
    with pytest.raises(ConfigurationError, match=message):
        model(server).stream(req(tools=(ADD,), **kw))
    assert server.requests == []


def test_extended_thinking_allows_temperature_one_and_high_top_p(server):
    server.add(w.stream(w.text("ok")))
    settings = ModelSettings(reasoning_budget=1024, temperature=1, top_p=0.95)
    list(model(server).stream(req(settings=settings)))
    assert server.bodies[0]["temperature"] == 1 and server.bodies[0]["top_p"] == 0.95


def test_whitespace_text_around_tool_calls_is_not_sent_back(server):
    # Claude may open a turn with a text block of only "\n\n" before its tool call; the
    # API rejects such a block when it is sent back (the fake does too)
    server.add(
        w.stream(w.text("\n\n", pieces=1), w.tool_use("toolu_1", "add", ['{"a": 1, "b": 2}'])),
        w.stream(w.text("3")),
    )
    result = run_agent(model(server), "add", tools=[add], system="  \n")
    assert result.text == "3"
    second = server.bodies[1]
    assert [b["type"] for b in second["messages"][1]["content"]] == ["tool_use"]
    assert "system" not in second  # a blank system prompt is left out, not sent empty


def test_user_message_of_only_whitespace_is_rejected_before_any_request(server):
    with pytest.raises(ConfigurationError, match="whitespace"):
        # Message.user() refuses an empty prompt; a history can still hold one
        model(server).stream(req(Message(role="user", content=(TextPart(text="   "),))))
    assert server.requests == []


def test_empty_tool_results_are_sent_as_the_api_accepts_them(server):
    server.add(w.stream(w.text("ok")))
    history = (
        Message.user("go"),
        Message(
            role="assistant",
            content=(
                ToolCallPart(tool_call_id="t1", tool_name="add", input={}),
                ToolCallPart(tool_call_id="t2", tool_name="add", input={}),
                ToolCallPart(tool_call_id="t3", tool_name="add", input={}),
            ),
        ),
        Message(
            role="tool",
            content=(
                ToolResultPart(tool_call_id="t1", tool_name="add", output=ToolOutput.error("")),
                ToolResultPart(tool_call_id="t2", tool_name="add", output=ToolOutput.text("")),
                ToolResultPart(
                    tool_call_id="t3", tool_name="add", output=ToolOutput(kind="content", value=(TextPart(text=" "),))
                ),
            ),
        ),
    )
    list(model(server).stream(req(*history)))
    results = server.bodies[0]["messages"][2]["content"]
    # an error result must have content; an empty success result leaves it out
    assert results[0]["is_error"] is True and results[0]["content"].startswith("Error")
    assert "content" not in results[1] and "content" not in results[2]


def test_prompt_too_long_reaches_the_loops_overflow_handling(server):
    server.add(
        w.error(400, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"),
        w.stream(w.text("short enough now")),
    )
    history = [Message.user("old question"), Message.assistant("old answer")]
    shrunk: list[int] = []

    def shrink(messages, cancel):
        shrunk.append(len(messages))
        return messages[-1:]  # keep only the newest message

    result = run_agent(model(server), "new question", messages=history, on_context_overflow=shrink)
    assert result.text == "short enough now"
    assert shrunk == [3]
    assert len(server.bodies[0]["messages"]) == 3 and len(server.bodies[1]["messages"]) == 1


def test_history_opening_with_the_assistant_gets_a_user_turn_first(server):
    # run_agent refuses such a history (see tests/test_context_invariants.py); a direct caller of
    # the adapter still gets a request the API accepts
    server.add(w.stream(w.text("Arr, 4.")))
    list(model(server).stream(req(Message.assistant("Ahoy! Ask me anything."), Message.user("what is 2 + 2?"))))
    roles = [m["role"] for m in server.bodies[0]["messages"]]
    assert roles == ["user", "assistant", "user"]  # the fake rejects an assistant first, as the API does
    assert server.bodies[0]["messages"][1]["content"][0]["text"] == "Ahoy! Ask me anything."


def test_tool_call_ids_from_other_providers_are_made_acceptable(server):
    # e.g. a session that ran on an OpenAI-compatible server (Kimi writes "functions.add:0")
    server.add(w.stream(w.text("ok")))
    calls = (
        ToolCallPart(tool_call_id="functions.add:0", tool_name="add", input={"a": 1, "b": 2}),
        ToolCallPart(tool_call_id="functions.add:1", tool_name="add", input={"a": 3, "b": 4}),
        ToolCallPart(tool_call_id="toolu_ok-1", tool_name="add", input={"a": 5, "b": 6}),
    )
    results = tuple(
        ToolResultPart(tool_call_id=c.tool_call_id, tool_name="add", output=ToolOutput(kind="json", value=i))
        for i, c in enumerate(calls)
    )
    history = (Message.user("go"), Message(role="assistant", content=calls), Message(role="tool", content=results))
    list(model(server).stream(req(*history)))
    msgs = server.bodies[0]["messages"]
    ids = [b["id"] for b in msgs[1]["content"]]
    assert [b["tool_use_id"] for b in msgs[2]["content"]] == ids
    assert len(set(ids)) == 3 and ids[2] == "toolu_ok-1"


def test_sdk_call_options_such_as_extra_headers_pass_through(server):
    server.add(w.stream(w.text("ok")))
    beta = {"anthropic-beta": "interleaved-thinking-2025-05-14"}
    list(model(server).stream(req(provider_options={"extra_headers": beta})))
    assert server.requests[0].headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert "extra_headers" not in server.bodies[0]
