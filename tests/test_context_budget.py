"""Budgets: each limit of Limits stops the generation where it should."""

from __future__ import annotations

import pytest
from fakes import openai_wire as w
from fakes.server import FakeServer

from agentkit import ConfigurationError, FunctionModel, Limits, ScriptedModel, Session, ToolCall, run_agent, tool
from agentkit.events import ControlEvent
from agentkit.models import ModelSettings, RetryPolicy, Turn
from agentkit.models.openai import OpenAIChatModel

RAN: list[str] = []


@tool
def work(n: int) -> str:
    """Do some work."""
    RAN.append(str(n))
    return f"did {n}"


def always_calls(request):
    return ToolCall(name="work", input={"n": len(request.messages)})


def breach(session: Session) -> dict:
    found = [e for e in session.events if isinstance(e, ControlEvent) and e.action == "budget-exceeded"]
    assert len(found) == 1
    return found[0].data


def test_model_calls_limit_makes_no_further_model_call():
    model = FunctionModel(always_calls)
    with Session(model, tools=[work], limits=Limits(model_calls=3)) as s:
        s.push_user_message("go")
        result = s.generate()
    assert result.finish_reason == "budget-exceeded"
    assert len(model.requests) == 3 and len(result.steps) == 3
    assert breach(s) == {"limit": "model_calls", "maximum": 3, "used": 3}


def test_tool_calls_limit_refuses_calls_past_it_with_an_error_result_and_stops():
    RAN.clear()
    model = FunctionModel(lambda r: [ToolCall(name="work", input={"n": i}) for i in range(3)])
    with Session(model, tools=[work], limits=Limits(tool_calls=4)) as s:
        s.push_user_message("go")
        result = s.generate()
    assert result.finish_reason == "budget-exceeded"
    # four calls ran: the first step's three (at once, in parallel: any order) and the
    # first of the second step; its second and third (the fifth and sixth) did not
    assert sorted(RAN[:3]) == ["0", "1", "2"] and RAN[3:] == ["0"]
    refused = [r for r in result.tool_calls if r.output.is_error]
    assert len(refused) == 2 and all("budget of this generation is spent" in r.output.value for r in refused)
    assert [r.input["n"] for r in refused] == [1, 2] and refused == list(result.tool_calls[4:])
    assert len(model.requests) == 2  # no model call after the refusal
    assert breach(s) == {"limit": "tool_calls", "maximum": 4, "used": 4}
    # the next generation has a fresh budget
    RAN.clear()
    with Session(ScriptedModel([ToolCall(name="work", input={"n": 1}), "ok"]), tools=[work],
                 limits=Limits(tool_calls=1)) as s2:
        s2.push_user_message("go")
        assert s2.generate().finish_reason == "stop" and RAN == ["1"]


@pytest.mark.parametrize("limit", ["input_tokens", "output_tokens", "total_tokens"])
def test_token_limits_stop_before_the_next_model_call(limit):
    model = FunctionModel(always_calls)
    with Session(model, tools=[work]) as free:
        free.push_user_message("go")
        steps = free.generate(limits=Limits(model_calls=4)).steps
    used_after_2 = sum(getattr(s.usage, limit) for s in steps[:2])
    used_after_1 = getattr(steps[0].usage, limit)
    model = FunctionModel(always_calls)
    with Session(model, tools=[work]) as s:
        s.push_user_message("go")
        result = s.generate(limits=Limits(**{limit: used_after_1 + 1}))
    assert result.finish_reason == "budget-exceeded"
    assert len(model.requests) == 2  # the first call stayed under the limit, the second reached it
    data = breach(s)
    assert data["limit"] == limit and data["maximum"] == used_after_1 + 1 and data["used"] == used_after_2


def test_reasoning_tokens_are_reported_by_openai_and_limited():
    with FakeServer() as server:
        server.add(
            w.tool_stream([("c1", "work", ['{"n": 1}'])], usage_=w.usage(prompt=10, completion=30, reasoning=25)),
            w.text_stream("never", usage_=w.usage()),
        )
        model = OpenAIChatModel("gpt-4.1-mini", base_url=server.url + "/v1", retry=RetryPolicy(max_retries=0))
        result = run_agent(model, "go", tools=[work], limits=Limits(reasoning_tokens=20))
        assert result.finish_reason == "budget-exceeded"
        assert result.usage.reasoning_tokens == 25
        assert len(server.requests) == 1


def test_reasoning_tokens_are_reported_by_anthropic_and_limited():
    from fakes import anthropic_wire as aw

    from agentkit.models.anthropic import AnthropicModel

    with FakeServer() as server:
        server.check = aw.validate  # the request must be one the Messages API accepts
        server.add(
            aw.stream(aw.thinking("plan", "sig-1"), aw.tool_use("c1", "work", ['{"n": 1}']),
                      stop_reason="tool_use", output_tokens=40, thinking_tokens=25),
            aw.stream(aw.text("never")),
        )
        model = AnthropicModel("claude-fake-1", base_url=server.url, api_key="sk-ant",
                               retry=RetryPolicy(max_retries=0))
        result = run_agent(model, "go", tools=[work], limits=Limits(reasoning_tokens=20),
                           settings=ModelSettings(reasoning_budget=1024))
        assert result.finish_reason == "budget-exceeded"
        assert (result.usage.output_tokens, result.usage.reasoning_tokens) == (40, 25)
        assert len(server.requests) == 1


def test_without_limits_nothing_changes_and_bad_limits_are_refused():
    with Session(ScriptedModel([Turn(text="hi")])) as s:
        s.push_user_message("go")
        assert s.generate(limits=Limits(model_calls=1)).finish_reason == "stop"  # it answered within it
    with pytest.raises(ConfigurationError, match="Limits tool_calls"):
        Limits(tool_calls=-1)
    with pytest.raises(ConfigurationError, match="limits must be a Limits"):
        run_agent(ScriptedModel(["x"]), "go", limits={"tool_calls": 1})
