"""BedrockModel over the real boto3 client against a loopback Bedrock Runtime server.

The fake (tests/fakes/bedrock_wire.py) answers ConverseStream in AWS's binary event-stream
framing, CRCs included, so botocore's own parser reads it, and it enforces the Converse
request rules (SigV4 signature, user first, alternating roles, every toolResult answering
a toolUse of the assistant message before it), so every test also checks that the adapter
sends a request the real service would accept.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from _tools import ADD_SPEC as ADD
from _tools import add
from fakes import bedrock_wire as w
from fakes.server import DROP, FakeServer
from pydantic import BaseModel

from agentkit import (
    AuthenticationError,
    CancelledError,
    CancelToken,
    ConfigurationError,
    ContextOverflowError,
    MissingDependencyError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    get_model,
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
from agentkit.models.bedrock import BedrockModel

FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.01)


@pytest.fixture
def server(bedrock_server):
    return bedrock_server


def model(server: FakeServer, **kw) -> BedrockModel:
    kw.setdefault("retry", FAST)
    return BedrockModel(w.MODEL, endpoint_url=server.url, **kw)


def req(*messages: Message, **kw) -> ModelRequest:
    return ModelRequest(messages=messages or (Message.user("hi"),), **kw)


# -- streaming, usage, system prompt -----------------------------------------------------


def test_streams_text_usage_with_cache_tokens_and_finish(server):
    server.add(w.stream(w.text("Hello world", pieces=3), input_tokens=10, output_tokens=4,
                        cache_read=100, cache_write=50))
    events = list(model(server).stream(req(system="be nice")))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hell", "o wo", "rld"]
    (usage,) = [e.usage for e in events if isinstance(e, UsageEvent)]
    assert usage.input_tokens == 160  # uncached + cache read + cache write
    assert (usage.output_tokens, usage.total_tokens) == (4, 164)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (100, 50)
    assert events[-1] == FinishEvent("stop", "end_turn")
    sent = server.requests[0]
    assert sent.path == "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream"
    # SigV4 with the keys and region of the environment (boto3's usual chain)
    assert sent.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDAGENTKITFAKE/")
    assert "/us-east-1/bedrock/aws4_request" in sent.headers["authorization"]
    assert sent.body["system"] == [{"text": "be nice"}]
    assert sent.body["messages"] == [{"role": "user", "content": [{"text": "hi"}]}]
    assert "inferenceConfig" not in sent.body and "toolConfig" not in sent.body


def test_settings_become_inference_config_and_region_is_chosen(server):
    server.add(w.stream(w.text("ok")))
    settings = ModelSettings(max_tokens=300, temperature=0.2, top_p=0.9, stop=("END",))
    list(model(server, region="eu-west-3").stream(req(settings=settings)))
    body = server.bodies[0]
    assert body["inferenceConfig"] == {"maxTokens": 300, "temperature": 0.2, "topP": 0.9, "stopSequences": ["END"]}
    assert "/eu-west-3/bedrock/aws4_request" in server.requests[0].headers["authorization"]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [("max_tokens", "length"), ("stop_sequence", "stop"), ("guardrail_intervened", "content-filter"),
     ("content_filtered", "content-filter"), ("malformed_tool_use", "error"), ("something_new", "other")],
)
def test_stop_reasons_are_mapped(server, raw, reason):
    server.add(w.stream(w.text("x"), stop_reason=raw))
    assert list(model(server).stream(req()))[-1] == FinishEvent(reason, raw)


def test_the_same_request_without_streaming_uses_converse(server):
    server.add(w.converse(w.text("Let me add."), w.tool_use("tooluse_1", "add", ['{"a": 1, "b": 2}']),
                          input_tokens=7, output_tokens=3, cache_read=2))
    events = list(model(server, stream=False).stream(req(tools=(ADD,))))
    assert events == [
        TextDelta("Let me add."),
        ToolCallEvent(tool_call_id="tooluse_1", tool_name="add", input={"a": 1, "b": 2}),
        UsageEvent(events[2].usage),
        FinishEvent("tool-calls", "tool_use"),
    ]
    assert (events[2].usage.input_tokens, events[2].usage.cache_read_tokens) == (9, 2)
    assert server.requests[0].path.endswith("/converse")


def test_converse_answers_carry_reasoning_too(server):
    server.add(w.converse(w.reasoning("Thinking.", "sig-9"), w.redacted(b"opaque"), w.text("42")))
    events = list(model(server, stream=False).stream(req()))
    assert events[:4] == [
        ReasoningDelta("Thinking."),
        ReasoningDone(ReasoningPart(text="Thinking.", signature="sig-9")),
        ReasoningDone(ReasoningPart(text="", redacted_data="b3BhcXVl")),
        TextDelta("42"),
    ]


def test_an_empty_stream_is_retried(server):
    server.add(w.stream_reply([]), w.stream(w.text("ok", pieces=1)))
    assert list(model(server).stream(req()))[0] == TextDelta("ok")
    assert len(server.requests) == 2


def test_a_read_timeout_inside_the_stream_is_a_transient_fault(server):
    gate = threading.Event()
    server.add(w.stream_reply([w.event("messageStart", {"role": "assistant"}), gate]))
    try:
        with pytest.raises(ProviderUnavailableError, match="stream broke off"):
            list(model(server, timeout=1, retry=RetryPolicy(max_retries=0)).stream(req()))
    finally:
        gate.set()


# -- tools -------------------------------------------------------------------------------


def test_tool_uses_stream_as_tool_calls_and_tools_go_out_as_tool_specs(server):
    server.add(w.stream(
        w.text("Let me add."),
        w.tool_use("tooluse_1", "add", ['{"a": 1', ', "b": 2}']),
        w.tool_use("tooluse_2", "add", ['{"a": ']),
    ))
    events = list(model(server).stream(req(tools=(ADD,))))
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert calls[0] == ToolCallEvent(tool_call_id="tooluse_1", tool_name="add", input={"a": 1, "b": 2})
    assert calls[1].input == '{"a": ' and "not valid JSON" in calls[1].input_error
    assert events[-1] == FinishEvent("tool-calls", "tool_use")
    assert server.bodies[0]["toolConfig"] == {
        "tools": [{"toolSpec": {"name": "add", "description": "Add two integers.",
                                "inputSchema": {"json": dict(ADD.input_schema)}}}]
    }


@pytest.mark.parametrize(
    ("choice", "sent"),
    [("required", {"any": {}}), ("add", {"tool": {"name": "add"}}), ("auto", None)],
)
def test_tool_choice_mapping(server, choice, sent):
    server.add(w.stream(w.text("ok")))
    list(model(server).stream(req(tools=(ADD,), tool_choice=choice)))
    assert server.bodies[0]["toolConfig"].get("toolChoice") == sent


def test_tool_choice_none_leaves_the_tools_out_unless_the_history_needs_them(server):
    server.add(w.stream(w.text("ok")), w.stream(w.text("ok")))
    history = (
        Message.user("add"),
        Message(role="assistant",
                content=(ToolCallPart(tool_call_id="tooluse_9", tool_name="add", input={"a": 1, "b": 1}),)),
        Message(role="tool", content=(ToolResultPart(tool_call_id="tooluse_9", tool_name="add",
                                                     output=ToolOutput.text("2")),)),
    )
    m = model(server)
    list(m.stream(req(tools=(ADD,), tool_choice="none")))
    list(m.stream(req(*history, tools=(ADD,), tool_choice="none")))
    assert "toolConfig" not in server.bodies[0]
    assert server.bodies[1]["toolConfig"] == {"tools": server.bodies[1]["toolConfig"]["tools"]}  # no toolChoice


def test_run_agent_answers_tool_uses_with_tool_results_by_id(server):
    server.add(
        w.stream(w.tool_use("tooluse_a", "add", ['{"a": 2, "b": 3}']),
                 w.tool_use("tooluse_b", "add", ['{"a": 1}'])),  # missing b: the tool answers with an error
        w.stream(w.text("2 + 3 = 5")),
    )
    result = run_agent(model(server), "what is 2 + 3?", tools=[add])
    assert result.text == "2 + 3 = 5"
    second = server.bodies[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"] == [
        {"toolUse": {"toolUseId": "tooluse_a", "name": "add", "input": {"a": 2, "b": 3}}},
        {"toolUse": {"toolUseId": "tooluse_b", "name": "add", "input": {"a": 1}}},
    ]
    ok, failed = second[2]["content"]
    assert ok == {"toolResult": {"toolUseId": "tooluse_a", "content": [{"text": "5"}]}}
    assert failed["toolResult"]["toolUseId"] == "tooluse_b" and failed["toolResult"]["status"] == "error"
    assert failed["toolResult"]["content"][0]["text"].strip()


def test_history_from_another_provider_is_made_acceptable(server):
    """Ids the service rejects are rewritten alike in a call and its result; a history that
    opens with the assistant gets a user turn first; blank text and JSON results."""
    server.add(w.stream(w.text("ok")))
    history = (
        Message.assistant("Hello! How can I help?"),
        Message.user("add 1 and 2"),
        Message(role="assistant", content=(
            TextPart(text="\n\n"), ToolCallPart(tool_call_id="functions add/0" + "x" * 70, tool_name="add", input={}),
        )),
        Message(role="tool", content=(ToolResultPart(tool_call_id="functions add/0" + "x" * 70, tool_name="add",
                                                     output=ToolOutput(kind="json", value={"sum": 3})),)),
    )
    list(model(server).stream(req(*history, tools=(ADD,))))
    messages = server.bodies[0]["messages"]  # the fake accepted it: ids match, roles alternate
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    use = messages[3]["content"][0]["toolUse"]
    result = messages[4]["content"][0]["toolResult"]
    assert use["toolUseId"] == result["toolUseId"] and len(use["toolUseId"]) <= 64
    assert result["content"] == [{"json": {"sum": 3}}]


def test_the_fake_enforces_the_converse_rules(server):
    """What the real service rejects, the fake rejects too: the adapter's tests would
    catch a request it would send wrongly."""
    client = model(server)._client
    base = {"modelId": w.MODEL}
    stray_result = [{"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "5"}]}}]}]
    unanswered = [
        {"role": "user", "content": [{"text": "hi"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "add", "input": {}}}]},
        {"role": "user", "content": [{"text": "and?"}]},
    ]
    tools = {"tools": [{"toolSpec": {"name": "add", "inputSchema": {"json": {"type": "object"}}}}]}
    cases = [
        ({"messages": [{"role": "assistant", "content": [{"text": "hi"}]}]}, "start with a user message"),
        ({"messages": [{"role": "user", "content": [{"text": "a"}]}, {"role": "user", "content": [{"text": "b"}]}]},
         "alternate"),
        ({"messages": [{"role": "user", "content": [{"text": "  "}]}]}, "is blank"),
        ({"messages": stray_result, "toolConfig": tools}, "exceeds the number of toolUse blocks"),
        ({"messages": unanswered, "toolConfig": tools}, "Expected toolResult blocks"),
        ({"messages": unanswered[:2] + [stray_result[0]]}, "toolConfig field must be defined"),
    ]
    errors = pytest.importorskip("botocore.exceptions")
    for extra, message in cases:
        with pytest.raises(errors.ClientError, match=message) as caught:
            client.converse(**base, **extra)
        assert caught.value.response["Error"]["Code"] == "ValidationException"


# -- structured output -------------------------------------------------------------------


class City(BaseModel):
    name: str
    population: int


def test_structured_output_is_a_tool_the_model_is_made_to_call(server):
    server.add(w.stream(w.tool_use("tooluse_1", "final_answer", ['{"name": "Bern", "population": 3}'])))
    result = run_agent(model(server), "go", output_type=City)
    assert result.output == City(name="Bern", population=3)
    config = server.bodies[0]["toolConfig"]
    assert config["toolChoice"] == {"tool": {"name": "final_answer"}}
    assert [t["toolSpec"]["name"] for t in config["tools"]] == ["final_answer"]
    assert "outputConfig" not in server.bodies[0]


def test_structured_output_with_user_tools_requires_any_tool(server):
    server.add(
        w.stream(w.tool_use("tooluse_1", "add", ['{"a": 1, "b": 2}'])),
        w.stream(w.tool_use("tooluse_2", "final_answer", ['{"name": "Three", "population": 3}'])),
    )
    result = run_agent(model(server), "go", tools=[add], output_type=City)
    assert result.output == City(name="Three", population=3)
    assert [b["toolConfig"]["toolChoice"] for b in server.bodies] == [{"any": {}}, {"any": {}}]


def test_structured_output_for_models_without_forced_tool_choice(server):
    server.add(
        w.stream(w.text("It is Bern with 3 people.")),  # answers in text: sent back to call the tool
        w.stream(w.tool_use("tooluse_1", "final_answer", ['{"name": "Bern", "population": 3}'])),
    )
    result = run_agent(model(server, force_output_tool=False), "go", output_type=City)
    assert result.output == City(name="Bern", population=3)
    assert all("toolChoice" not in b["toolConfig"] for b in server.bodies)


# -- reasoning, caching, images ----------------------------------------------------------


def test_reasoning_streams_and_goes_back_with_its_signature(server):
    server.add(
        w.stream(w.reasoning("Let me think.", "sig-abc"), w.redacted(b"\x00secret"),
                 w.tool_use("tooluse_1", "add", ['{"a": 2, "b": 3}'])),
        w.stream(w.text("5")),
    )
    reasoning: list[str] = []
    result = run_agent(model(server), "2+3?", tools=[add], settings=ModelSettings(reasoning_budget=2048),
                       on_reasoning=reasoning.append)
    assert result.text == "5" and "".join(reasoning) == "Let me think."
    first = server.bodies[0]
    assert first["additionalModelRequestFields"] == {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    assert first["inferenceConfig"]["maxTokens"] > 2048
    assert "toolChoice" not in first["toolConfig"]
    assistant = server.bodies[1]["messages"][1]["content"]
    assert assistant[0] == {"reasoningContent": {"reasoningText": {"text": "Let me think.", "signature": "sig-abc"}}}
    assert assistant[1] == {"reasoningContent": {"redactedContent": "AHNlY3JldA=="}}  # the bytes, base64 on the wire


def test_reasoning_events_in_order(server):
    server.add(w.stream(w.reasoning("Hmm, ok", "sig-1"), w.text("done")))
    events = list(model(server).stream(req()))
    assert events[:3] == [ReasoningDelta("Hmm,"), ReasoningDelta(" ok"),
                          ReasoningDone(ReasoningPart(text="Hmm, ok", signature="sig-1"))]


def test_reasoning_budget_must_fit_in_max_tokens(server):
    with pytest.raises(ConfigurationError, match="greater than reasoning_budget"):
        model(server).stream(req(settings=ModelSettings(reasoning_budget=2048, max_tokens=1000)))
    assert server.requests == []


def test_cache_points_follow_the_system_prompt_and_the_last_user_message(server):
    server.add(w.stream(w.text("ok")), w.stream(w.text("ok")), w.stream(w.text("ok")))
    list(model(server, cache=True).stream(req(system="long instructions", tools=(ADD,))))
    list(model(server, cache=True).stream(req(tools=(ADD,))))
    list(model(server, cache=True).stream(req(cache=False)))
    with_system, without_system, off = server.bodies
    assert with_system["system"] == [{"text": "long instructions"}, {"cachePoint": {"type": "default"}}]
    assert with_system["messages"][-1]["content"][-1] == {"cachePoint": {"type": "default"}}
    assert without_system["toolConfig"]["tools"][-1] == {"cachePoint": {"type": "default"}}
    assert "cachePoint" not in str(off)


def test_images_go_as_bytes_and_urls_are_refused_before_sending(server):
    server.add(w.stream(w.text("a cat")))
    png = b"\x89PNG\r\n\x1a\nfake"
    list(model(server).stream(req(Message.user([TextPart(text="what is it?"), ImagePart(data=png)]))))
    image = server.bodies[0]["messages"][0]["content"][1]["image"]
    assert image == {"format": "png", "source": {"bytes": "iVBORw0KGgpmYWtl"}}
    with pytest.raises(ConfigurationError, match="not by URL"):
        model(server).stream(req(Message.user([ImagePart(url="https://example.com/cat.png")])))
    assert len(server.requests) == 1


def test_documents_go_as_bytes_and_text_files_as_text(server):
    server.add(w.stream(w.text("read")))
    parts = [FilePart(data=b"%PDF-1.4 fake", media_type="application/pdf", filename="Q3 report.pdf"),
             FilePart(data=b"a: 1", media_type="application/x-yaml", filename="conf.yaml"),
             TextPart(text="summarise")]
    list(model(server).stream(req(Message.user(parts))))
    document, yaml_text, _ = server.bodies[0]["messages"][0]["content"]
    assert document == {"document": {"format": "pdf", "name": "Q3 report",
                                     "source": {"bytes": "JVBERi0xLjQgZmFrZQ=="}}}
    assert yaml_text["text"].startswith('<file name="conf.yaml">') and "a: 1" in yaml_text["text"]
    with pytest.raises(ConfigurationError, match="not 'application/zip'"):
        model(server).stream(req(Message.user([FilePart(data=b"PK", media_type="application/zip")])))
    assert len(server.requests) == 1


# -- errors and retries ------------------------------------------------------------------


def test_throttling_is_retried_by_agentkit_alone(server):
    server.add(w.error(429, "ThrottlingException", "Too many requests, please wait before trying again."),
               w.stream(w.text("ok")))
    retried = []
    events = list(model(server, on_retry=retried.append).stream(req()))
    assert events[-1] == FinishEvent("stop", "end_turn")
    assert len(server.requests) == 2  # one by agentkit's retry: botocore made no retry of its own
    assert isinstance(retried[0].error, RateLimitError)


def test_botocore_does_not_retry_underneath(server):
    server.add(*[w.error(503, "ServiceUnavailableException", "Service is unavailable")] * 3)
    with pytest.raises(ProviderUnavailableError, match="ServiceUnavailableException"):
        list(model(server, retry=RetryPolicy(max_retries=0)).stream(req()))
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("status", "code", "message", "error", "retried"),
    [
        (429, "ThrottlingException", "Rate exceeded", RateLimitError, True),
        (503, "ServiceUnavailableException", "Service unavailable", ProviderUnavailableError, True),
        (429, "ModelNotReadyException", "Model is not ready to serve inference requests",
         ProviderUnavailableError, True),
        (500, "InternalServerException", "Internal error", ProviderUnavailableError, True),
        (408, "ModelTimeoutException", "Model timed out", ProviderUnavailableError, True),
        (403, "AccessDeniedException", "You don't have access to the model", AuthenticationError, False),
        (403, "UnrecognizedClientException", "The security token included in the request is invalid",
         AuthenticationError, False),
        (400, "ValidationException", "Input is too long for requested model.", ContextOverflowError, False),
        (400, "ValidationException", "prompt is too long: 210000 tokens > 200000 maximum",
         ContextOverflowError, False),
        (400, "ValidationException", "Too many input tokens. Max input tokens: 8192, request input token count: 9000",
         ContextOverflowError, False),
        (400, "ValidationException", "The model returned the following errors: bad field", ProviderError, False),
        (404, "ResourceNotFoundException", "Model not found", ProviderError, False),
        (424, "ModelErrorException", "The model returned an error", ProviderError, False),
        (400, "ServiceQuotaExceededException", "Quota exceeded", RateLimitError, False),
    ],
)
def test_service_errors_through_the_error_seam(server, status, code, message, error, retried):
    server.add(*[w.error(status, code, message)] * 3)
    with pytest.raises(error) as caught:
        list(model(server).stream(req()))
    assert type(caught.value) is error
    assert caught.value.provider == "bedrock" and caught.value.status_code == status
    assert code in str(caught.value) and message in str(caught.value)
    assert len(server.requests) == (3 if retried else 1)


def test_an_error_inside_the_stream_before_any_event_is_retried(server):
    server.add(w.stream_reply([w.exception("throttlingException", "slow down")]), w.stream(w.text("ok", pieces=1)))
    events = list(model(server).stream(req()))
    assert events[0] == TextDelta("ok") and len(server.requests) == 2


@pytest.mark.parametrize(
    ("exception_type", "error"),
    [("modelStreamErrorException", ProviderUnavailableError), ("throttlingException", RateLimitError),
     ("validationException", ProviderError)],
)
def test_an_error_inside_the_stream_after_text_is_raised_not_retried(server, exception_type, error):
    frames = w.stream_events(w.text("partial answer", pieces=1))
    server.add(w.stream_reply([*frames[:2], w.exception(exception_type, "it broke")]))
    seen = []
    with pytest.raises(error, match="in stream .*it broke") as caught:
        for e in model(server).stream(req()):
            seen.append(e)
    assert type(caught.value) is error
    assert seen == [TextDelta("partial answer")] and len(server.requests) == 1


def test_a_stream_cut_short_is_retried_before_any_event_and_raised_after(server):
    server.add(w.stream_reply([w.event("messageStart", {"role": "assistant"}), DROP]),
               w.stream(w.text("whole", pieces=1)))
    assert list(model(server).stream(req()))[0] == TextDelta("whole")
    assert len(server.requests) == 2
    server.add(w.stream(w.text("cut", pieces=1), message_stop=False, metadata=False))
    seen = []
    with pytest.raises(ProviderUnavailableError, match="before messageStop"):
        for e in model(server).stream(req()):
            seen.append(e)
    assert seen == [TextDelta("cut")] and len(server.requests) == 3


def test_a_frame_with_a_bad_crc_is_a_transient_fault(server):
    good = w.event("messageStart", {"role": "assistant"})
    broken = good[:-4] + bytes([good[-4] ^ 0xFF]) + good[-3:]
    server.add(w.stream_reply([broken]), w.stream(w.text("ok", pieces=1)))
    assert list(model(server).stream(req()))[0] == TextDelta("ok")
    assert len(server.requests) == 2


def test_no_reachable_endpoint_is_unavailable_and_names_it(server):
    with FakeServer() as gone:
        url = gone.url
    with pytest.raises(ProviderUnavailableError, match="could not be reached at http://127.0.0.1"):
        list(BedrockModel(w.MODEL, endpoint_url=url, retry=RetryPolicy(max_retries=0)).stream(req()))


def test_cancelling_ends_a_stream_blocked_on_a_silent_server(server):
    gate = threading.Event()
    frames = w.stream_events(w.text("first", pieces=1), w.text("never"))
    reply = w.stream_reply([*frames[:3], gate, *frames[3:]])
    server.add(reply)
    cancel = CancelToken()
    stream = model(server, timeout=120).stream(req(cancel=cancel))
    assert next(stream) == TextDelta("first")
    timer = threading.Timer(0.2, cancel.cancel, kwargs={"reason": "user pressed stop"})
    timer.start()
    try:
        with pytest.raises(CancelledError):
            next(stream)
        # the read ended while the server still held the rest back: the cancel shut the
        # connection down, no later frame (nor the 30 s gate's end) woke the reader
        assert reply.gates_passed == []
    finally:
        gate.set()
        timer.join()


def test_cancelling_ends_the_wait_for_a_server_that_sends_no_headers(server):
    release, answered = threading.Event(), threading.Event()

    def late(rec):
        release.wait(30)
        answered.set()
        return w.stream(w.text("too late"))

    server.add(late)
    cancel = CancelToken()
    stream = model(server, timeout=120).stream(req(cancel=cancel))
    timer = threading.Thread(target=lambda: (server.wait_for_requests(1), cancel.cancel("stop")))
    timer.start()
    try:
        with pytest.raises(CancelledError):
            next(stream)
        assert not answered.is_set()  # the call ended while the server still held its answer back
    finally:
        release.set()
        timer.join()


# -- configuration -----------------------------------------------------------------------


def test_spec_string_reaches_bedrock_through_the_registry(server):
    server.add(w.stream(w.text("hi there")))
    m = get_model(f"bedrock:{w.MODEL}", endpoint_url=server.url, retry=FAST)
    assert isinstance(m, BedrockModel) and m.model_name == w.MODEL
    assert run_agent(m, "hello").text == "hi there"


def test_unsigned_requests_are_refused_by_the_fake(server):
    """The fake checks the signature header, so the SigV4 assertions above could fail."""
    import requests

    answer = requests.post(f"{server.url}/model/{w.MODEL}/converse-stream", json={"messages": []}, timeout=30)
    assert answer.status_code == 403 and "MissingAuthenticationToken" in answer.headers["x-amzn-ErrorType"]


def test_bad_configuration_is_refused_before_any_request(server, monkeypatch):
    with pytest.raises(ConfigurationError, match="model id"):
        BedrockModel("")
    with pytest.raises(ConfigurationError, match="max_tokens"):
        BedrockModel(w.MODEL, max_tokens=0)
    with pytest.raises(ConfigurationError, match="either client= or"):
        BedrockModel(w.MODEL, client=model(server)._client, region="us-west-2")
    with pytest.raises(ConfigurationError, match="profile"):
        BedrockModel(w.MODEL, profile="no-such-profile")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(ConfigurationError, match="needs an AWS region"):
        BedrockModel(w.MODEL)
    assert server.requests == []


def test_missing_credentials_are_an_authentication_error(server, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(AuthenticationError, match="AWS_ACCESS_KEY_ID"):
        list(model(server).stream(req()))
    assert server.requests == []


# -- a real endpoint ----------------------------------------------------------------------


@pytest.mark.live
def test_live_bedrock_agent_loop_with_a_tool():
    model_id = os.environ.get("AGENTKIT_LIVE_BEDROCK_MODEL")
    if not model_id:
        pytest.skip("AGENTKIT_LIVE_BEDROCK_MODEL is not set (a Bedrock model id; credentials and region "
                    "come from boto3's usual chain)")
    result = run_agent(BedrockModel(model_id, retry=RetryPolicy(max_retries=2)),
                       "Use the add tool to add 19 and 23, then answer with the sum.",
                       system="You are a careful assistant. Use tools when asked to.",
                       tools=[add], max_steps=4, settings=ModelSettings(max_tokens=512))
    calls = [p for m in result.messages for p in m.content if isinstance(p, ToolCallPart)]
    assert calls and calls[0].tool_name == "add" and calls[0].input_error is None
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0


def test_without_boto3_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)  # makes `import boto3` fail
    with pytest.raises(MissingDependencyError, match=r"pip install 'sync-agentkit\[bedrock\]'"):
        get_model(f"bedrock:{w.MODEL}")


def test_importing_agentkit_does_not_import_boto3():
    code = (
        "import sys, agentkit, agentkit.models\n"
        "assert 'boto3' not in sys.modules and 'botocore' not in sys.modules, 'boto3 imported'\n"
        "agentkit.models.BedrockModel\n"
        "assert 'boto3' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_provider_options_reach_converse_and_unknown_ones_are_refused_first(server):
    server.add(w.stream(w.text("ok")))
    guardrail = {"guardrailIdentifier": "gr1", "guardrailVersion": "1"}
    extra = {"top_k": 20}
    list(model(server).stream(req(provider_options={"guardrailConfig": guardrail,
                                                    "additionalModelRequestFields": extra})))
    assert server.bodies[0]["guardrailConfig"] == guardrail
    assert server.bodies[0]["additionalModelRequestFields"] == extra
    with pytest.raises(ConfigurationError, match=r"'top_k': not a field of the Converse API"):
        model(server).stream(req(provider_options={"top_k": 20}))
    assert len(server.requests) == 1
