"""Hooks: before_model_request, before_tool_call, after_tool_call, on_generation_end."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from agentkit import (
    CancelledError,
    CancelToken,
    ConfigurationError,
    FunctionModel,
    HookError,
    Hooks,
    ScriptedModel,
    Session,
    ToolCall,
    ToolContext,
    ToolDecision,
    run_agent,
    tool,
)
from agentkit.messages import Message, TextPart, ToolOutput, ToolResultPart

RAN: list[dict] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append({"a": a, "b": b})
    return a + b


def results_of(request) -> list:
    return [p.output for m in request.messages if m.role == "tool" for p in m.content
            if isinstance(p, ToolResultPart)]


def setup_function() -> None:
    RAN.clear()


def test_before_model_request_adds_ephemeral_context_that_is_never_committed():
    seen: list[list[str]] = []

    def add_context(request):
        note = Message(role="user", content=(TextPart(text="(it is Tuesday)"),))
        return dataclasses.replace(request, messages=(*request.messages, note))

    model = FunctionModel(lambda r: (seen.append([m.text for m in r.messages]), "ok")[1])
    with Session(model, hooks=Hooks(before_model_request=add_context)) as s:
        s.push_user_message("what day is it?")
        s.generate()
        assert seen[-1] == ["what day is it?", "(it is Tuesday)"]
        assert all("Tuesday" not in repr(e) for e in s.events)
        s.push_user_message("again")
        s.generate()
        assert seen[-1] == ["what day is it?", "ok", "again", "(it is Tuesday)"]


def test_before_model_request_hooks_compose_in_order_and_none_keeps_the_request():
    order: list[str] = []

    def first(request):
        order.append("first")
        return dataclasses.replace(request, system="from first")

    def second(request):
        order.append(f"second saw {request.system}")
        return None

    model = ScriptedModel(["hi"])
    run_agent(model, "x", hooks=[Hooks(before_model_request=first), Hooks(before_model_request=second)])
    assert order == ["first", "second saw from first"]
    assert model.requests[0].system == "from first"


def test_block_gives_the_model_the_reason_and_the_tool_never_runs():
    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 2}), lambda r: results_of(r)[-1].value])
    hooks = Hooks(before_tool_call=lambda call, ctx: ToolDecision.block("adding is not allowed today"))
    result = run_agent(model, "add", tools=[add], hooks=hooks)
    assert RAN == []
    assert result.tool_calls[0].is_error
    assert "adding is not allowed today" in result.tool_calls[0].error
    assert "adding is not allowed today" in result.text


def test_rewrite_is_validated_again_and_the_tool_runs_with_the_new_input():
    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 2}), "done"])
    hooks = Hooks(before_tool_call=lambda call, ctx: ToolDecision.rewrite({"a": 10, "b": 20}))
    result = run_agent(model, "add", tools=[add], hooks=hooks)
    assert RAN == [{"a": 10, "b": 20}] and result.tool_calls[0].output.value == 30

    RAN.clear()
    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 2}), "done"])
    bad = Hooks(before_tool_call=lambda call, ctx: ToolDecision.rewrite({"a": "ten"}))
    result = run_agent(model, "add", tools=[add], hooks=bad)
    assert RAN == [] and result.tool_calls[0].is_error
    assert "rewritten input was refused" in result.tool_calls[0].error


def test_respond_short_circuits_with_any_tool_value():
    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 2}), "done"])
    hooks = Hooks(before_tool_call=lambda call, ctx: ToolDecision.respond({"cached": 3}))
    result = run_agent(model, "add", tools=[add], hooks=hooks)
    assert RAN == [] and result.tool_calls[0].output == ToolOutput(kind="json", value={"cached": 3})


def test_before_tool_call_runs_after_validation_and_sees_the_context():
    seen: list[tuple[str, str, dict]] = []

    def watch(call, ctx):
        seen.append((ctx.tool_call_id, ctx.tool_name, call.input))
        return None

    model = ScriptedModel([[ToolCall("add", {"a": "x"}), ToolCall("add", {"a": 1, "b": 1}, id="c2")], "done"])
    run_agent(model, "add", tools=[add], hooks=Hooks(before_tool_call=watch))
    assert seen == [("c2", "add", {"a": 1, "b": 1})]  # the invalid call never reached the hook


def test_after_tool_call_changes_the_committed_result():
    def shout(call, output, ctx):
        return ToolOutput.text(f"{call.tool_name} said {output.value}")

    with Session(ScriptedModel([ToolCall("add", {"a": 2, "b": 2}), "done"]), tools=[add]) as s:
        s.push_user_message("add")
        s.generate(hooks=Hooks(after_tool_call=shout))
        results = [e for e in s.events if e.type == "tool-result"]
        assert results[0].output == ToolOutput.text("add said 4")


def test_hooks_of_session_and_generate_compose_session_first():
    order: list[str] = []
    session_hook = Hooks(after_tool_call=lambda c, o, x: (order.append("session"), None)[1])
    call_hook = Hooks(after_tool_call=lambda c, o, x: (order.append("call"), None)[1])
    with Session(ScriptedModel([ToolCall("add", {"a": 2, "b": 2}), "done"]), tools=[add], hooks=session_hook) as s:
        s.push_user_message("add")
        s.generate(hooks=[call_hook])
    assert order == ["session", "call"]


@pytest.mark.parametrize("point", ["before_model_request", "before_tool_call", "after_tool_call"])
def test_a_raising_hook_fails_the_generation_naming_the_hook(point):
    def broken(*args):
        raise RuntimeError("boom")

    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 2}), "done"])
    with pytest.raises(HookError, match=f"{point} hook .*broken.* raised RuntimeError: boom") as info:
        run_agent(model, "add", tools=[add], hooks=Hooks(**{point: broken}))
    assert info.value.hook == point and isinstance(info.value.__cause__, RuntimeError)


def test_a_hook_returning_the_wrong_type_is_a_hook_error():
    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 2}), "done"])
    with pytest.raises(HookError, match="return a ToolDecision"):
        run_agent(model, "add", tools=[add], hooks=Hooks(before_tool_call=lambda c, x: True))
    with pytest.raises(HookError, match="return a ModelRequest"):
        run_agent(ScriptedModel(["x"]), "hi", hooks=Hooks(before_model_request=lambda r: "nope"))


def test_on_generation_end_is_called_once_on_success_error_cancel_and_max_steps():
    calls: list[tuple[object, object]] = []
    hooks = Hooks(on_generation_end=lambda result, error: calls.append((result, error)))

    result = run_agent(ScriptedModel(["hello"]), "hi", hooks=hooks)
    assert calls == [(calls[0][0], None)] and calls[0][0].text == "hello" and result.text == "hello"

    calls.clear()
    with pytest.raises(Exception, match="no turn left"):
        run_agent(ScriptedModel([]), "hi", hooks=hooks)
    assert len(calls) == 1 and calls[0][0] is None and "no turn left" in str(calls[0][1])

    calls.clear()
    token = CancelToken()
    with pytest.raises(CancelledError):  # cancelled by the host while the model answers
        run_agent(FunctionModel(lambda r: (token.cancel("stop"), "late")[1]), "hi", hooks=hooks, cancel=token)
    assert len(calls) == 1 and isinstance(calls[0][1], CancelledError)

    calls.clear()
    looping = FunctionModel(lambda r: ToolCall("add", {"a": 1, "b": 1}))
    result = run_agent(looping, "loop", tools=[add], max_steps=2, hooks=hooks)
    assert result.finish_reason == "max-steps" and len(calls) == 1 and calls[0][0].finish_reason == "max-steps"


def test_on_generation_end_on_abort_from_another_thread():
    calls: list[tuple[object, object]] = []
    started = threading.Event()

    @tool
    def wait(ctx: ToolContext) -> str:
        """Wait until cancelled."""
        started.set()
        ctx.cancel.wait(30)
        return "stopped"

    with Session(ScriptedModel([ToolCall("wait"), "done"]), tools=[wait],
                 hooks=Hooks(on_generation_end=lambda r, e: calls.append((r, e)))) as s:
        s.push_user_message("go")
        box: list[BaseException] = []
        t = threading.Thread(target=lambda: _catch(s.generate, box))
        t.start()
        assert started.wait(10)
        s.abort_current_generation("host said stop")
        t.join(10)
        assert not t.is_alive()
    assert len(calls) == 1 and isinstance(calls[0][1], CancelledError) and isinstance(box[0], CancelledError)


def test_a_raising_on_generation_end_fails_an_otherwise_good_generation():
    def broken(result, error):
        raise ValueError("cannot record")

    with pytest.raises(HookError, match="on_generation_end"):
        run_agent(ScriptedModel(["hello"]), "hi", hooks=Hooks(on_generation_end=broken))


def test_bad_hooks_are_configuration_errors_before_any_model_call():
    with pytest.raises(ConfigurationError, match="before_tool_call must be a callable"):
        Hooks(before_tool_call="yes")  # type: ignore[arg-type]
    model = ScriptedModel(["never"])
    with pytest.raises(ConfigurationError, match="hooks must be a Hooks object"):
        run_agent(model, "hi", hooks=lambda r: r)  # type: ignore[arg-type]
    assert model.requests == []
    with pytest.raises(ConfigurationError, match="non-empty reason"):
        ToolDecision.block("")


def _catch(fn, box):
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001
        box.append(exc)
