"""ScriptedModel and FunctionModel: the deterministic test seam."""

from __future__ import annotations

import pytest

from agentkit import (
    CancelledError,
    CancelToken,
    ConfigurationError,
    FunctionModel,
    ScriptedModel,
    ScriptExhaustedError,
    ToolCall,
)
from agentkit.messages import Message
from agentkit.models import (
    FinishEvent,
    ModelRequest,
    ReasoningDelta,
    ReasoningDone,
    TextDelta,
    ToolCallEvent,
    Turn,
    UsageEvent,
)


def req(text="hi", cancel=None):
    return ModelRequest(messages=(Message.user(text),), cancel=cancel or CancelToken())


def test_text_streams_in_several_deltas_with_usage_and_finish():
    model = ScriptedModel(["The quick brown fox jumps."], chunk_size=5)
    events = list(model.stream(req("a prompt of some length")))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == 6 and "".join(deltas) == "The quick brown fox jumps."
    usage = next(e.usage for e in events if isinstance(e, UsageEvent))
    assert usage.input_tokens >= 1 and usage.output_tokens >= 1
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert events[-1] == FinishEvent("stop")


def test_tool_calls_get_fresh_ids_unless_given():
    model = ScriptedModel([[ToolCall("a", {"x": 1}), ToolCall("b", id="fixed")]])
    calls = [e for e in model.stream(req()) if isinstance(e, ToolCallEvent)]
    assert [c.tool_name for c in calls] == ["a", "b"]
    assert calls[0].tool_call_id.startswith("call_") and calls[1].tool_call_id == "fixed"
    assert calls[0].input == {"x": 1}


def test_callable_turn_sees_the_request_and_requests_are_recorded():
    model = ScriptedModel([lambda r: f"you said {r.messages[-1].text}", Turn(text="t", reasoning="hmm")])
    assert "".join(e.text for e in model.stream(req("ping")) if isinstance(e, TextDelta)) == "you said ping"
    events = list(model.stream(req("second")))
    assert ReasoningDelta("hmm") in events
    assert any(isinstance(e, ReasoningDone) and e.part.text == "hmm" for e in events)
    assert [r.messages[-1].text for r in model.requests] == ["ping", "second"]
    assert model.remaining == 0


def test_running_out_of_turns_is_a_clear_error():
    model = ScriptedModel(["only one"])
    list(model.stream(req()))
    with pytest.raises(ScriptExhaustedError, match="given 1 turn.*request 2"):
        model.stream(req())


def test_bad_scripts_are_rejected():
    with pytest.raises(ConfigurationError, match="list of turns"):
        ScriptedModel("just a string")  # type: ignore[arg-type]
    model = ScriptedModel([42])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="a scripted turn must be"):
        model.stream(req())


def test_cancellation_stops_the_stream():
    token = CancelToken()
    model = ScriptedModel(["x" * 100], chunk_size=1)
    stream = model.stream(req(cancel=token))
    next(stream)
    token.cancel("user hit stop")
    with pytest.raises(CancelledError, match="user hit stop"):
        list(stream)


def test_function_model_never_runs_out():
    model = FunctionModel(lambda r: f"n={len(r.messages)}")
    for _ in range(3):
        list(model.stream(req()))
    assert len(model.requests) == 3
    with pytest.raises(ConfigurationError):
        FunctionModel(42)  # type: ignore[arg-type]


def test_requests_kept_are_bounded_by_keep_requests():
    model = FunctionModel(lambda request: request.messages[-1].text, keep_requests=3)
    for i in range(10):
        list(model.stream(req(f"q{i}")))
    assert [r.messages[-1].text for r in model.requests] == ["q7", "q8", "q9"]
    assert model.request_count == 10


def test_a_long_running_scripted_model_keeps_a_bounded_default():
    model = FunctionModel(lambda request: "ok")
    for i in range(250):
        list(model.stream(req(f"q{i}")))
    assert len(model.requests) == 100
    assert model.requests[-1].messages[-1].text == "q249"
    assert model.request_count == 250


def test_keep_requests_none_keeps_all_and_zero_keeps_none():
    everything = FunctionModel(lambda request: "ok", keep_requests=None)
    nothing = FunctionModel(lambda request: "ok", keep_requests=0)
    for _ in range(150):
        list(everything.stream(req()))
        list(nothing.stream(req()))
    assert len(everything.requests) == 150
    assert nothing.requests == [] and nothing.request_count == 150


def test_scripted_turns_are_counted_even_when_requests_are_not_kept():
    model = ScriptedModel(["a", "b"], keep_requests=1)
    list(model.stream(req("first")))
    assert model.remaining == 1
    list(model.stream(req("second")))
    assert model.remaining == 0
    assert [r.messages[-1].text for r in model.requests] == ["second"]
    with pytest.raises(ScriptExhaustedError, match="this is request 3"):
        list(model.stream(req()))


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True])
def test_keep_requests_must_be_a_count(bad):
    with pytest.raises(ConfigurationError, match="keep_requests"):
        ScriptedModel(["a"], keep_requests=bad)
