"""GeminiModel over the real google-genai SDK against a loopback Gemini API server.

The fake (tests/fakes/gemini_wire.py) speaks the REST wire format the SDK speaks
(``:generateContent``, ``:streamGenerateContent?alt=sse``) and enforces Gemini's request
rules (the API key header, alternating user/model roles, function responses answering
the previous model turn's function calls by name and order, thought signatures sent back
on their parts), so every test also checks that the adapter sends what the real API
accepts.
"""

from __future__ import annotations

import base64
import os
import re
import threading
from dataclasses import dataclass

import pytest
from _procs import wait_for
from _tools import ADD_SPEC as ADD
from _tools import add
from fakes import gemini_wire as w
from fakes.server import DROP, FakeServer, Reply, Trickle

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
    UsageEvent,
)
from agentkit.models.gemini import GeminiModel
from agentkit.usage import Usage

FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.01)
KEY = "gemini-test-key"


@pytest.fixture
def server(gemini_server):
    return gemini_server  # tests/conftest.py: accepts KEY


@pytest.fixture
def thinking_server():
    """A thinking model: it insists on the thought signatures of its function calls."""
    with FakeServer(check=w.validator(key=KEY, require_signatures=True)) as s:
        yield s


def model(server: FakeServer, **kw) -> GeminiModel:
    kw.setdefault("api_key", KEY)
    kw.setdefault("retry", FAST)
    return GeminiModel(w.MODEL, base_url=server.url, **kw)


def request(*messages: Message, **kw) -> ModelRequest:
    return ModelRequest(messages=messages or (Message.user("hi"),), **kw)


def events(m: GeminiModel, req: ModelRequest) -> list:
    return list(m.stream(req))


# -- streaming, usage, finish ------------------------------------------------------------


def test_streams_text_with_usage_and_finish_over_sse(server):
    server.add(w.stream(w.text("Hello there"), usage_metadata=w.usage(prompt=30, candidates=7, cached=12,
                                                                      thoughts=5)))
    out = events(model(server), request())
    assert "".join(e.text for e in out if isinstance(e, TextDelta)) == "Hello there"
    assert len([e for e in out if isinstance(e, TextDelta)]) == 2  # it arrived in two chunks
    assert [e for e in out if isinstance(e, UsageEvent)] == [UsageEvent(Usage(
        input_tokens=30, output_tokens=12, total_tokens=42, cache_read_tokens=12, reasoning_tokens=5))]
    assert out[-1] == FinishEvent("stop", "STOP")
    rec = server.requests[0]
    assert re.fullmatch(rf"/v1(beta)?/models/{w.MODEL}:streamGenerateContent\?alt=sse", rec.path)  # the SDK's default
    assert rec.headers["x-goog-api-key"] == KEY
    assert rec.body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]


def test_stream_false_calls_generate_content(server):
    server.add(w.response(w.text("whole answer"), usage_metadata=w.usage(prompt=3, candidates=2)))
    out = events(model(server, stream=False), request())
    assert [e.text for e in out if isinstance(e, TextDelta)] == ["whole answer"]
    assert re.fullmatch(rf"/v1(beta)?/models/{w.MODEL}:generateContent", server.requests[0].path)
    assert out[-1] == FinishEvent("stop", "STOP")


def test_api_version_picks_the_path(server):
    server.add(w.stream(w.text("ok")))
    events(model(server, api_version="v1beta"), request())
    assert server.requests[0].path.startswith(f"/v1beta/models/{w.MODEL}:streamGenerateContent")


@pytest.mark.parametrize(("raw", "reason"), [("MAX_TOKENS", "length"), ("SAFETY", "content-filter"),
                                             ("RECITATION", "content-filter"), ("MALFORMED_FUNCTION_CALL", "error"),
                                             ("OTHER", "other")])
def test_finish_reasons_are_mapped(server, raw, reason):
    server.add(w.stream(w.text("cut"), finish=raw))
    assert events(model(server), request())[-1] == FinishEvent(reason, raw)


def test_a_blocked_prompt_finishes_as_content_filter(server):
    server.add(Reply(events=[(None, {"promptFeedback": {"blockReason": "SAFETY"},
                                     "usageMetadata": {"promptTokenCount": 4, "totalTokenCount": 4}})]))
    out = events(model(server), request())
    assert out[-1] == FinishEvent("content-filter", "SAFETY")


def test_tool_use_prompt_tokens_count_as_input(server):
    server.add(w.stream(w.text("ok"), usage_metadata=w.usage(prompt=10, candidates=2, tool_prompt=5)))
    usage = next(e for e in events(model(server), request()) if isinstance(e, UsageEvent)).usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (15, 2, 17)


# -- function calling --------------------------------------------------------------------


def test_function_declarations_and_tool_choice_are_sent(server):
    server.add(w.stream(w.text("ok")))
    events(model(server), request(tools=(ADD,), tool_choice="add"))
    body = server.bodies[0]
    assert body["tools"] == [{"functionDeclarations": [{
        "name": "add", "description": "Add two integers.", "parameters_json_schema": dict(ADD.input_schema)}]}]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["add"]}}


@pytest.mark.parametrize(("choice", "mode"), [("auto", "AUTO"), ("none", "NONE"), ("required", "ANY")])
def test_tool_choice_modes(server, choice, mode):
    server.add(w.stream(w.text("ok")))
    events(model(server), request(tools=(ADD,), tool_choice=choice))
    assert server.bodies[0]["toolConfig"] == {"functionCallingConfig": {"mode": mode}}


def test_calls_without_ids_get_stable_ids_and_results_go_back_by_name_and_order(server):
    server.add(
        w.stream(w.text("Adding."), w.call("add", {"a": 2, "b": 3}), w.call("add", {"a": 1})),
        w.stream(w.text("2 + 3 = 5")),
    )
    result = run_agent(model(server), "what is 2 + 3?", tools=[add])
    assert result.text == "2 + 3 = 5"
    calls = [p for m in result.messages for p in m.content if isinstance(p, ToolCallPart)]
    assert [c.input for c in calls] == [{"a": 2, "b": 3}, {"a": 1}]
    assert len({c.tool_call_id for c in calls}) == 2  # distinct ids made up by agentkit
    second = server.bodies[1]["contents"]
    assert [c["role"] for c in second] == ["user", "model", "user"]
    assert second[1]["parts"] == [{"text": "Adding."}, {"functionCall": {"name": "add", "args": {"a": 2, "b": 3}}},
                                  {"functionCall": {"name": "add", "args": {"a": 1}}}]
    responses = [p["functionResponse"] for p in second[2]["parts"]]
    assert responses[0] == {"name": "add", "response": {"output": 5}}
    assert responses[1]["name"] == "add" and "error" in responses[1]["response"]  # b was missing


def test_made_up_ids_stay_unique_when_the_server_repeats_its_response_id(server):
    # every answer of the fake has responseId "resp-fake-1", as a proxy or cache may give
    server.add(w.stream(w.call("add", {"a": 1, "b": 1})), w.stream(w.call("add", {"a": 2, "b": 2})),
               w.stream(w.text("2 and 4")))
    result = run_agent(model(server), "1+1, then 2+2", tools=[add])
    assert result.text == "2 and 4"
    responses = [p["functionResponse"]["response"] for b in server.bodies[1:] for p in b["contents"][-1]["parts"]]
    assert responses[-2:] == [{"output": 2}, {"output": 4}]  # both calls ran


def test_call_ids_given_by_gemini_are_sent_back_on_call_and_response(server):
    server.add(w.stream(w.call("add", {"a": 1, "b": 1}, call_id="fc-7")), w.stream(w.text("2")))
    result = run_agent(model(server), "1+1", tools=[add])
    assert result.messages[1].tool_calls[0].tool_call_id == "fc-7"
    contents = server.bodies[1]["contents"]
    assert contents[1]["parts"][0]["functionCall"]["id"] == "fc-7"
    assert contents[2]["parts"][0]["functionResponse"] == {"id": "fc-7", "name": "add", "response": {"output": 2}}


def test_results_are_sent_in_the_order_of_the_calls_and_runtime_text_after_them(server):
    calls = (ToolCallPart(tool_call_id="a", tool_name="add", input={"a": 1, "b": 1}),
             ToolCallPart(tool_call_id="b", tool_name="echo", input={}))
    history = (
        Message.user("go"),
        Message(role="assistant", content=calls),
        Message(role="tool", content=(
            ToolResultPart(tool_call_id="b", tool_name="echo", output=ToolOutput(kind="json", value={"x": 1})),
            ToolResultPart(tool_call_id="a", tool_name="add", output=ToolOutput.text("2")),
        )),
        Message.user("a job finished meanwhile"),
    )
    server.add(w.stream(w.text("ok")))
    events(model(server), request(*history))
    last = server.bodies[0]["contents"][-1]
    assert [p.get("functionResponse", {}).get("name") for p in last["parts"]] == ["add", "echo", None]
    assert last["parts"][1]["functionResponse"]["response"] == {"output": {"x": 1}}
    assert last["parts"][2] == {"text": "a job finished meanwhile"}


def test_the_fake_rejects_results_that_do_not_answer_the_calls(server):
    """The rule the conversion keeps: Gemini refuses a function response without its call."""
    bad = {"contents": [{"role": "user", "parts": [{"text": "go"}]},
                        {"role": "model", "parts": [{"functionCall": {"name": "add", "args": {}}}]},
                        {"role": "user", "parts": [{"functionResponse": {"name": "other", "response": {}}}]}]}
    from fakes.server import Recorded

    rec = Recorded("POST", f"/v1/models/{w.MODEL}:generateContent", {"x-goog-api-key": KEY}, bad)
    rejected = w.validate(rec)
    assert rejected is not None and rejected.status == 400


# -- thinking and thought signatures ------------------------------------------------------


def test_reasoning_budget_and_effort_become_thinking_config(server):
    server.add(w.stream(w.text("a")), w.stream(w.text("b")))
    events(model(server), request(settings=ModelSettings(reasoning_budget=2048)))
    events(model(server), request(settings=ModelSettings(reasoning_effort="low")))
    first, second = (b["generationConfig"]["thinkingConfig"] for b in server.bodies)
    assert first == {"thinking_budget": 2048, "include_thoughts": True}
    assert second == {"thinking_level": "LOW", "include_thoughts": True}


def test_no_thinking_config_unless_asked_and_include_thoughts_decides(server):
    server.add(w.stream(w.text("a")), w.stream(w.text("b")))
    events(model(server), request())
    events(model(server, include_thoughts=True), request())
    assert "thinkingConfig" not in server.bodies[0].get("generationConfig", {})
    assert server.bodies[1]["generationConfig"]["thinkingConfig"] == {"include_thoughts": True}


def test_budget_and_level_together_are_rejected_before_any_request(server):
    settings = ModelSettings(reasoning_budget=1024, reasoning_effort="high")
    with pytest.raises(ConfigurationError, match="not both"):
        model(server).stream(request(settings=settings))
    assert server.requests == []


def test_thoughts_stream_as_reasoning_and_signatures_are_kept(server):
    server.add(w.stream(w.thought("Let me think."), w.thought(" Done.", signed=True), w.signed_text("Answer")))
    out = events(model(server), request(settings=ModelSettings(reasoning_budget=1024)))
    deltas = [e.text for e in out if isinstance(e, ReasoningDelta)]
    assert "".join(deltas) == "Let me think. Done." and len(deltas) == 4  # forwarded as they came
    done = [e.part for e in out if isinstance(e, ReasoningDone)]
    assert done[0].text == "Let me think. Done." and done[0].signature.startswith("gemini:")
    assert done[1].text == "" and done[1].signature.startswith("gemini:")  # the text part's signature


def test_thought_signatures_go_back_on_their_parts_across_turns(thinking_server):
    thinking_server.add(
        w.stream(w.thought("I should add."), w.call("add", {"a": 2, "b": 3}, signed=True),
                 w.call("add", {"a": 4, "b": 4})),
        w.stream(w.thought("Now answer.", signed=True), w.signed_text("2 + 3 = 5")),
        w.stream(w.text("still here")),
    )
    reasoning: list[str] = []
    m = model(thinking_server)
    result = run_agent(m, "what is 2 + 3?", tools=[add], settings=ModelSettings(reasoning_budget=1024),
                       on_reasoning=reasoning.append)
    assert result.text == "2 + 3 = 5"
    assert "".join(reasoning) == "I should add.Now answer."
    stored = result.messages[1].content  # the first assistant message as stored
    assert isinstance(stored[0], ReasoningPart) and stored[0].text == "I should add." and stored[0].signature is None
    assert isinstance(stored[1], ReasoningPart) and stored[1].signature.startswith("gemini:")
    model_turn = thinking_server.bodies[1]["contents"][1]["parts"]  # the fake checked the signature
    assert model_turn[0]["functionCall"]["name"] == "add" and "thoughtSignature" in model_turn[0]
    assert "thoughtSignature" not in model_turn[1]  # only the first call of a step is signed
    # a later turn sends the whole history again, the signed summary and text among it
    follow = run_agent(m, "and again?", messages=result.messages, settings=ModelSettings(reasoning_budget=1024))
    assert follow.text == "still here"
    last_model = thinking_server.bodies[2]["contents"][3]["parts"]
    assert last_model[0] == {"text": "Now answer.", "thought": True,
                             "thoughtSignature": w.signature_for("thought", "Now answer.")}
    assert last_model[-1]["thoughtSignature"] == w.signature_for("text", None)


def test_signatures_survive_the_file_store_into_the_next_turn(thinking_server, tmp_path):
    """The signed call is stored with the session's events on disk; a Session opened
    afresh from the store sends it back signed."""
    from agentkit import FileEventStore, Session

    thinking_server.add(
        w.stream(w.thought("Adding."), w.call("add", {"a": 20, "b": 22}, signed=True)),
        w.stream(w.signed_text("42"), pieces=1),
        w.stream(w.text("yes, 42")),
    )
    store = FileEventStore(tmp_path)
    with Session.open("g", store=store, model=model(thinking_server, include_thoughts=True), tools=[add]) as s:
        assert s.ask("20 + 22?").text == "42"
    with Session.open("g", store=store, model=model(thinking_server, include_thoughts=True), tools=[add]) as s:
        assert s.ask("sure?").text == "yes, 42"
    contents = thinking_server.bodies[2]["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user", "model", "user"]
    assert contents[1]["parts"][0]["thoughtSignature"] == w.signature_for("call", {"name": "add",
                                                                                   "args": {"a": 20, "b": 22}})
    assert contents[3]["parts"][-1] == {"text": "42", "thoughtSignature": w.signature_for("text", None)}


def test_the_thinking_fake_rejects_a_function_call_without_its_signature(thinking_server):
    history = (Message.user("go"), Message(role="assistant", content=(
        ToolCallPart(tool_call_id="gemini-call-x", tool_name="add", input={"a": 1, "b": 2}),)),
        Message(role="tool", content=(ToolResultPart(tool_call_id="gemini-call-x", tool_name="add",
                                                     output=ToolOutput.text("3")),)))
    with pytest.raises(ProviderError, match="thought_signature"):
        events(model(thinking_server), request(*history))


def test_a_signature_after_the_last_part_goes_back_on_an_empty_text_part(server):
    signature = "gemini:" + w.signature_for("text", None)  # as the adapter stores Gemini's base64
    history = (Message.user("go"), Message(role="assistant", content=(
        TextPart(text="Hello."), ReasoningPart(text="", signature=signature))), Message.user("more"))
    server.add(w.stream(w.text("ok")))
    events(model(server), request(*history))  # the fake checks the signature
    assert server.bodies[0]["contents"][1]["parts"] == [
        {"text": "Hello."}, {"text": "", "thoughtSignature": w.signature_for("text", None)}]


def test_a_result_whose_call_is_not_in_the_turn_before_is_sent_as_text(server):
    history = (Message.user("go"), Message(role="tool", content=(
        ToolResultPart(tool_call_id="gone", tool_name="add", output=ToolOutput.text("5")),)))
    server.add(w.stream(w.text("ok")))
    events(model(server), request(*history))
    assert server.bodies[0]["contents"] == [{"role": "user", "parts": [
        {"text": "go"}, {"text": "[result of the earlier tool call add]: 5"}]}]


def test_reasoning_of_other_providers_is_not_sent(server):
    history = (Message.user("go"), Message(role="assistant", content=(
        ReasoningPart(text="anthropic thinking", signature="sig-anthropic"), TextPart(text="hello"))),
        Message.user("more"))
    server.add(w.stream(w.text("ok")))
    events(model(server), request(*history))
    assert server.bodies[0]["contents"][1] == {"role": "model", "parts": [{"text": "hello"}]}


def test_gemini_signatures_are_not_sent_to_anthropic(anthropic_server):
    """A session that moves from Gemini to Claude: Gemini's signed reasoning stays out of
    the Anthropic request (Anthropic would refuse a signature it did not make)."""
    from fakes import anthropic_wire as aw

    from agentkit.models.anthropic import AnthropicModel

    signed = ReasoningPart(text="thinking", signature="gemini:" + w.signature_for("thought", "thinking"))
    history = (Message.user("go"), Message(role="assistant", content=(signed, TextPart(text="Hello."))),
               Message.user("more"))
    anthropic_server.add(aw.stream(aw.text("ok")))
    claude = AnthropicModel(aw.MODEL, api_key="k", base_url=anthropic_server.url, retry=FAST)
    list(claude.stream(ModelRequest(messages=history)))
    assert anthropic_server.bodies[0]["messages"][1]["content"] == [{"type": "text", "text": "Hello."}]


# -- system instruction, media ----------------------------------------------------------


def test_system_prompt_and_system_messages_become_the_system_instruction(server):
    server.add(w.stream(w.text("ok")))
    events(model(server), request(Message.system("Be brief."), Message.user("hi"), system="You are terse."))
    body = server.bodies[0]
    assert body["systemInstruction"]["parts"] == [{"text": "You are terse."}, {"text": "Be brief."}]
    assert [c["role"] for c in body["contents"]] == ["user"]


def test_images_and_files_become_inline_data_and_file_data(server):
    png = b"\x89PNG\r\n\x1a\nfake"
    pdf = b"%PDF-1.4 fake"
    server.add(w.stream(w.text("a cat")))
    events(model(server), request(Message.user([
        "what is this?",
        ImagePart(data=png, media_type="image/png"),
        ImagePart(url="data:image/jpeg;base64," + base64.b64encode(b"jpg").decode(), media_type="image/png"),
        FilePart(data=pdf, media_type="application/pdf"),
        FilePart(url="https://generativelanguage.googleapis.com/v1beta/files/abc", media_type="video/mp4"),
        FilePart(data=b"a,b\n1,2", media_type="text/csv", filename="t.csv"),
    ])))
    parts = server.bodies[0]["contents"][0]["parts"]
    assert parts[1]["inlineData"] == {"mime_type": "image/png", "data": base64.b64encode(png).decode()}
    assert parts[2]["inlineData"] == {"mime_type": "image/jpeg", "data": base64.b64encode(b"jpg").decode()}
    assert parts[3]["inlineData"]["mime_type"] == "application/pdf"
    assert parts[4]["fileData"] == {"file_uri": "https://generativelanguage.googleapis.com/v1beta/files/abc",
                                    "mime_type": "video/mp4"}
    assert parts[5]["text"].startswith('<file name="t.csv">')


def test_a_tool_result_with_an_image_sends_it_after_the_responses(server):
    png = b"\x89PNG\r\n\x1a\nshot"
    history = (
        Message.user("take a screenshot"),
        Message(role="assistant", content=(ToolCallPart(tool_call_id="gemini-call-1", tool_name="shot", input={}),)),
        Message(role="tool", content=(ToolResultPart(tool_call_id="gemini-call-1", tool_name="shot", output=ToolOutput(
            kind="content", value=(TextPart(text="here it is"), ImagePart(data=png, media_type="image/png")))),)),
    )
    server.add(w.stream(w.text("a window")))
    events(model(server), request(*history))
    parts = server.bodies[0]["contents"][2]["parts"]
    assert parts[0] == {"functionResponse": {"name": "shot", "response": {"output": "here it is"}}}
    assert parts[1] == {"inlineData": {"mime_type": "image/png", "data": base64.b64encode(png).decode()}}


def test_a_user_message_of_only_whitespace_is_rejected_before_any_request(server):
    with pytest.raises(ConfigurationError, match="whitespace"):
        model(server).stream(request(Message(role="user", content=(TextPart(text="  \n"),))))
    assert server.requests == []


def test_a_history_opening_with_the_model_gets_a_user_turn_first(server):
    server.add(w.stream(w.text("ok")))
    events(model(server), request(Message.assistant("Welcome!"), Message.user("hi")))
    assert [c["role"] for c in server.bodies[0]["contents"]] == ["user", "model", "user"]


# -- structured output -------------------------------------------------------------------


@dataclass
class City:
    name: str
    population: int


def test_structured_output_uses_response_json_schema(server):
    server.add(w.stream(w.text('{"name": "Rome", "population": 2800000}')))
    result = run_agent(model(server), "biggest city of Italy?", output_type=City)
    assert result.output == City(name="Rome", population=2800000)
    config = server.bodies[0]["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"]["properties"]["population"]["type"] == "integer"
    assert "tools" not in server.bodies[0]


def test_gemini_3_combines_the_response_schema_with_function_calling(server):
    server.add(w.stream(w.call("add", {"a": 1, "b": 2})), w.stream(w.text('{"name": "Sum", "population": 3}')))
    m = GeminiModel("gemini-3-pro-preview", api_key=KEY, base_url=server.url, retry=FAST)
    result = run_agent(m, "add 1 and 2", tools=[add], output_type=City)
    assert result.output == City(name="Sum", population=3)
    assert all(b["generationConfig"]["responseMimeType"] == "application/json" for b in server.bodies)


def test_before_gemini_3_a_response_schema_with_tools_is_refused_before_any_request(server):
    with pytest.raises(ConfigurationError, match="output_mode='tool'"):
        run_agent(model(server), "add 1 and 2", tools=[add], output_type=City)
    assert server.requests == []
    server.add(w.stream(w.call("add", {"a": 1, "b": 2})),
               w.stream(w.call("final_answer", {"name": "S", "population": 3})))
    result = run_agent(model(server, output_mode="tool"), "add 1 and 2", tools=[add], output_type=City)
    assert result.output == City(name="S", population=3)


def test_output_mode_tool_gets_the_output_through_a_function_call(server):
    server.add(w.stream(w.call("final_answer", {"name": "Bern", "population": 3})))
    result = run_agent(model(server, output_mode="tool"), "go", output_type=City)
    assert result.output == City(name="Bern", population=3)
    assert "responseJsonSchema" not in server.bodies[0].get("generationConfig", {})


# -- options -----------------------------------------------------------------------------


def test_settings_and_provider_options_are_sent_and_options_win(server):
    server.add(w.stream(w.text("ok")))
    settings = ModelSettings(temperature=0.2, top_p=0.9, max_tokens=64, stop=("END",), seed=7)
    events(model(server), request(settings=settings, provider_options={
        "temperature": 0.7, "cached_content": "cachedContents/abc", "top_k": 3}))
    body = server.bodies[0]
    assert body["generationConfig"] == {"temperature": 0.7, "topP": 0.9, "topK": 3, "maxOutputTokens": 64,
                                        "stopSequences": ["END"], "seed": 7}
    assert body["cachedContent"] == "cachedContents/abc"


def test_unknown_provider_options_are_rejected_before_any_request(server):
    with pytest.raises(ConfigurationError, match="GenerateContentConfig"):
        model(server).stream(request(provider_options={"no_such_field": 1}))
    assert server.requests == []


def test_missing_api_key_is_a_configuration_error(monkeypatch):
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError, match="GOOGLE_API_KEY"):
        GeminiModel(w.MODEL)


@pytest.mark.parametrize(("kw", "message"), [
    ({"base_url": "127.0.0.1:8080"}, "http\\(s\\) URL of the host root"),
    ({"api_key": 42}, "api_key must be a str or a callable"),
    ({"timeout": 0}, "timeout must be a positive number"),
    ({"output_mode": "text"}, "output_mode must be"),
])
def test_bad_constructor_arguments_say_what_to_pass(kw, message):
    kw.setdefault("api_key", KEY)
    with pytest.raises(ConfigurationError, match=message):
        GeminiModel(w.MODEL, **kw)


def test_the_key_comes_from_the_environment(server, monkeypatch):
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    server.add(w.stream(w.text("ok")))
    events(GeminiModel(w.MODEL, base_url=server.url), request())
    assert server.requests[0].headers["x-goog-api-key"] == KEY


def test_a_callable_api_key_is_asked_before_every_attempt():
    keys = iter(["key-1", "key-2"])
    with FakeServer(check=w.validator()) as server:
        server.add(w.error(503, "UNAVAILABLE", "try again"), w.stream(w.text("ok")))
        assert events(model(server, api_key=lambda: next(keys)), request())[-1] == FinishEvent("stop", "STOP")
    assert [r.headers["x-goog-api-key"] for r in server.requests] == ["key-1", "key-2"]


def test_a_failing_key_callable_sends_nothing(server):
    def broken() -> str:
        raise RuntimeError("vault down")

    with pytest.raises(AuthenticationError, match="vault down"):
        events(model(server, api_key=broken), request())
    assert server.requests == []


def test_get_model_reaches_the_adapter(server):
    m = get_model(f"google:{w.MODEL}", api_key=KEY, base_url=server.url, retry=FAST)
    assert isinstance(m, GeminiModel) and m.model_name == w.MODEL
    with pytest.raises(ConfigurationError, match="google:gemini-2.5-flash"):
        get_model("gemini-2.5-flash")


def test_without_google_genai_the_error_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "google.genai", None)  # makes `import google.genai` fail
    with pytest.raises(MissingDependencyError, match=r"\[gemini\]"):
        get_model(f"google:{w.MODEL}", api_key=KEY)


# -- errors and retries -------------------------------------------------------------------


def test_rate_limit_with_retry_info_is_retried_then_succeeds(server):
    retry_info = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0s"}]
    server.add(w.error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted", details=retry_info),
               w.stream(w.text("ok")))
    seen = []
    out = events(model(server, on_retry=seen.append), request())
    assert out[-1] == FinishEvent("stop", "STOP")
    assert isinstance(seen[0].error, RateLimitError) and seen[0].retry_after == 0.0


def test_rate_limit_exhausts_into_rate_limit_error(server):
    server.add(*[w.error(429, "RESOURCE_EXHAUSTED", "quota") for _ in range(3)])
    with pytest.raises(RateLimitError, match="giving up after 3 attempts") as info:
        events(model(server), request())
    assert info.value.status_code == 429 and info.value.provider == "google"


def test_a_daily_quota_used_up_is_not_retried(server):
    quota = [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
        {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
         "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]
    server.add(w.error(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota", details=quota))
    with pytest.raises(RateLimitError, match="current quota"):
        events(model(server), request())
    assert len(server.requests) == 1


@pytest.mark.parametrize(("code", "status"), [(500, "INTERNAL"), (503, "UNAVAILABLE"), (504, "DEADLINE_EXCEEDED")])
def test_server_errors_are_retried_as_provider_unavailable(server, code, status):
    server.add(w.error(code, status, "The model is overloaded."), w.stream(w.text("ok")))
    assert events(model(server), request())[-1] == FinishEvent("stop", "STOP")
    server.add(*[w.error(code, status, "The model is overloaded.") for _ in range(3)])
    with pytest.raises(ProviderUnavailableError, match="overloaded"):
        events(model(server), request())


@pytest.mark.parametrize(("code", "status"), [(401, "UNAUTHENTICATED"), (403, "PERMISSION_DENIED")])
def test_auth_errors_are_not_retried(server, code, status):
    server.add(w.error(code, status, "denied"))
    with pytest.raises(AuthenticationError):
        events(model(server), request())
    assert len(server.requests) == 1


def test_an_invalid_key_is_an_authentication_error(server):
    with pytest.raises(AuthenticationError, match="API key not valid"):
        events(model(server, api_key="wrong"), request())
    assert len(server.requests) == 1


def test_a_missing_key_header_is_refused_by_the_fake(server):
    from fakes.server import Recorded

    rejected = w.validate(Recorded("POST", f"/v1/models/{w.MODEL}:generateContent", {}, {}))
    assert rejected is not None and rejected.status == 403


def test_a_too_long_prompt_is_context_overflow(server):
    server.add(w.error(400, "INVALID_ARGUMENT",
                       "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."))
    with pytest.raises(ContextOverflowError):
        events(model(server), request())
    assert len(server.requests) == 1


def test_a_bad_request_is_a_provider_error_not_retried(server):
    server.add(w.error(400, "INVALID_ARGUMENT", "* GenerateContentRequest.model: unexpected model name format"))
    with pytest.raises(ProviderError) as info:
        events(model(server), request())
    assert type(info.value) is ProviderError and len(server.requests) == 1


def test_an_error_inside_the_stream_is_translated(server):
    server.add(Reply(events=[(None, {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}})]),
               w.stream(w.text("ok")))
    assert events(model(server), request())[-1] == FinishEvent("stop", "STOP")
    assert len(server.requests) == 2


def test_a_stream_cut_before_the_finish_is_retried_then_an_error(server):
    server.add(*[w.stream(w.text("partial"), finish=None) for _ in range(3)])
    with pytest.raises(ProviderUnavailableError, match="finishReason"):
        list(model(server).stream(request()))


def test_an_empty_stream_is_retried_then_provider_unavailable(server):
    server.add(*[Reply(events=[]) for _ in range(3)])
    with pytest.raises(ProviderUnavailableError, match="without any chunk"):
        events(model(server), request())
    assert len(server.requests) == 3


def test_a_chunk_that_is_not_json_is_retried(server):
    server.add(Reply(events=[(None, "{not json")]), w.stream(w.text("ok")))
    assert events(model(server), request())[-1] == FinishEvent("stop", "STOP")
    assert len(server.requests) == 2


def test_a_dropped_connection_mid_stream_is_an_error(server):
    server.add(w.stream(w.text("partial answer"), finish=None, end=[DROP]))
    with pytest.raises(ProviderUnavailableError):
        list(model(server, retry=RetryPolicy(max_retries=0)).stream(request()))


def test_a_server_slower_than_the_timeout_is_provider_unavailable(server):
    slow = w.stream(w.text("too late"))
    slow.hang = 30.0  # no headers before the client's timeout
    server.add(slow)
    with pytest.raises(ProviderUnavailableError, match="timed out"):
        events(model(server, timeout=0.5, retry=RetryPolicy(max_retries=0)), request())


def test_default_headers_reach_the_server(server):
    server.add(w.stream(w.text("ok")))
    events(model(server, default_headers={"x-team": "search"}), request())
    assert server.requests[0].headers["x-team"] == "search"
    assert server.requests[0].headers["x-goog-api-key"] == KEY


def test_an_unreachable_server_names_it():
    with FakeServer() as s:
        url = s.url
    with pytest.raises(ProviderUnavailableError, match=url.replace(".", r"\.")):
        events(GeminiModel(w.MODEL, api_key=KEY, base_url=url, retry=RetryPolicy(max_retries=0)), request())


# -- cancellation ------------------------------------------------------------------------


def test_cancel_ends_a_stream_that_sends_nothing_more(server):
    trickle = Trickle(b"\n", every=0.05, limit=120)  # blank lines: the SDK reads on, waiting for data
    server.add(Reply(events=[(None, w.stream(w.text("first")).events[0][1]), (None, trickle)]))
    cancel = CancelToken()
    got: list = []
    failure: list[BaseException] = []

    def consume() -> None:
        try:
            for e in model(server).stream(request(cancel=cancel)):
                got.append(e)
        except BaseException as exc:  # noqa: BLE001
            failure.append(exc)

    reader = threading.Thread(target=consume)
    reader.start()
    wait_for(lambda: got and trickle.sent > 0, 30, "the first chunk and a keep-alive")
    cancel.cancel("user left")
    reader.join(30)
    assert not reader.is_alive()
    assert isinstance(failure[0], CancelledError)
    wait_for(trickle.client_left.is_set, 30, "the client to hang up")


# -- live --------------------------------------------------------------------------------


@pytest.mark.live
@pytest.mark.skipif(not (os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")),
                    reason="live Gemini test: set GEMINI_API_KEY (or GOOGLE_API_KEY) to run it against the real API")
def test_live_gemini_calls_a_tool_and_answers():
    m = GeminiModel(os.environ.get("AGENTKIT_LIVE_GEMINI_MODEL", "gemini-2.5-flash"), retry=RetryPolicy(max_retries=2))
    result = run_agent(m, "Use the add tool to add 19 and 23, then tell me the sum.", tools=[add])
    calls = [p for msg in result.messages for p in msg.content if isinstance(p, ToolCallPart)]
    assert calls and calls[0].tool_name == "add" and calls[0].input_error is None
    assert "42" in result.text
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
