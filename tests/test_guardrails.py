"""Guardrails (agentkit/guardrails.py): input guardrails beside the first model call, output
guardrails on the answer, tool guardrails as hooks; a trip raises GuardrailTripped, is
committed as a ``guardrail-tripped`` control event and streamed."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest

from agentkit import (
    Agent,
    ConfigurationError,
    FileEventStore,
    FunctionModel,
    GuardrailTripped,
    HookError,
    Hooks,
    ScriptedModel,
    Session,
    ToolCall,
    ToolContext,
    input_guardrail,
    output_guardrail,
    run_agent,
    run_agent_stream,
    tool,
    tool_guardrail,
)
from agentkit.events import ControlEvent, UserMessageEvent
from agentkit.guardrails import GuardrailContext
from agentkit.messages import ToolOutput, text_of

DEADLINE = 60.0  # a last guard: every wait below ends on an event long before it


def _trips(events: Any) -> list[ControlEvent]:
    return [e for e in events if isinstance(e, ControlEvent) and e.action == "guardrail-tripped"]


class _SideEffect:
    """A tool whose every run is counted (the side effect a trip must prevent)."""

    def __init__(self) -> None:
        self.ran: list[str] = []

        @tool
        def send_money(to: str) -> str:
            """Send money to someone."""
            self.ran.append(to)
            return f"sent to {to}"

        self.tool = send_money


def _slow_first_call(started: threading.Event, release: threading.Event, returned: threading.Event) -> Any:
    """A first model turn that blocks until ``release`` is set, then asks for send_money."""

    def turn(request: Any) -> ToolCall:
        started.set()
        release.wait(DEADLINE)
        returned.set()
        return ToolCall("send_money", {"to": "mallory"})

    return turn


# -- input guardrails ---------------------------------------------------------------------


def test_an_input_guardrail_that_trips_while_the_model_call_is_slow_stops_before_any_tool_ran():
    started, release, returned = threading.Event(), threading.Event(), threading.Event()
    side = _SideEffect()
    seen: list[Any] = []

    @input_guardrail
    def no_transfers(text: str, ctx: GuardrailContext[Any]) -> Any:
        assert started.wait(DEADLINE)  # the model call is running beside this guardrail
        seen.append(text)
        return {"reason": "money transfer"} if "transfer" in text else None

    model = ScriptedModel([_slow_first_call(started, release, returned), "done"])
    agent = Agent(model, tools=[side.tool], guardrails=[no_transfers])
    session = agent.session()
    try:
        with pytest.raises(GuardrailTripped) as caught:
            session.ask("transfer everything to mallory")  # returns while the model call still blocks
        assert not returned.is_set()  # the trip did not wait for the model call
        assert caught.value.guardrail == "no_transfers"
        assert caught.value.output == {"reason": "money transfer"}
        assert caught.value.kind == "input"
        assert seen == ["transfer everything to mallory"]
    finally:
        release.set()  # only now may the model call return (its answer asks for send_money)
    assert returned.wait(DEADLINE)
    assert model.requests[0].cancel.cancelled  # the call beside the guardrail was cancelled
    assert side.ran == []
    types = [(e.type, getattr(e, "action", None)) for e in session.events]
    assert types == [("user-message", None), ("control", "guardrail-tripped")]  # no answer committed
    trip = _trips(session.events)[0]
    assert trip.data == {"guardrail": "no_transfers", "kind": "input", "output": {"reason": "money transfer"}}
    session.close()


def test_a_model_answer_that_came_first_is_dropped_when_the_guardrail_then_trips():
    side = _SideEffect()
    answered = threading.Event()

    def fast(request: Any) -> ToolCall:
        answered.set()
        return ToolCall("send_money", {"to": "mallory"})

    @input_guardrail
    def slow_check(text: str, ctx: GuardrailContext[Any]) -> str:
        assert answered.wait(DEADLINE)  # the model answered (asking for a tool) before this verdict
        return "refused"

    with Session(ScriptedModel([fast]), tools=[side.tool], guardrails=[slow_check]) as s:
        with pytest.raises(GuardrailTripped):
            s.ask("pay mallory")
        assert side.ran == []
        assert [e.type for e in s.events] == ["user-message", "control"]


def test_a_model_error_beside_a_passing_guardrail_is_the_runs_error():
    from agentkit import ProviderError

    def failing(request: Any) -> str:
        raise ProviderError("the provider is down")

    @input_guardrail
    def fine(text: str, ctx: GuardrailContext[Any]) -> None:
        return None

    with pytest.raises(ProviderError, match="down"):
        run_agent(FunctionModel(failing), "x", guardrails=[fine])


def test_input_guardrails_run_beside_the_first_model_call_and_a_pass_lets_the_run_go_on():
    in_guardrail, in_model = threading.Event(), threading.Event()
    side = _SideEffect()

    def first(request: Any) -> ToolCall:
        in_model.set()
        assert in_guardrail.wait(DEADLINE)  # would wait forever were the two run one after the other
        return ToolCall("send_money", {"to": "bob"})

    calls: list[tuple[str, Any]] = []

    @input_guardrail
    def polite(text: str, ctx: GuardrailContext[Any]) -> bool:
        in_guardrail.set()
        assert in_model.wait(DEADLINE)
        calls.append((text, ctx.deps))
        return False

    result = run_agent(ScriptedModel([first, "paid bob"]), "pay bob", tools=[side.tool], guardrails=[polite],
                       deps={"user": "alice"})
    assert result.text == "paid bob"
    assert side.ran == ["bob"]
    assert calls == [("pay bob", {"user": "alice"})]  # once per generation: the first model call only


def test_an_input_guardrail_sees_only_the_messages_since_the_last_answer_and_the_conversation():
    got: list[tuple[str, int]] = []

    @input_guardrail
    def look(text: str, ctx: GuardrailContext[Any]) -> None:
        got.append((text, len(ctx.messages)))

    with Session(ScriptedModel(["one", "two"]), guardrails=[look]) as s:
        s.ask("first")
        s.push_user_message("second")
        s.push_user_message("third")
        s.generate()
    assert got == [("first", 1), ("second\nthird", 4)]


def test_a_session_turn_after_an_input_trip_works_and_the_model_never_sees_the_refused_message():
    @input_guardrail
    def no_secrets(text: str, ctx: GuardrailContext[Any]) -> str | None:
        return "asks for a secret" if "password" in text else None

    refused = _blocked_forever()  # the tripped turn's call never answers on its own

    def answer(request: Any) -> str:
        return refused(request) if "password" in text_of(request.messages[-1].content) else "hello"

    model = FunctionModel(answer)
    with Session(model, guardrails=[no_secrets]) as s:
        with pytest.raises(GuardrailTripped, match="no_secrets"):
            s.ask("what is the admin password?")
        result = s.ask("hi")
        assert result.text == "hello"
        # the log keeps the refused message; the next request does not carry it
        user_texts = [text_of(e.content) for e in s.events if isinstance(e, UserMessageEvent)]
        assert user_texts == ["what is the admin password?", "hi"]
        last = model.requests[-1]
        assert [(m.role, text_of(m.content)) for m in last.messages] == [("user", "hi")]
        assert [m.role for m in result.messages] == ["user", "assistant"]


def _blocked_forever() -> Any:
    def turn(request: Any) -> str:
        request.cancel.wait(DEADLINE)  # returns once the trip cancels it
        return "late"

    return turn


def test_a_durable_session_records_why_the_run_stopped(tmp_path):
    @input_guardrail(name="topic-check")
    def off_topic(text: str, ctx: GuardrailContext[Any]) -> str | None:
        return "off topic" if "weather" in text else None

    store = FileEventStore(tmp_path / "sessions")
    model = ScriptedModel([_blocked_forever()])
    with Session(model, store=store, session_id="s1", guardrails=[off_topic]) as s:
        with pytest.raises(GuardrailTripped):
            s.ask("what's the weather?")
    with Session(ScriptedModel([]), store=FileEventStore(tmp_path / "sessions"), session_id="s1") as again:
        trips = _trips(again.events)
    assert [t.data for t in trips] == [{"guardrail": "topic-check", "kind": "input", "output": "off topic"}]


def test_the_committed_trip_passes_redaction():
    @output_guardrail
    def leak(text: str, ctx: GuardrailContext[Any]) -> str | None:
        return f"the answer quotes a key: {text}" if "sk-" in text else None

    with Session(ScriptedModel(["use sk-abc123"]), guardrails=[leak], redact=r"sk-\w+") as s:
        with pytest.raises(GuardrailTripped):
            s.ask("key?")
        assert _trips(s.events)[0].data["output"] == "the answer quotes a key: use [redacted]"


def test_a_streamed_trip_has_a_guardrail_event_before_the_end_and_no_tool_event():
    side = _SideEffect()

    @input_guardrail
    def refuse(text: str, ctx: GuardrailContext[Any]) -> bool:
        return True

    stream = run_agent_stream(ScriptedModel([_blocked_forever()]), "go", tools=[side.tool], guardrails=[refuse])
    types = [e.type for e in stream]
    assert types[0] == "generation-start" and types[-1] == "generation-end"
    assert types.index("guardrail-tripped") == len(types) - 2  # nothing of the model call comes after it
    assert not any(t.startswith("tool-") for t in types)
    with pytest.raises(GuardrailTripped):
        _ = stream.result


# -- output guardrails --------------------------------------------------------------------


def test_an_output_guardrail_trips_on_the_final_text():
    @output_guardrail
    def no_pii(text: str, ctx: GuardrailContext[Any]) -> str | None:
        return "an email address" if "@" in text else None

    with Session(ScriptedModel(["write to eve@example.com", "fine"]), guardrails=[no_pii]) as s:
        with pytest.raises(GuardrailTripped) as caught:
            s.ask("who?")
        tripped = caught.value
        assert (tripped.guardrail, tripped.kind, tripped.output) == ("no_pii", "output", "an email address")
        assert [t.data["kind"] for t in _trips(s.events)] == ["output"]
        assert s.ask("again").text == "fine"  # the next turn works


@dataclass
class Invoice:
    customer: str
    total: float


def test_an_output_guardrail_sees_the_validated_structured_output():
    seen: list[Any] = []

    @output_guardrail
    def cap(invoice: Invoice, ctx: GuardrailContext[Any]) -> str | None:
        seen.append(invoice)
        return f"total {invoice.total} over the cap" if invoice.total > 100 else None

    model = ScriptedModel([ToolCall("final_answer", {"customer": "acme", "total": 50}),
                           ToolCall("final_answer", {"customer": "acme", "total": 500})])
    agent = Agent(model, output_type=Invoice, guardrails=[cap])
    assert agent.run("bill acme").output == Invoice("acme", 50)
    with pytest.raises(GuardrailTripped, match="over the cap"):
        agent.run("bill acme more")
    assert seen == [Invoice("acme", 50), Invoice("acme", 500)]


def test_an_output_guardrail_is_not_asked_when_the_run_stopped_before_an_answer():
    asked: list[str] = []

    @output_guardrail
    def check(text: str, ctx: GuardrailContext[Any]) -> None:
        asked.append(text)

    side = _SideEffect()
    result = run_agent(ScriptedModel([ToolCall("send_money", {"to": "x"})]), "go", tools=[side.tool],
                       guardrails=[check], max_steps=1)
    assert result.finish_reason == "max-steps" and asked == []


# -- tool guardrails ----------------------------------------------------------------------


def test_a_blocking_tool_input_guardrail_answers_the_call_with_an_error_and_the_run_goes_on():
    side = _SideEffect()

    @tool_guardrail
    def allow_list(input: dict[str, Any], ctx: ToolContext[Any]) -> str | None:
        return None if input["to"] in ctx.deps["payees"] else f"{input['to']} is not a known payee"

    model = ScriptedModel([[ToolCall("send_money", {"to": "bob"}), ToolCall("send_money", {"to": "mallory"})],
                           "done"])
    stream = run_agent_stream(model, "pay", tools=[side.tool], guardrails=[allow_list], deps={"payees": {"bob"}},
                              tool_execution="sequential")
    events = list(stream)
    assert stream.result.text == "done"
    assert side.ran == ["bob"]
    outputs = {r.input["to"]: r.output for r in stream.result.tool_calls}
    assert not outputs["bob"].is_error
    assert outputs["mallory"].is_error and "allow_list" in str(outputs["mallory"].value)
    assert "mallory is not a known payee" in str(outputs["mallory"].value)
    trips = [e.to_dict() for e in events if e.type == "guardrail-tripped"]
    assert trips == [{"type": "guardrail-tripped", "guardrail": "allow_list", "kind": "tool-input",
                      "output": "mallory is not a known payee"}]


def test_a_raising_tool_input_guardrail_ends_the_run_before_the_tool_runs():
    side = _SideEffect()

    @tool_guardrail(action="raise")
    def never(input: dict[str, Any], ctx: ToolContext[Any]) -> bool:
        return True

    ended: list[Any] = []
    with Session(ScriptedModel([ToolCall("send_money", {"to": "bob"})]), tools=[side.tool], guardrails=[never],
                 hooks=Hooks(on_generation_end=lambda result, error: ended.append(error))) as s:
        with pytest.raises(GuardrailTripped) as caught:
            s.ask("pay")
        assert caught.value.kind == "tool-input"
        assert side.ran == []
        assert [t.data["guardrail"] for t in _trips(s.events)] == ["never"]
    assert ended == [caught.value]  # the end hooks see the trip


def test_tool_output_guardrails_withhold_or_raise():
    side = _SideEffect()

    @tool_guardrail(on="output")
    def no_confirmation_codes(output: ToolOutput, ctx: ToolContext[Any]) -> str | None:
        return "a confirmation" if "sent" in str(output.value) else None

    model = ScriptedModel([ToolCall("send_money", {"to": "bob"}), "ok"])
    result = run_agent(model, "pay", tools=[side.tool], guardrails=[no_confirmation_codes])
    assert side.ran == ["bob"]  # the tool ran; the model did not see its output
    seen = model.requests[1].messages[-1].content[0]
    assert seen.output.is_error and "withheld" in str(seen.output.value) and "sent to" not in str(seen.output.value)
    assert result.text == "ok"

    raising = tool_guardrail(on="output", action="raise", name="strict")(no_confirmation_codes.fn)
    with pytest.raises(GuardrailTripped, match="strict"):
        run_agent(ScriptedModel([ToolCall("send_money", {"to": "bob"})]), "pay", tools=[side.tool],
                  guardrails=[raising])


def test_tool_guardrails_see_the_call_after_the_hooks_rewrote_it():
    side = _SideEffect()
    seen: list[Any] = []

    @tool_guardrail
    def look(input: dict[str, Any], ctx: ToolContext[Any]) -> None:
        seen.append(input["to"])

    from agentkit import ToolDecision

    rewrite = Hooks(before_tool_call=lambda call, ctx: ToolDecision.rewrite({"to": call.input["to"].upper()}))
    run_agent(ScriptedModel([ToolCall("send_money", {"to": "bob"}), "ok"]), "pay", tools=[side.tool],
              guardrails=[look], hooks=rewrite)
    assert seen == ["BOB"] and side.ran == ["BOB"]


# -- options, errors ----------------------------------------------------------------------


def test_a_sessions_guardrails_and_a_calls_compose():
    order: list[str] = []

    @output_guardrail
    def first(text: str, ctx: GuardrailContext[Any]) -> None:
        order.append("session")

    @output_guardrail
    def second(text: str, ctx: GuardrailContext[Any]) -> None:
        order.append("call")

    with Session(ScriptedModel(["a"]), guardrails=first) as s:
        s.ask("x", guardrails=[second])
    assert order == ["session", "call"]


def test_a_guardrail_that_raises_is_a_hook_error_naming_it():
    @input_guardrail
    def broken(text: str, ctx: GuardrailContext[Any]) -> None:
        raise KeyError("boom")

    with pytest.raises(HookError, match="input guardrail 'broken' raised KeyError") as caught:
        run_agent(ScriptedModel(["hi"]), "x", guardrails=[broken])
    assert caught.value.hook == "input-guardrail"
    assert isinstance(caught.value.__cause__, KeyError)

    @tool_guardrail
    def broken_tool(input: dict[str, Any], ctx: ToolContext[Any]) -> None:
        raise ValueError("bad")

    side = _SideEffect()
    with pytest.raises(HookError, match="tool-input guardrail 'broken_tool' raised ValueError"):
        run_agent(ScriptedModel([ToolCall("send_money", {"to": "b"})]), "x", tools=[side.tool],
                  guardrails=[broken_tool])
    assert side.ran == []


def test_bad_guardrails_are_refused_before_anything_runs():
    async def checker(text: str, ctx: Any) -> bool:
        return False

    with pytest.raises(ConfigurationError, match="async function; guardrails are synchronous"):
        input_guardrail(checker)
    with pytest.raises(ConfigurationError, match="decorate the function with @input_guardrail"):
        Agent(ScriptedModel([]), guardrails=[lambda text, ctx: False])
    with pytest.raises(ConfigurationError, match="action must be 'block' or 'raise'"):
        tool_guardrail(action="warn")(lambda i, c: None)  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError, match="on=...\\) must be 'input' or 'output'"):
        tool_guardrail(on="result")  # type: ignore[call-overload]
    model = ScriptedModel(["hi"])
    with pytest.raises(ConfigurationError):
        run_agent(model, "x", guardrails="no")  # type: ignore[arg-type]
    assert model.request_count == 0

    @input_guardrail
    def returns_a_coroutine(text: str, ctx: Any) -> Any:
        return checker(text, ctx)

    with pytest.raises(HookError, match="returned an awaitable"):
        run_agent(ScriptedModel(["hi"]), "x", guardrails=[returns_a_coroutine])


def test_a_cancelled_run_stops_waiting_for_the_model_call_beside_a_passing_guardrail():
    from agentkit import CancelledError, CancelToken

    token = CancelToken()
    started = threading.Event()

    def hang(request: Any) -> str:
        started.set()
        request.cancel.wait(DEADLINE)
        return "late"

    @input_guardrail
    def ok(text: str, ctx: GuardrailContext[Any]) -> None:
        assert started.wait(DEADLINE)
        token.cancel("user left")

    with pytest.raises(CancelledError):
        run_agent(FunctionModel(hang), "x", guardrails=[ok], cancel=token)


def test_a_tripped_run_gives_back_its_run_slot():
    @input_guardrail
    def refuse(text: str, ctx: GuardrailContext[Any]) -> bool:
        return True

    agent = Agent(FunctionModel(lambda request: "late"), guardrails=[refuse], max_concurrent_runs=1)
    for _ in range(2):  # a slot kept by the first trip would make the second wait forever
        with pytest.raises(GuardrailTripped):
            agent.run("x")
    assert agent.active_runs == 0
