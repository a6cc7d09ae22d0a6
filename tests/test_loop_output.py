"""Structured output (``output_type=``) through the final-answer tool (ScriptedModel,
FunctionModel) and both native mechanisms through the real openai/anthropic SDK
adapters against the loopback fakes, which enforce the real APIs' request rules."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

import pytest
from fakes import anthropic_wire as aw
from fakes import openai_wire as ow
from fakes.server import FakeServer
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from agentkit import (
    ConfigurationError,
    FunctionModel,
    OutputValidationError,
    ScriptedModel,
    Session,
    ToolCall,
    run_agent,
    run_agent_stream,
    tool,
)
from agentkit.loop._output import plan_for, strictify
from agentkit.models import RetryPolicy
from agentkit.models.anthropic import AnthropicModel
from agentkit.models.openai import OpenAIChatModel
from agentkit.streaming import GenerationEndEvent


class City(BaseModel):
    """A city and its population."""

    name: str
    population: int


@dataclass
class Point:
    x: int
    y: int


class Movie(TypedDict):
    title: str
    year: int


class Loose(BaseModel):
    name: str
    note: Optional[str] = None


def answer(value: object) -> ToolCall:
    return ToolCall(name="final_answer", input=value)  # type: ignore[arg-type]


# -- every kind of output type through the final-answer tool ---------------------------


@pytest.mark.parametrize(
    ("output_type", "given", "expected"),
    [
        (City, {"name": "Paris", "population": 2102650}, City(name="Paris", population=2102650)),
        (Point, {"x": 1, "y": 2}, Point(1, 2)),
        (Movie, {"title": "Alien", "year": 1979}, {"title": "Alien", "year": 1979}),
        (int, {"response": 42}, 42),
        (list[str], {"response": ["a", "b"]}, ["a", "b"]),
        (City | Point, {"response": {"x": 3, "y": 4}}, Point(3, 4)),
    ],
)
def test_every_kind_of_output_type_is_validated_into_result_output(output_type, given, expected):
    model = ScriptedModel([answer(given)])
    result = run_agent(model, "go", output_type=output_type)
    assert result.output == expected
    assert type(result.output) is type(expected)
    assert result.finish_reason == "stop"
    request = model.requests[0]
    assert request.output is not None and request.output.mode == "tool"
    assert [t.name for t in request.tools] == ["final_answer"]
    assert request.tools[0].input_schema["type"] == "object"


def test_without_output_type_there_is_no_output_and_no_extra_tool():
    model = ScriptedModel(["plain"])
    result = run_agent(model, "go")
    assert result.output is None
    assert model.requests[0].output is None and model.requests[0].tools == ()


def test_a_non_object_type_is_wrapped_in_an_object_schema_and_unwrapped():
    plan = plan_for(list[int])
    assert plan.wrapped
    assert plan.spec.schema == {
        "type": "object",
        "properties": {"response": {"type": "array", "items": {"type": "integer"}}},
        "required": ["response"],
        "additionalProperties": False,
    }
    assert plan.parse_input({"response": [1, "2"]}) == ([1, 2], None)
    value, errors = plan.parse_input({"answer": [1]})
    assert value is None and "'response'" in (errors or "")


def test_nested_models_keep_their_defs_when_wrapped():
    class Crew(BaseModel):
        members: list[City]

    plan = plan_for(list[Crew])
    assert "$defs" in plan.spec.schema and "Crew" in plan.spec.schema["$defs"]
    value, errors = plan.parse_input({"response": [{"members": [{"name": "a", "population": 1}]}]})
    assert errors is None and value[0].members[0].name == "a"


def test_strict_mode_is_claimed_only_for_schemas_that_meet_its_rules():
    assert plan_for(City).spec.strict
    assert plan_for(Point).spec.strict
    assert not plan_for(Loose).spec.strict  # an optional field is not required
    assert not plan_for(dict[str, int]).spec.strict  # an open object
    schema, ok = strictify({"type": "object", "properties": {"a": {"type": "object", "properties": {}}},
                            "required": ["a"]})
    assert ok and schema["properties"]["a"]["additionalProperties"] is False
    assert schema["additionalProperties"] is False


def test_a_type_pydantic_cannot_validate_is_a_configuration_error_before_any_call():
    class Opaque:
        pass

    model = ScriptedModel(["x"])
    with pytest.raises(ConfigurationError, match="output_type Opaque cannot be validated"):
        run_agent(model, "go", output_type=Opaque)
    with pytest.raises(ConfigurationError, match="output_type must be a type"):
        run_agent(model, "go", output_type="City")
    assert model.requests == []


def test_a_user_tool_named_like_the_output_tool_is_a_configuration_error():
    @tool
    def final_answer(x: int) -> int:
        """Clash."""
        return x

    with pytest.raises(ConfigurationError, match="'final_answer'"):
        run_agent(ScriptedModel(["x"]), "go", tools=[final_answer], output_type=int)


# -- retries ---------------------------------------------------------------------------


def test_an_invalid_output_goes_back_with_the_errors_then_a_valid_one_is_accepted():
    model = ScriptedModel([answer({"name": "Paris", "population": "lots"}),
                           answer({"name": "Paris", "population": 2})])
    result = run_agent(model, "go", output_type=City, max_validation_retries=1)
    assert result.output == City(name="Paris", population=2)
    # the model read an error result naming the field and the problem
    feedback = model.requests[1].messages[-1].content[0]
    assert feedback.output.is_error
    assert "population" in feedback.output.as_text() and "integer" in feedback.output.as_text()
    assert [r.is_error for r in result.tool_calls] == [True, False]


def test_retries_exhausted_raise_output_validation_error_with_the_raw_output():
    model = ScriptedModel([answer({"name": "Paris"}), answer({"name": "Rome", "population": "x"})])
    with pytest.raises(OutputValidationError) as info:
        run_agent(model, "go", output_type=City, max_validation_retries=1)
    err = info.value
    assert err.raw == {"name": "Rome", "population": "x"}
    assert "population" in err.errors and err.attempts == 2
    assert "after 2 attempt(s)" in str(err)


def test_a_text_answer_instead_of_the_output_tool_is_sent_back():
    model = ScriptedModel(["I think 42", answer({"response": 42})])
    result = run_agent(model, "go", output_type=int)
    assert result.output == 42
    assert "final_answer" in model.requests[1].messages[-1].text


def test_text_only_answers_exhaust_the_retries_with_the_text_as_raw_output():
    with pytest.raises(OutputValidationError) as info:
        run_agent(ScriptedModel(["no", "still no"]), "go", output_type=int, max_validation_retries=1)
    assert info.value.raw == "still no"


def test_validate_completion_and_output_validation_share_one_retry_count():
    seen: list[object] = []

    def check(result):
        seen.append(result.output)
        return None if result.output == 2 else "not two"

    model = ScriptedModel([answer({"response": "x"}), answer({"response": 1}), answer({"response": 2})])
    result = run_agent(model, "go", output_type=int, validate_completion=check, max_validation_retries=2)
    assert result.output == 2 and seen == [1, 2]
    model = ScriptedModel([answer({"response": "x"}), answer({"response": 1})])
    with pytest.raises(Exception, match="rejected the answer"):
        run_agent(model, "go", output_type=int, validate_completion=check, max_validation_retries=1)


# -- tools first, then the answer ------------------------------------------------------


def test_the_model_may_call_tools_first_and_the_output_tool_ends_the_generation():
    @tool
    def lookup(city: str) -> int:
        """Population of a city."""
        return {"Paris": 2102650}[city]

    def reply(request):
        results = [p for m in request.messages if m.role == "tool" for p in m.content]
        if not results:
            return ToolCall(name="lookup", input={"city": "Paris"})
        return answer({"name": "Paris", "population": results[-1].output.value})

    result = run_agent(FunctionModel(reply), "go", tools=[lookup], output_type=City)
    assert result.output == City(name="Paris", population=2102650)
    assert [r.tool_name for r in result.tool_calls] == ["lookup", "final_answer"]
    assert len(result.steps) == 2


def test_tools_and_the_answer_in_one_message_run_the_tools_and_end():
    ran = []

    @tool
    def note(text: str) -> str:
        """Write a note."""
        ran.append(text)
        return "ok"

    model = ScriptedModel([[ToolCall(name="note", input={"text": "hi"}), answer({"response": 3})]])
    result = run_agent(model, "go", tools=[note], output_type=int)
    assert result.output == 3 and ran == ["hi"] and len(result.steps) == 1


def test_the_output_tool_passes_no_user_hook_and_no_approval():
    from agentkit import ApprovalPolicy, Hooks, ToolDecision

    blocked = []

    def block_all(call, ctx):
        blocked.append(call.tool_name)
        return ToolDecision.block("no tools")

    result = run_agent(ScriptedModel([answer({"response": 1})]), "go", output_type=int,
                       hooks=Hooks(before_tool_call=block_all), approval=ApprovalPolicy(mode="ask-all"))
    assert result.output == 1 and blocked == []


def test_max_steps_before_an_answer_leaves_output_none():
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    result = run_agent(FunctionModel(lambda r: ToolCall(name="ping")), "go", tools=[ping],
                       output_type=int, max_steps=2)
    assert result.finish_reason == "max-steps" and result.output is None


# -- front doors -----------------------------------------------------------------------


def test_session_default_and_generate_and_ask_overrides():
    model = ScriptedModel([answer({"response": 1}), answer({"x": 1, "y": 2}), "plain"])
    with Session(model, output_type=int) as session:
        assert session.ask("one").output == 1
        assert session.ask("two", output_type=Point).output == Point(1, 2)
        plain = session.ask("three", output_type=None)
        assert plain.output is None and plain.text == "plain"
    # the log holds the conversation, not the output object
    assert model.requests[2].output is None


def test_a_stream_ends_with_the_output_in_its_result():
    stream = run_agent_stream(ScriptedModel([answer({"name": "Oslo", "population": 700000})]), "go",
                              output_type=City)
    events = list(stream)
    end = events[-1]
    assert isinstance(end, GenerationEndEvent)
    assert end.result is not None and end.result.output == City(name="Oslo", population=700000)
    assert stream.result.output == City(name="Oslo", population=700000)
    assert end.to_dict()["result"]["output"] == {"name": "Oslo", "population": 700000}
    json.dumps(end.to_dict())


# -- OpenAI: response_format json_schema over the real SDK -----------------------------

FAST = RetryPolicy(max_retries=0)


def _openai(server: FakeServer, **kwargs) -> OpenAIChatModel:
    return OpenAIChatModel(ow.MODEL, api_key="k", base_url=server.url + "/v1", retry=FAST, **kwargs)


def test_openai_sends_a_strict_json_schema_response_format_and_reads_the_json_text(openai_server):
    openai_server.add(ow.text_stream('{"name": "Par', 'is", "population": 2102650}'))
    result = run_agent(_openai(openai_server), "Biggest French city?", output_type=City)
    assert result.output == City(name="Paris", population=2102650)
    body = openai_server.bodies[0]
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "City" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["additionalProperties"] is False
    assert "tools" not in body  # no output tool in json-schema mode


def test_openai_sends_strict_false_for_a_schema_strict_mode_cannot_take(openai_server):
    openai_server.add(ow.text_stream('{"name": "x"}'))
    result = run_agent(_openai(openai_server, stream=True), "go", output_type=Loose)
    assert result.output == Loose(name="x")
    assert openai_server.bodies[0]["response_format"]["json_schema"]["strict"] is False


def test_openai_wraps_a_plain_type_and_unwraps_it(openai_server):
    openai_server.add(ow.completion('{"response": ["a", "b"]}'))
    result = run_agent(_openai(openai_server, stream=False), "go", output_type=list[str])
    assert result.output == ["a", "b"]
    schema = openai_server.bodies[0]["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["response"]


def test_openai_invalid_json_goes_back_as_a_user_message_then_succeeds(openai_server):
    openai_server.add(ow.text_stream('{"name": "Paris", "population": "many"}'),
                      ow.text_stream('{"name": "Paris", "population": 2}'))
    result = run_agent(_openai(openai_server), "go", output_type=City)
    assert result.output == City(name="Paris", population=2)
    retry = openai_server.bodies[1]["messages"]
    assert retry[-2]["role"] == "assistant" and retry[-1]["role"] == "user"
    assert "population" in retry[-1]["content"] and "JSON" in retry[-1]["content"]


def test_openai_exhausted_retries_raise_with_the_raw_text(openai_server):
    openai_server.add(ow.text_stream("not json"), ow.text_stream("{still not"))
    with pytest.raises(OutputValidationError) as info:
        run_agent(_openai(openai_server), "go", output_type=City, max_validation_retries=1)
    assert info.value.raw == "{still not" and "Invalid JSON" in info.value.errors


def test_openai_tools_then_json_answer(openai_server):
    @tool
    def lookup(city: str) -> int:
        """Population of a city."""
        return 7

    openai_server.add(ow.tool_stream([("call_1", "lookup", ['{"city": "Oslo"}'])]),
                      ow.text_stream('{"name": "Oslo", "population": 7}'))
    result = run_agent(_openai(openai_server), "go", tools=[lookup], output_type=City)
    assert result.output == City(name="Oslo", population=7)
    assert all("response_format" in b for b in openai_server.bodies)


def test_the_openai_fake_rejects_what_the_real_api_rejects(openai_server):
    import openai

    client = openai.OpenAI(api_key="k", base_url=openai_server.url + "/v1", max_retries=0)
    bad = {"type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": {
        "type": "object", "properties": {"a": {"type": "string"}}, "required": []}}}
    with pytest.raises(openai.BadRequestError, match="required"):
        client.chat.completions.create(model=ow.MODEL, messages=[{"role": "user", "content": "x"}],
                                       response_format=bad)
    bad["json_schema"]["schema"] = {"type": "object", "properties": {}, "required": []}
    with pytest.raises(openai.BadRequestError, match="additionalProperties"):
        client.chat.completions.create(model=ow.MODEL, messages=[{"role": "user", "content": "x"}],
                                       response_format=bad)


def test_openai_tool_mode_output_with_broken_json_arguments_is_retried(openai_server):
    openai_server.add(ow.tool_stream([("call_1", "final_answer", ['{"response": '])]),
                      ow.tool_stream([("call_2", "final_answer", ['{"response": 5}'])]))
    result = run_agent(_openai(openai_server, output_mode="tool"), "go", output_type=int)
    assert result.output == 5
    tool_message = openai_server.bodies[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "not valid JSON" in tool_message["content"]


def test_openai_tool_mode_for_servers_without_json_schema(openai_server):
    openai_server.add(ow.tool_stream([("call_1", "final_answer", ['{"response": 9}'])]))
    result = run_agent(_openai(openai_server, output_mode="tool"), "go", output_type=int)
    assert result.output == 9
    body = openai_server.bodies[0]
    assert "response_format" not in body
    assert [t["function"]["name"] for t in body["tools"]] == ["final_answer"]


# -- Anthropic: a forced tool over the real SDK ----------------------------------------


def _anthropic(server: FakeServer) -> AnthropicModel:
    return AnthropicModel(aw.MODEL, api_key="k", base_url=server.url, retry=FAST)


def test_anthropic_forces_the_output_tool_and_reads_its_input(anthropic_server):
    anthropic_server.add(aw.stream(aw.tool_use("toolu_1", "final_answer",
                                               ['{"name": "Rome", ', '"population": 2800000}'])))
    result = run_agent(_anthropic(anthropic_server), "go", output_type=City)
    assert result.output == City(name="Rome", population=2800000)
    body = anthropic_server.bodies[0]
    assert body["tool_choice"] == {"type": "tool", "name": "final_answer"}
    assert body["tools"][0]["name"] == "final_answer"
    assert body["tools"][0]["input_schema"]["properties"]["population"]["type"] == "integer"


def test_anthropic_with_user_tools_requires_a_tool_call_and_ends_with_the_output(anthropic_server):
    @tool
    def lookup(city: str) -> int:
        """Population of a city."""
        return 3

    anthropic_server.add(
        aw.stream(aw.tool_use("toolu_1", "lookup", ['{"city": "Bern"}'])),
        aw.stream(aw.tool_use("toolu_2", "final_answer", ['{"name": "Bern", "population": 3}'])),
    )
    result = run_agent(_anthropic(anthropic_server), "go", tools=[lookup], output_type=City)
    assert result.output == City(name="Bern", population=3)
    assert [b["tool_choice"] for b in anthropic_server.bodies] == [{"type": "any"}, {"type": "any"}]


def test_anthropic_invalid_output_goes_back_as_a_tool_error_then_succeeds(anthropic_server):
    anthropic_server.add(
        aw.stream(aw.tool_use("toolu_1", "final_answer", ['{"response": "x"}'])),
        aw.stream(aw.tool_use("toolu_2", "final_answer", ['{"response": 4}'])),
    )
    result = run_agent(_anthropic(anthropic_server), "go", output_type=int)
    assert result.output == 4
    last = anthropic_server.bodies[1]["messages"][-1]["content"][0]
    assert last["type"] == "tool_result" and last["is_error"] is True
    assert "valid integer" in json.dumps(last["content"])


def test_anthropic_with_thinking_does_not_force_and_the_fake_would_refuse_forcing(anthropic_server):
    from agentkit.models import ModelSettings

    anthropic_server.add(aw.stream(aw.thinking("hmm", "sig"),
                                   aw.tool_use("toolu_1", "final_answer", ['{"response": 1}'])))
    result = run_agent(_anthropic(anthropic_server), "go", output_type=int,
                       settings=ModelSettings(reasoning_budget=1024, max_tokens=4096))
    assert result.output == 1
    assert anthropic_server.bodies[0]["tool_choice"] == {"type": "auto"}


def test_the_anthropic_fake_rejects_a_forced_tool_that_is_not_offered(anthropic_server):
    import anthropic

    client = anthropic.Anthropic(api_key="k", base_url=anthropic_server.url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="nope"):
        client.messages.create(model=aw.MODEL, max_tokens=10, messages=[{"role": "user", "content": "x"}],
                               tools=[{"name": "a", "input_schema": {"type": "object"}}],
                               tool_choice={"type": "tool", "name": "nope"})
    with pytest.raises(anthropic.BadRequestError, match="input_schema"):
        client.messages.create(model=aw.MODEL, max_tokens=10, messages=[{"role": "user", "content": "x"}],
                               tools=[{"name": "a", "input_schema": {"type": "array"}}])


def test_field_descriptions_reach_the_schema_the_model_sees():
    class Review(BaseModel):
        stars: int = Field(description="1 to 5")

    model = ScriptedModel([answer({"stars": 5})])
    assert run_agent(model, "go", output_type=Review).output == Review(stars=5)
    assert model.requests[0].tools[0].input_schema["properties"]["stars"]["description"] == "1 to 5"


# -- other models: the final-answer tool -----------------------------------------------


def test_a_langchain_chat_model_gets_the_final_answer_tool_bound():
    from typing import Any

    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage

    from agentkit.adapters.langchain import LangChainChatModel

    bound: list[Any] = []

    class ListModel(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            bound.append(tools)
            return self.bind(tools=tools, **kwargs)

    fake = ListModel(responses=[
        AIMessage("", tool_calls=[{"name": "final_answer", "args": {"name": "Lima", "population": 1}, "id": "c1"}]),
    ])
    result = run_agent(LangChainChatModel(fake), "go", output_type=City)
    assert result.output == City(name="Lima", population=1)
    assert [t["function"]["name"] for t in bound[0]] == ["final_answer"]


def test_the_echo_model_can_give_an_output_through_the_tool():
    from agentkit.models import EchoModel

    result = run_agent(EchoModel(delay=0), 'call final_answer {"response": 7}', output_type=int)
    assert result.output == 7


def test_a_model_declaring_an_unknown_output_mode_is_a_configuration_error():
    model = ScriptedModel(["x"])
    model.output_mode = "xml"  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="output_mode must be 'json-schema' or 'tool'"):
        run_agent(model, "go", output_type=int)
    assert model.requests == []


def test_json_schema_mode_with_a_function_model_and_a_fenced_answer():
    model = FunctionModel(lambda r: '```json\n{"response": 3}\n```')
    model.output_mode = "json-schema"  # type: ignore[attr-defined]
    assert run_agent(model, "go", output_type=int).output == 3
    assert model.requests[0].tools == () and model.requests[0].output.mode == "json-schema"


def test_output_type_costs_nothing_per_generation_beyond_a_cached_lookup():
    from agentkit.loop._output import _compiled

    _compiled.cache_clear()
    model = FunctionModel(lambda r: ToolCall(name="final_answer", input={"response": 1}))
    with Session(model, output_type=int) as session:
        for _ in range(5):
            session.ask("go")
    info = _compiled.cache_info()
    assert info.misses == 1 and info.hits >= 5


def test_openai_strict_nested_models_pass_the_strict_rules_of_the_fake(openai_server):
    class Crew(BaseModel):
        captain: City
        members: list[City]
        motto: Optional[str]

    crew = {"captain": {"name": "a", "population": 1}, "members": [], "motto": None}
    openai_server.add(ow.text_stream(json.dumps(crew)))
    result = run_agent(_openai(openai_server), "go", output_type=Crew)
    assert result.output.captain == City(name="a", population=1) and result.output.motto is None
    assert openai_server.bodies[0]["response_format"]["json_schema"]["strict"] is True


def test_json_schema_retry_feedback_is_a_user_message_in_the_session_log():
    replies = iter(['{"response": "seven"}', '{"response": 7}'])
    model = FunctionModel(lambda r: next(replies))
    model.output_mode = "json-schema"  # type: ignore[attr-defined]
    with Session(model, output_type=int) as session:
        result = session.ask("go")
        assert result.output == 7
        roles = [m.role for m in session.model_messages()]
        assert roles == ["user", "assistant", "user", "assistant"]
        assert "valid integer" in session.model_messages()[2].text


def test_no_retries_means_the_first_invalid_output_raises():
    model = ScriptedModel([answer({"response": "x"}), answer({"response": 1})])
    with pytest.raises(OutputValidationError) as info:
        run_agent(model, "go", output_type=int, max_validation_retries=0)
    assert info.value.attempts == 1 and model.request_count == 1


def test_the_output_tool_writes_no_intent_and_spends_no_tool_call_budget(tmp_path):
    from agentkit import FileEventStore, Limits
    from agentkit.events import ControlEvent

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    model = ScriptedModel([ToolCall(name="ping"), answer({"response": 1})])
    with Session(model, tools=[ping], store=FileEventStore(tmp_path), output_type=int,
                 limits=Limits(tool_calls=1)) as session:
        result = session.ask("go")
        intents = [e.data["tool_name"] for e in session.events if isinstance(e, ControlEvent)
                   and "tool_name" in e.data]
        assert session.uncertain_tool_executions() == []
    assert result.output == 1 and result.finish_reason == "stop"
    assert intents == ["ping"]  # the user tool's intent only


def test_a_validator_that_raises_any_exception_is_an_error_the_model_reads():
    from pydantic import field_validator

    class Code(BaseModel):
        code: str

        @field_validator("code")
        @classmethod
        def known(cls, value: str) -> str:
            return {"a": "alpha"}[value]  # KeyError for anything else

    model = ScriptedModel([answer({"code": "zz"}), answer({"code": "a"})])
    result = run_agent(model, "go", output_type=Code)
    assert result.output.code == "alpha"
    assert "KeyError" in result.tool_calls[0].output.as_text()


def test_a_bare_value_for_a_wrapped_type_is_accepted_and_a_wrong_object_is_explained():
    plan = plan_for(list[int])
    assert plan.parse_text("[1, 2]") == ([1, 2], None)
    assert plan.parse_input({"numbers": [1]})[1] == "- the answer must be a JSON object with the key 'response'"


def test_the_output_tool_stays_visible_under_tool_search():
    from agentkit import Tool, ToolSearch

    catalogue = [Tool(name=f"tool_{i}", description=f"Tool number {i}.", input_schema={"type": "object"},
                      fn=lambda: "ok") for i in range(6)]
    model = ScriptedModel([
        ToolCall(name="find_tools", input={"query": "tool number 3"}),
        answer({"response": 3}),
    ])
    result = run_agent(model, "go", tools=catalogue, tool_search=ToolSearch(threshold=2), output_type=int)
    assert result.output == 3
    for request in model.requests:  # before and after find_tools changed the visible set
        names = [t.name for t in request.tools]
        assert "find_tools" in names and names[-1] == "final_answer"
    assert len(model.requests[1].tools) > len(model.requests[0].tools)


def test_the_exhausted_error_names_the_output_type_as_written() -> None:
    from agentkit import OutputValidationError, ScriptedModel, run_agent

    with pytest.raises(OutputValidationError, match=r"did not match output_type list\[int\] after 2"):
        run_agent(ScriptedModel(["not a list", "still not"]), "hi", output_type=list[int])
