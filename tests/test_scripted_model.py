"""ScriptedModel and FunctionModel: the deterministic test seam."""

from __future__ import annotations

import pytest

from agentkit import (
    CancelledError,
    CancelToken,
    ConfigurationError,
    FunctionModel,
    Message,
    ModelRequest,
    ScriptedModel,
    ScriptExhaustedError,
    ToolCall,
    Turn,
)
from agentkit.models.base import FinishEvent, ReasoningDelta, ReasoningDone, TextDelta, ToolCallEvent, UsageEvent


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
