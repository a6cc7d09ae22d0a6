"""OpenAIResponsesModel over the real openai SDK against a loopback Responses API server.

The fake (tests/fakes/openai_responses_wire.py) keeps the server's state (stored
responses, items by id, encrypted reasoning) and enforces the Responses request rules,
so every test also checks that the adapter sends what the real API would accept.
"""

from __future__ import annotations

import base64
import json
import os

import pytest
from _tools import ADD_SPEC as ADD
from _tools import add
from fakes import openai_responses_wire as w
from fakes.server import FakeServer, Recorded, Trickle

from agentkit import (
    CancelledError,
    CancelToken,
    ConfigurationError,
    ContextOverflowError,
    FileEventStore,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    Session,
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
    OutputSpec,
    ReasoningDelta,
    ReasoningDone,
    RetryPolicy,
    TextDelta,
    ToolCallEvent,
    UsageEvent,
)
from agentkit.models.openai_responses import OpenAIResponsesModel

FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.01)


@pytest.fixture
def api():
    return w.ResponsesAPI()


@pytest.fixture
def server(api):
    with FakeServer(check=api.validate) as server:
        yield server


def model(server: FakeServer, **kw) -> OpenAIResponsesModel:
    kw.setdefault("retry", FAST)
    return OpenAIResponsesModel("gpt-5-mini", base_url=server.url + "/v1", **kw)


def req(*messages: Message, **kw) -> ModelRequest:
    return ModelRequest(messages=messages or (Message.user("hi"),), **kw)


def test_streams_text_usage_with_cached_and_reasoning_tokens_and_finish(server, api):
    server.add(api.answer(w.text("Hel", "lo"), usage_=w.usage(40, 12, cached=30, reasoning_=5, cache_write=4)))
    events = list(model(server).stream(req(system="be brief")))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo"]
    [usage] = [e.usage for e in events if isinstance(e, UsageEvent)]
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (40, 12, 52)
    assert (usage.cache_read_tokens, usage.cache_write_tokens, usage.reasoning_tokens) == (30, 4, 5)
    assert events[-1] == FinishEvent("stop", "completed")
    sent = server.requests[0]
    assert sent.path == "/v1/responses"
    assert sent.body["stream"] is True and sent.body["instructions"] == "be brief"
    assert sent.body["input"] == [{"role": "user", "content": "hi"}]


def test_whole_responses_without_streaming(server, api):
    server.add(api.answer(w.reasoning("Thinking."), w.text("Four."), usage_=w.usage(9, 3)))
    events = list(model(server, stream=False).stream(req()))
    assert "stream" not in server.requests[0].body
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Four."]
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["Thinking."]
    assert events[-1] == FinishEvent("stop", "completed")


def test_function_tools_calls_and_outputs_answer_them_by_call_id(server, api):
    server.add(
        api.answer(w.call("call_1", "add", {"a": 2, "b": 3}), w.call("call_2", "add", {"a": 1, "b": 1})),
        api.answer(w.text("5 and 2")),
    )
    result = run_agent(model(server), "add 2+3 and 1+1", tools=[add])
    assert result.text == "5 and 2"
    first, second = server.bodies
    [tool] = first["tools"]
    assert (tool["type"], tool["name"], tool["strict"]) == ("function", "add", False)
    assert tool["parameters"]["properties"] == dict(ADD.input_schema)["properties"]
    assert first["tool_choice"] == "auto"
    kinds = [(i.get("type"), i.get("call_id")) for i in second["input"]]
    assert kinds == [(None, None), ("function_call", "call_1"), ("function_call", "call_2"),
                     ("function_call_output", "call_1"), ("function_call_output", "call_2")]
    assert second["input"][3]["output"] == "5"
    assert json.loads(second["input"][1]["arguments"]) == {"a": 2, "b": 3}


def test_the_fake_rejects_an_output_that_answers_no_call(server, api):
    server.add(api.answer(w.text("never")))
    orphan = Message(role="tool", content=(ToolResultPart(tool_call_id="call_9", tool_name="add",
                                                          output=ToolOutput.text("5")),))
    with pytest.raises(Exception, match="No tool call found for function call output with call_id call_9"):
        list(model(server).stream(req(Message.user("hi"), orphan)))


def test_tool_events_streamed_and_forced_tool_choice(server, api):
    server.add(api.answer(w.call("call_7", "add", '{"a": 1,', pieces=1)))
    events = list(model(server).stream(req(tools=(ADD,), tool_choice="add")))
    [call] = [e for e in events if isinstance(e, ToolCallEvent)]
    assert call.tool_call_id == "call_7" and call.input_error is not None
    assert server.bodies[0]["tool_choice"] == {"type": "function", "name": "add"}
    assert events[-1].reason == "tool-calls"


def test_reasoning_items_are_carried_to_the_next_turn_with_their_followers_ids(server, api):
    server.add(
        api.answer(w.reasoning("Plan: add.", "Then answer."), w.call("call_1", "add", {"a": 2, "b": 3})),
        api.answer(w.reasoning("Got 5."), w.text("It is 5.")),
        api.answer(w.text("Bye.")),
    )
    session = Session(model=model(server, reasoning_summary="auto"), tools=[add])
    deltas: list[str] = []
    session.ask("add 2 and 3", on_reasoning=deltas.append)
    assert "".join(deltas) == "Plan: add.\n\nThen answer.Got 5."
    session.ask("thanks")
    third = server.bodies[2]["input"]
    kinds = [i.get("type") or i["role"] for i in third]
    assert kinds == ["user", "reasoning", "function_call", "function_call_output", "reasoning", "message", "user"]
    assert third[1] == {"type": "reasoning", "id": "rs_1_0", "summary": [
        {"type": "summary_text", "text": "Plan: add."}, {"type": "summary_text", "text": "Then answer."}]}
    assert third[2]["id"] == "fc_1_1" and third[5]["id"] == "msg_2_1"
    assert server.bodies[0]["reasoning"] == {"summary": "auto"}


def test_the_fake_rejects_a_follower_sent_without_its_reasoning(server, api):
    server.add(api.answer(w.reasoning("x"), w.call("call_1", "add", {"a": 1, "b": 2})))
    list(model(server).stream(req()))
    # the function call's id without the reasoning item before it: what the real API refuses
    body = {"model": "gpt-5-mini", "input": [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "id": "fc_1_1", "call_id": "call_1", "name": "add", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "3"}]}
    rejected = api.validate(Recorded("POST", "/v1/responses", {}, body))
    assert rejected is not None and rejected.status == 400
    assert "without its required 'reasoning' item: 'rs_1_0'" in rejected.json["error"]["message"]


def test_reasoning_survives_a_stored_session(server, api, tmp_path):
    server.add(api.answer(w.reasoning("Thought."), w.text("One.")), api.answer(w.text("Two.")))
    store = FileEventStore(tmp_path)
    Session(model=model(server), store=store, session_id="s1").ask("first")
    reopened = Session(model=model(server), store=FileEventStore(tmp_path), session_id="s1")
    reopened.ask("second")
    items = server.bodies[1]["input"]
    assert [i.get("type") or i["role"] for i in items] == ["user", "reasoning", "message", "user"]
    assert items[1]["id"] == "rs_1_0" and items[2]["id"] == "msg_1_1"


def test_store_false_asks_for_and_carries_encrypted_reasoning(server, api):
    server.add(api.answer(w.reasoning("Secret plan."), w.call("call_1", "add", {"a": 1, "b": 2})),
               api.answer(w.text("3")))
    result = run_agent(model(server, store=False), "1+2", tools=[add])
    assert result.text == "3"
    first, second = server.bodies
    assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
    [item] = [i for i in second["input"] if i.get("type") == "reasoning"]
    assert item["encrypted_content"] == "gAAAAB-sealed-rs_1_0"
    # no ids of items the server did not keep
    [fc] = [i for i in second["input"] if i.get("type") == "function_call"]
    assert "id" not in fc


def test_store_false_leaves_out_reasoning_the_server_kept_only_by_id(server, api):
    server.add(api.answer(w.reasoning("x"), w.text("a")), api.answer(w.text("b")))
    history = list(model(server).stream(req()))  # stored, without encrypted content
    part = next(e.part for e in history if isinstance(e, ReasoningDone) and e.part.text)
    again = (Message.user("hi"), Message(role="assistant", content=(part, TextPart(text="a"))), Message.user("more"))
    unstored = model(server, store=False, retry=RetryPolicy(max_retries=0))
    # what the API refuses: the item by id alone, under store=False
    body = {**unstored.build_params(req(*again)), "input": [
        {"role": "user", "content": "hi"}, {"type": "reasoning", "id": "rs_1_0", "summary": []},
        {"role": "assistant", "content": "a"}]}
    rejected = api.validate(Recorded("POST", "/v1/responses", {}, body))
    assert rejected is not None and "Items are not persisted when `store` is set to false" in json.dumps(rejected.json)
    list(unstored.stream(req(*again)))
    assert [i.get("type") or i["role"] for i in server.bodies[1]["input"]] == ["user", "assistant", "user"]


def test_reasoning_only_turns_are_not_sent_back(server, api):
    server.add(api.answer(w.reasoning("Thinking a lot"), status="incomplete", incomplete="max_output_tokens"),
               api.answer(w.text("ok")))
    events = list(model(server).stream(req()))
    assert events[-1] == FinishEvent("length", "max_output_tokens")
    parts = tuple(e.part for e in events if isinstance(e, ReasoningDone))
    list(model(server).stream(req(Message.user("hi"), Message(role="assistant", content=parts), Message.user("go on"))))
    assert [i.get("type") or i["role"] for i in server.bodies[1]["input"]] == ["user", "user"]


def test_structured_output_through_text_format(server, api):
    server.add(api.answer(w.text('{"city": "Paris"}')))

    from pydantic import BaseModel

    class City(BaseModel):
        city: str

    result = run_agent(model(server), "capital of France?", output_type=City)
    assert result.output == City(city="Paris")
    fmt = server.bodies[0]["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["name"] and fmt["strict"] is True
    assert fmt["schema"]["properties"] == {"city": {"title": "City", "type": "string"}}


def test_server_state_sends_only_new_items_after_previous_response_id(server, api):
    server.add(api.answer(w.call("call_1", "add", {"a": 2, "b": 3})), api.answer(w.text("5")),
               api.answer(w.text("bye")))
    session = Session(model=model(server, server_state=True), tools=[add])
    assert session.ask("add 2 and 3").text == "5"
    session.ask("thanks")
    first, second, third = server.bodies
    assert "previous_response_id" not in first
    assert second["previous_response_id"] == "resp_1"
    assert second["input"] == [{"type": "function_call_output", "call_id": "call_1", "output": "5"}]
    assert third["previous_response_id"] == "resp_2"
    assert third["input"] == [{"role": "user", "content": "thanks"}]


def test_server_state_falls_back_to_the_whole_history_when_the_server_forgot(server, api):
    server.add(api.answer(w.text("one")), api.answer(w.text("two")))
    session = Session(model=model(server, server_state=True, retry=RetryPolicy(max_retries=0)))
    session.ask("first")
    api.forget("resp_1")
    assert session.ask("second").text == "two"
    assert len(server.requests) == 3
    refused, resent = server.bodies[1:]
    assert refused["previous_response_id"] == "resp_1"
    assert "previous_response_id" not in resent
    assert [i["role"] for i in resent["input"]] == ["user", "assistant", "user"]


def test_server_state_continues_a_session_reopened_from_its_store(server, api, tmp_path):
    server.add(api.answer(w.text("one")), api.answer(w.text("two")))
    Session(model=model(server, server_state=True), store=FileEventStore(tmp_path), session_id="s").ask("first")
    # another process (a new model and session object) continues from the stored receipt
    reopened = Session(model=model(server, server_state=True), store=FileEventStore(tmp_path), session_id="s")
    assert reopened.ask("second").text == "two"
    assert server.bodies[1]["previous_response_id"] == "resp_1"
    assert server.bodies[1]["input"] == [{"role": "user", "content": "second"}]


def test_server_state_resends_nothing_on_other_errors(server, api):
    server.add(api.answer(w.text("one")), w.error(400, "Invalid value for 'temperature'.", param="temperature"))
    session = Session(model=model(server, server_state=True))
    session.ask("first")
    with pytest.raises(ProviderError, match="temperature"):
        session.ask("second")
    assert len(server.requests) == 2 and server.bodies[1]["previous_response_id"] == "resp_1"


def test_server_state_sends_the_compacted_history_after_a_compaction(server, api):
    server.add(api.answer(w.text("one")), api.answer(w.text("two")), api.answer(w.text("three")))
    session = Session(model=model(server, server_state=True))
    session.ask("first")
    session.ask("second")
    session.compact(keep_last=2, compactor=lambda messages, reason, cancel: "SUMMARY of the first exchange")
    session.ask("third")
    third = server.bodies[2]
    assert "previous_response_id" not in third  # the server's copy still holds the uncompacted turns
    sent = json.dumps(third["input"])
    assert "SUMMARY of the first exchange" in sent and '"first"' not in sent


def test_server_state_resends_the_history_after_it_changed(server, api):
    server.add(api.answer(w.text("one")), api.answer(w.text("two")))
    m = model(server, server_state=True)
    events = list(m.stream(req(Message.user("first"))))
    parts = (TextPart(text="one"), *(e.part for e in events if isinstance(e, ReasoningDone)))
    edited = (Message.user("first, edited"), Message(role="assistant", content=parts), Message.user("second"))
    list(m.stream(req(*edited)))
    assert "previous_response_id" not in server.bodies[1]


def test_server_state_needs_store():
    with pytest.raises(ConfigurationError, match="server_state=True .* store=False"):
        OpenAIResponsesModel("gpt-5-mini", api_key="k", server_state=True, store=False)


def test_settings_the_api_lacks_are_refused_before_any_request(server):
    for settings in (ModelSettings(stop=("x",)), ModelSettings(seed=0), ModelSettings(reasoning_budget=2000)):
        with pytest.raises(ConfigurationError, match="Responses API has no such setting"):
            list(model(server).stream(req(settings=settings)))
    assert server.requests == []


def test_effort_and_max_tokens_and_options(server, api):
    server.add(api.answer(w.text("ok")))
    settings = ModelSettings(reasoning_effort="low", max_tokens=64, temperature=0.5)
    output = OutputSpec(name="answer", schema={"type": "object", "properties": {}}, mode="json-schema")
    list(model(server).stream(req(settings=settings, output=output, provider_options={"text": {"verbosity": "low"}})))
    body = server.bodies[0]
    assert body["reasoning"] == {"effort": "low"}
    assert (body["max_output_tokens"], body["temperature"]) == (64, 0.5)
    assert body["text"]["verbosity"] == "low" and body["text"]["format"]["name"] == "answer"


def test_errors_map_through_the_seam(server, api):
    server.add(w.error(400, "Your input exceeds the context window of this model.",
                       code="context_length_exceeded"))
    with pytest.raises(ContextOverflowError):
        list(model(server).stream(req()))
    server.add(*[w.error(429, "Rate limit reached", type_="requests", code="rate_limit_exceeded")] * 3)
    with pytest.raises(RateLimitError):
        list(model(server).stream(req()))


def test_a_failed_or_cut_stream_is_retried_before_any_event(server, api):
    server.add(api.answer(fail=("server_error", "The server had an error")), api.answer(w.text("fine")))
    events = list(model(server).stream(req()))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["fine"]
    server.add(*[api.answer(cut=True)] * 3)
    with pytest.raises(ProviderUnavailableError, match="before response.completed"):
        list(model(server).stream(req()))


def test_error_events_and_filtered_answers(server, api):
    server.add(api.answer(error_event=("context_length_exceeded", "Your input exceeds the context window.")))
    with pytest.raises(ContextOverflowError, match="in stream"):
        list(model(server).stream(req()))
    server.add(api.answer(w.text("par"), status="incomplete", incomplete="content_filter"))
    events = list(model(server).stream(req()))
    assert events[-1] == FinishEvent("content-filter", "content_filter")


def test_cancel_ends_a_stream_that_only_sends_keepalives(server, api):
    trickle = Trickle(b": keepalive\n\n")
    server.add(api.answer(w.text("first"), w.text("never"), hold=trickle))
    token = CancelToken()
    events = model(server, timeout=120).stream(req(cancel=token))
    for event in events:
        if isinstance(event, TextDelta):
            break
    token.cancel()
    with pytest.raises(CancelledError):
        next(events)
    assert trickle.client_left.wait(30), "the server should see the connection closed"


def test_a_callable_api_key_is_asked_for_each_request(server, api):
    keys = iter(["key-1", "key-2"])
    server.add(api.answer(w.text("a")), api.answer(w.text("b")))
    m = OpenAIResponsesModel("gpt-5-mini", base_url=server.url + "/v1", api_key=lambda: next(keys))
    list(m.stream(req()))
    list(m.stream(req()))
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer key-1", "Bearer key-2"]


def test_images_files_system_messages_and_tool_images_as_input_items(server, api):
    server.add(api.answer(w.text("seen")))
    png = b"\x89PNG fake"
    user = Message(role="user", content=(TextPart(text="look"), ImagePart(data=png, media_type="image/png"),
                                         FilePart(data=b"%PDF", media_type="application/pdf", filename="a.pdf")))
    call = Message(role="assistant", content=(ToolCallPart(tool_call_id="c1", tool_name="shot", input={}),))
    shot = ToolOutput(kind="content", value=(TextPart(text="here"), ImagePart(url="https://x.test/i.png")))
    result = Message(role="tool", content=(ToolResultPart(tool_call_id="c1", tool_name="shot", output=shot),))
    list(model(server).stream(req(user, call, result, Message.system("be terse"))))
    items = server.bodies[0]["input"]
    assert items[0]["content"] == [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": "data:image/png;base64," + base64.b64encode(png).decode(),
         "detail": "auto"},
        {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERg==", "filename": "a.pdf"},
    ]
    assert items[2]["output"] == [{"type": "input_text", "text": "here"},
                                  {"type": "input_image", "image_url": "https://x.test/i.png", "detail": "auto"}]
    assert items[3] == {"role": "system", "content": "be terse"}


def test_prompt_cache_key_is_the_session_id(server, api):
    server.add(api.answer(w.text("a")), api.answer(w.text("b")))
    list(model(server, cache=True).stream(req(session_id="sess-9")))
    list(model(server).stream(req(session_id="sess-9")))  # a base_url: not sent unless cache=True
    assert server.bodies[0]["prompt_cache_key"] == "sess-9"
    assert "prompt_cache_key" not in server.bodies[1]


def test_the_registry_builds_it():
    m = get_model("openai-responses:gpt-5-mini", api_key="k", server_state=True)
    assert isinstance(m, OpenAIResponsesModel) and m.server_state and m.model_name == "gpt-5-mini"


def test_other_providers_reasoning_is_not_sent(server, api):
    server.add(api.answer(w.text("ok")))
    foreign = Message(role="assistant", content=(ReasoningPart(text="t", signature="anthropic-sig"),
                                                 TextPart(text="hello")))
    list(model(server).stream(req(Message.user("a"), foreign, Message.user("b"))))
    assert [i.get("type") or i["role"] for i in server.bodies[0]["input"]] == ["user", "assistant", "user"]


def test_a_conversation_moved_to_anthropic_sends_no_responses_reasoning(server, api, anthropic_server):
    from fakes import anthropic_wire as aw

    from agentkit.models.anthropic import AnthropicModel

    server.add(api.answer(w.reasoning("Hm."), w.text("One.")))
    anthropic_server.add(aw.stream(aw.text("Two.")))
    session = Session(model=model(server))
    session.ask("first")
    claude = AnthropicModel("claude-sonnet-4-5", base_url=anthropic_server.url, api_key="k", retry=FAST)
    assert session.ask("second", model=claude).text == "Two."
    assistant = anthropic_server.bodies[0]["messages"][1]
    assert assistant == {"role": "assistant", "content": [{"type": "text", "text": "One."}]}


def test_langchain_gets_responses_reasoning_as_a_plain_reasoning_block(server, api):
    from agentkit.adapters.langchain import messages_from_langchain, messages_to_langchain

    server.add(api.answer(w.reasoning("Hm."), w.text("One.")))
    parts = tuple(e.part for e in model(server).stream(req()) if isinstance(e, ReasoningDone))
    history = (Message.user("hi"), Message(role="assistant", content=(*parts, TextPart(text="One."))))
    ai = messages_to_langchain(history)[1]
    # not Anthropic's signed "thinking" block: ChatAnthropic would send it back and be refused
    assert [b["type"] for b in ai.content] == ["reasoning", "reasoning", "text"]
    assert messages_from_langchain(messages_to_langchain(history)) == list(history)


@pytest.mark.live
def test_live_responses_loop_with_a_tool_and_server_state():
    if not os.environ.get("OPENAI_API_KEY"):
        pytest.skip("OPENAI_API_KEY is not set: the live Responses API test needs a real OpenAI key")
    m = OpenAIResponsesModel(os.environ.get("AGENTKIT_LIVE_RESPONSES_MODEL", "gpt-5-mini"), server_state=True,
                             reasoning_summary="auto")
    session = Session(model=m, tools=[add])
    result = session.ask("Use the add tool to add 19 and 23, then answer with the sum.")
    assert "42" in result.text
    assert session.ask("Now add 1 to that, with the tool.").usage.input_tokens > 0
