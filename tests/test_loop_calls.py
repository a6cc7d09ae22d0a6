"""Exactly once inside one process: ``ctx.step`` journals, ``ctx.ask_human`` pauses and
resumes, reconcile probes settle calls a crash left uncertain (the crash is the log a
killed process leaves: an assistant message with a tool call and its committed intent,
no result; tests/test_loop_calls_processes.py kills real processes)."""

from __future__ import annotations

import dataclasses

import pytest

from agentkit import (
    ConfigurationError,
    FileEventStore,
    InMemoryEventStore,
    InputError,
    InputRequest,
    ScriptedModel,
    Session,
    ToolCall,
    ToolContext,
    run_agent,
    tool,
)
from agentkit.events import AssistantMessageEvent, ControlEvent, ToolResultEvent, UserMessageEvent
from agentkit.messages import TextPart, ToolCallPart


def controls(events, action: str) -> list[ControlEvent]:
    return [e for e in events if isinstance(e, ControlEvent) and e.action == action]


def results(events) -> list[ToolResultEvent]:
    return [e for e in events if isinstance(e, ToolResultEvent)]


class Effects:
    """What a tool did: each side effect appended, in order."""

    def __init__(self) -> None:
        self.done: list[str] = []

    def do(self, what: str) -> str:
        self.done.append(what)
        return f"{what}-ok"


def shipping_tool(effects: Effects, answers: list[object]):
    @tool
    def ship(order: str, ctx: ToolContext) -> str:
        """Charge, ask whether to ship, ship."""
        charged = ctx.step("charge", lambda: effects.do(f"charge {order}"))
        go = ctx.ask_human(f"ship {order}?", schema={"type": "boolean"})
        answers.append(go)
        if not go:
            return f"{charged}; not shipped"
        shipped = ctx.step("ship", lambda: effects.do(f"ship {order}"))
        return f"{charged}; {shipped}"

    return ship


@pytest.mark.parametrize("durable", [False, True], ids=["in-memory", "file-store"])
def test_ask_human_ends_the_generation_and_the_answer_resumes_the_call_without_rerunning_its_steps(tmp_path, durable):
    effects, answers = Effects(), []
    ship = shipping_tool(effects, answers)
    model = ScriptedModel([ToolCall(name="ship", input={"order": "A1"}, id="call-1"), "shipped A1"])
    store = FileEventStore(tmp_path) if durable else None
    session = Session.open("s", store=store, model=model, tools=[ship]) if store else Session(model, tools=[ship])
    with session:
        first = session.ask("ship order A1")
        assert first.finish_reason == "input-required"
        assert effects.done == ["charge A1"] and answers == []
        (request,) = session.pending_inputs()
        assert isinstance(request, InputRequest)
        assert (request.question, request.schema, request.tool_call_id) == ("ship A1?", {"type": "boolean"}, "call-1")
        assert session.uncertain_tool_executions() == []  # paused, not uncertain
        with pytest.raises(InputError, match="does not match its schema") as refused:
            session.answer_input(request.id, "yes please")
        assert refused.value.kind == "invalid" and refused.value.request_id == request.id
        assert request.to_dict()["question"] == "ship A1?"
        assert [r.id for r in session.pending_inputs()] == [request.id]  # still pending
        with pytest.raises(InputError, match="no input request") as unknown:
            session.answer_input("nope", True)
        assert unknown.value.kind == "unknown"
        session.answer_input(request.id, True)
        with pytest.raises(InputError, match="already answered") as again:
            session.answer_input(request.id, False)
        assert again.value.kind == "answered"
        assert session.pending_inputs() == []
        second = session.generate()  # no new message: the call goes on
    assert second.finish_reason == "stop" and second.text == "shipped A1"
    assert effects.done == ["charge A1", "ship A1"]  # each exactly once
    assert answers == [True]
    (result,) = results(session.events)
    assert result.tool_call_id == "call-1" and result.output.value == "charge A1-ok; ship A1-ok"
    assert len(controls(session.events, "tool-step-recorded")) == 2


def test_a_reopened_session_goes_on_with_generate_and_keeps_the_idempotency_key(tmp_path):
    keys: list[str | None] = []
    effects = Effects()

    @tool
    def pay(amount: int, ctx: ToolContext) -> str:
        """Pay after a person confirms."""
        keys.append(ctx.idempotency_key)
        ctx.step("reserve", lambda: effects.do("reserve"))
        confirmed = ctx.ask_human(f"pay {amount}?", timeout=3600)
        return ctx.step("pay", lambda: effects.do(f"pay {amount} {confirmed}"))

    model = ScriptedModel([ToolCall(name="pay", input={"amount": 5}), "paid"])
    store = FileEventStore(tmp_path)
    with Session.open("p", store=store, model=model, tools=[pay]) as a:
        assert a.ask("pay 5").finish_reason == "input-required"
        (request,) = a.pending_inputs()
        assert request.expires_at is not None and request.expires_at > request.requested_at
    with Session.open("p", store=store, tools=[pay]) as b:  # a web request's view of it
        b.answer_input(request.id, "yes")
    with Session.open("p", store=store, model=model, tools=[pay]) as c:
        assert c.generate().text == "paid"
        (intent, rerun) = controls(c.events, "tool-execution-intent")
    assert effects.done == ["reserve", "pay 5 yes"]
    assert keys == [intent.id, intent.id]  # one key for the call, in both runs
    assert rerun.data["idempotency_key"] == intent.id


def test_a_call_can_ask_twice_and_each_question_gets_its_own_answer():
    asked: list[object] = []

    @tool
    def plan(ctx: ToolContext) -> str:
        """Ask two things."""
        where = ctx.ask_human("where?")
        asked.append(where)
        when = ctx.ask_human("when?", schema={"type": "integer", "minimum": 0})
        asked.append(when)
        return f"{where} at {when}"

    model = ScriptedModel([ToolCall(name="plan", input={}), "planned"])
    with Session(model, tools=[plan]) as s:
        assert s.ask("plan it").finish_reason == "input-required"
        s.answer_input(s.pending_inputs()[0].id, "Paris")
        assert s.generate().finish_reason == "input-required"
        (second,) = s.pending_inputs()
        assert second.question == "when?"
        with pytest.raises(InputError, match="minimum"):
            s.answer_input(second.id, -1)
        s.answer_input(second.id, 9)
        assert s.generate().text == "planned"
    assert asked == ["Paris", "Paris", 9]
    assert results(s.events)[0].output.value == "Paris at 9"


def test_a_cancelled_or_expired_question_closes_the_call_with_an_error_the_model_reads():
    ran: list[str] = []

    @tool
    def confirm(ctx: ToolContext) -> str:
        """Ask, then act."""
        ctx.ask_human("go?", timeout=0.05)
        ran.append("acted")
        return "acted"

    model = ScriptedModel([ToolCall(name="confirm", input={}), "gave up", ToolCall(name="confirm", input={}),
                           "gave up again"])
    with Session(model, tools=[confirm]) as s:
        assert s.ask("one").finish_reason == "input-required"
        (request,) = s.pending_inputs()
        with pytest.raises(ConfigurationError, match="non-empty reason"):
            s.cancel_input(request.id, reason=" ")
        s.cancel_input(request.id, reason="the customer left")
        with pytest.raises(InputError, match="closed"):
            s.answer_input(request.id, True)
        assert s.generate().text == "gave up"
        closed = results(s.events)[-1]
        assert closed.output.is_error and "the customer left" in closed.output.value
        assert s.ask("two").finish_reason == "input-required"
        (late,) = [r for r in s._log.ledger.journal.pending()]
        import time

        time.sleep(0.1)
        assert s.pending_inputs() == []  # expired: not listed
        with pytest.raises(InputError, match="expired") as expired:
            s.answer_input(late.id, True)
        assert expired.value.kind == "expired"
        assert s.generate().text == "gave up again"
        assert "before its deadline" in results(s.events)[-1].output.value
    assert ran == []


def test_ask_human_outside_a_generation_and_bad_arguments_say_what_to_do():
    ctx = ToolContext(tool_call_id="c", tool_name="t", cancel=__import__("agentkit").CancelToken())
    assert ctx.step("s", lambda: 3) == 3  # outside a generation the step just runs
    with pytest.raises(ConfigurationError, match="answer_input"):
        ctx.ask_human("?")
    with pytest.raises(ConfigurationError, match="non-empty str name"):
        ctx.step("", lambda: 1)

    @tool
    def bad(which: str, ctx: ToolContext) -> str:
        """Misuse ask_human and step."""
        if which == "schema":
            ctx.ask_human("q", schema={"type": "nonsense"})
        if which == "timeout":
            ctx.ask_human("q", timeout=-1)
        ctx.step("x", lambda: object())
        return "unreachable"

    calls = [ToolCall(name="bad", input={"which": w}) for w in ("schema", "timeout", "json")]
    result = run_agent(ScriptedModel([calls, "done"]), "go", tools=[bad])
    errors = [r.output.value for r in result.tool_calls]
    assert "not a valid JSON Schema" in errors[0]
    assert "timeout=" in errors[1]
    assert "cannot be recorded: it is not plain JSON" in errors[2]


def test_ask_human_is_not_swallowed_by_a_tools_except_exception_and_parallel_calls_keep_their_results():
    @tool
    def careful(ctx: ToolContext) -> str:
        """Ask inside a broad try."""
        try:
            return str(ctx.ask_human("ok?"))
        except Exception:  # noqa: BLE001 - what a defensive tool does
            return "swallowed"

    @tool
    def quick(n: int) -> int:
        """Return n."""
        return n

    calls = [ToolCall(name="careful", input={}, id="c1"), ToolCall(name="quick", input={"n": 7}, id="c2")]
    with Session(ScriptedModel([calls, "both done"]), tools=[careful, quick], tool_execution="parallel") as s:
        assert s.ask("go").finish_reason == "input-required"
        assert [(r.tool_call_id, r.output.value) for r in results(s.events)] == [("c2", 7)]
        s.answer_input(s.pending_inputs()[0].id, "fine")
        assert s.generate().text == "both done"
    assert [(r.tool_call_id, r.output.value) for r in results(s.events)] == [("c2", 7), ("c1", "fine")]


def test_journal_and_input_records_cannot_be_pushed_from_outside():
    with Session(ScriptedModel([])) as s:
        for action in ("tool-step-recorded", "input-requested", "input-answered", "input-closed"):
            with pytest.raises(ConfigurationError, match="cannot be pushed"):
                s.push_event(ControlEvent(action=action, data={}))


# -- reconcile probes ---------------------------------------------------------------------


def crashed_log(store, sid: str, tool_name: str, tool_input: dict, call_id: str = "call-x") -> str:
    """The log a process killed while ``tool_name`` ran leaves: the user message, the
    assistant's call, its committed intent, no result. Returns the intent id."""
    intent = ControlEvent(action="tool-execution-intent",
                          data={"tool_call_id": call_id, "tool_name": tool_name, "input": tool_input})
    events = [
        UserMessageEvent(content=(TextPart(text="do it"),)),
        AssistantMessageEvent(content=(ToolCallPart(tool_call_id=call_id, tool_name=tool_name, input=tool_input),)),
        intent,
    ]
    store.append(sid, [e.with_seq(i + 1) for i, e in enumerate(events)], expected_revision=0)
    return intent.id


@pytest.mark.parametrize("verdict", ["executed", "not-executed", None, "raises", "nonsense"])
def test_a_probe_settles_an_uncertain_call_before_the_model_is_asked(verdict):
    store = InMemoryEventStore()
    intent_id = crashed_log(store, "s", "charge", {"amount": 9})
    probed: list[tuple[dict, str | None]] = []
    runs: list[tuple[str, str | None]] = []

    def probe(args: dict, ctx: ToolContext):
        probed.append((args, ctx.idempotency_key))
        if verdict == "raises":
            raise RuntimeError("the payment API is down")
        return verdict

    @tool(reconcile=probe)
    def charge(amount: int, ctx: ToolContext) -> str:
        """Charge."""
        runs.append((ctx.tool_call_id, ctx.idempotency_key))
        return f"charged {amount}"

    seen: list[str] = []

    def answer(messages):
        seen.append(messages[-1].content[0].output.value)  # what the model reads of the call
        return "settled"

    from agentkit import FunctionModel

    model = FunctionModel(lambda req: answer(req.messages))
    with Session.open("s", store=store, model=model, tools=[charge]) as s:
        assert s.generate().text == "settled"  # a reopened session goes on, no new message
        reconciled = controls(s.events, "tool-execution-reconciled")
        uncertain = s.uncertain_tool_executions()
    assert probed == [({"amount": 9}, intent_id)]
    if verdict == "executed":
        assert runs == [] and "took effect" in seen[0]
        assert [r.data for r in reconciled] == [{"intent_id": intent_id, "resolution": "executed", "source": "probe"}]
        assert uncertain == []
    elif verdict == "not-executed":
        assert runs == [("call-x", intent_id)]  # the same call, the same key
        assert seen == ["charged 9"]
        assert [r.data["resolution"] for r in reconciled] == ["not-executed"]
        assert uncertain == []
    else:  # unknown, or a probe that failed: uncertain as without one; generate() did not fail
        assert runs == [] and reconciled == []
        assert [u.intent_id for u in uncertain] == [intent_id]
        assert "interrupted" in seen[0]


def test_a_probe_set_with_dataclasses_replace_and_finished_steps_are_not_run_again():
    store = InMemoryEventStore()
    intent_id = crashed_log(store, "s", "book", {"trip": "T"})
    # the killed run had finished its first step
    store.append("s", [ControlEvent(action="tool-step-recorded", data={
        "key": intent_id, "tool_call_id": "call-x", "name": "flight", "result": {"seat": "12A"}}).with_seq(4)],
        expected_revision=3)
    effects = Effects()

    @tool
    def book(trip: str, ctx: ToolContext) -> str:
        """Book flight then hotel."""
        flight = ctx.step("flight", lambda: {"seat": effects.do("flight")})
        hotel = ctx.step("hotel", lambda: effects.do("hotel"))
        return f"{trip}: seat {flight['seat']}, {hotel}"

    probing = dataclasses.replace(book, reconcile=lambda args, ctx: "not-executed")
    with Session.open("s", store=store, model=ScriptedModel(["booked"]), tools=[probing]) as s:
        assert s.generate().text == "booked"
        assert results(s.events)[-1].output.value == "T: seat 12A, hotel-ok"
    assert effects.done == ["hotel"]  # the recorded flight was not booked again


def test_the_probes_verdict_is_committed_once_however_often_sessions_probe():
    store = InMemoryEventStore()
    crashed_log(store, "s", "send", {"to": "x"})
    probes = []

    @tool(reconcile=lambda args, ctx: probes.append(1) or "executed")
    def send(to: str) -> str:
        """Send."""
        raise AssertionError("must not run")

    with Session.open("s", store=store, model=ScriptedModel(["one", "two"]), tools=[send]) as a, \
            Session.open("s", store=store, model=ScriptedModel(["three"]), tools=[send]) as b:
        assert a.generate().text == "one"
        assert b.generate().finish_reason == "nothing-to-answer"  # b caught up: nothing open
        assert len(controls(b.events, "tool-execution-reconciled")) == 1
    assert probes == [1]


def test_while_a_question_waits_generate_calls_no_model_and_says_input_required_again():
    @tool
    def ask(ctx: ToolContext) -> str:
        """Ask."""
        return str(ctx.ask_human("name?"))

    model = ScriptedModel([ToolCall(name="ask", input={}), "hello Ada"])
    with Session(model, tools=[ask]) as s:
        assert s.ask("greet me").finish_reason == "input-required"
        s.push_user_message("are you there?")
        again = s.generate()
        assert again.finish_reason == "input-required" and again.steps == ()  # no model call
        s.answer_input(s.pending_inputs()[0].id, "Ada")
        assert s.generate().text == "hello Ada"


def test_a_step_that_finishes_after_its_generation_ended_is_refused_not_committed_outside_its_turn(tmp_path):
    import threading

    from agentkit import CancelledError, CancelToken, TurnLockLostError

    entered, release, done = threading.Event(), threading.Event(), threading.Event()
    box: dict = {}

    @tool
    def slow(ctx: ToolContext) -> str:
        """A step that outlives its cancelled generation."""
        def run() -> str:
            entered.set()
            assert release.wait(60)
            return "late"

        try:
            box["step"] = ctx.step("s", run)
        except TurnLockLostError as exc:
            box["refused"] = str(exc)
        done.set()
        return "x"

    @tool
    def quick() -> str:
        """Return at once."""
        return "q"

    model = ScriptedModel([[ToolCall(name="slow", input={}), ToolCall(name="quick", input={})], "after"])
    token = CancelToken()
    with Session.open("s", store=FileEventStore(tmp_path), model=model, tools=[slow, quick],
                      tool_execution="parallel") as s:
        s.push_user_message("go")
        runner = threading.Thread(target=lambda: box.setdefault("gen", pytest.raises(CancelledError, s.generate,
                                                                                       cancel=token)))
        runner.start()
        assert entered.wait(60)
        token.cancel("the user left")  # the generation ends at once; the slow call's step still runs
        runner.join(60)
        release.set()
        assert done.wait(60)
        assert "step" not in box and "no longer held" in box["refused"]  # (main: committed, unfenced)
        assert controls(s.events, "tool-step-recorded") == []
    assert controls(FileEventStore(tmp_path).load("s").events, "tool-step-recorded") == []
