"""Session: thread safety, commit order, the generation gate, listeners, lifecycle."""

from __future__ import annotations

import threading
import time
import warnings

import pytest
from _deep import nested
from _procs import wait_for
from _tools import add

from agentkit import (
    CancelledError,
    CancelToken,
    ConfigurationError,
    FileEventStore,
    FunctionModel,
    InMemoryEventStore,
    ScriptedModel,
    Session,
    SessionClosedError,
    ToolCall,
    tool,
)
from agentkit.events import AssistantMessageEvent, ControlEvent, RuntimeEvent, ToolResultEvent, UserMessageEvent
from agentkit.messages import ImagePart, TextPart, ToolCallPart


def echo_model():
    return FunctionModel(lambda r: "saw " + ",".join(m.text for m in r.messages if m.role == "user"))


def test_push_and_generate_basics():
    with Session(echo_model(), system="sys") as s:
        e = s.push_user_message("hello")
        assert e.seq == 1 and isinstance(e, UserMessageEvent)
        r = s.generate()
        assert r.text == "saw hello"
        assert [type(ev) for ev in r.events] == [UserMessageEvent, AssistantMessageEvent]
        assert [ev.seq for ev in r.events] == [1, 2]
        assert s.model_messages()[-1].text == "saw hello"
        rt = s.push_runtime_event("timer-fired", {"at": 1})
        assert isinstance(rt, RuntimeEvent) and rt.seq == 3
        assert "timer-fired" in s.model_messages()[-1].text


def test_many_threads_pushing_get_unique_consecutive_seq_in_commit_order():
    s = Session(echo_model())
    per_thread = 200

    def pusher(k):
        for i in range(per_thread):
            s.push_runtime_event("tick", {"thread": k, "i": i})

    threads = [threading.Thread(target=pusher, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = s.events
    assert [e.seq for e in events] == list(range(1, 6 * per_thread + 1))
    for k in range(6):  # each thread's events keep their order
        mine = [e.data["i"] for e in events if e.data["thread"] == k]
        assert mine == list(range(per_thread))
    s.close()


def test_generate_calls_from_threads_run_one_at_a_time_in_call_order():
    active, order, peak = [0], [], [0]
    lock = threading.Lock()
    gate = threading.Event()

    def reply(request):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        tag = [m.text for m in request.messages if m.role == "user"][-1]
        order.append(tag)
        if tag == "first":
            gate.wait(20)
        time.sleep(0.01)
        with lock:
            active[0] -= 1
        return f"done {tag}"

    s = Session(FunctionModel(reply))
    results = {}

    def gen(name):
        results[name] = s.generate().text

    s.push_user_message("first")
    t0 = threading.Thread(target=gen, args=("g0",))
    t0.start()
    assert wait_for(lambda: order == ["first"])
    threads = []
    for i in range(1, 4):  # queue three more, in a known order
        t = threading.Thread(target=gen, args=(f"g{i}",))
        t.start()
        threads.append(t)
        assert wait_for(lambda i=i: len(s._queue) == i + 1)
    s.push_user_message("pushed during inference")
    gate.set()
    for t in [t0, *threads]:
        t.join(20)
    assert peak[0] == 1
    # the first inference ran on a frozen snapshot; the push it did not see came next
    assert order[0] == "first" and order[1] == "pushed during inference"
    assert results["g0"] == "done first" and results["g1"] == "done pushed during inference"
    s.close()


def test_events_pushed_during_inference_are_committed_and_seen_next_time():
    started, release = threading.Event(), threading.Event()
    seen = []

    def reply(request):
        seen.append([m.text for m in request.messages])
        if len(seen) == 1:
            started.set()
            release.wait(20)
        return "ok"

    s = Session(FunctionModel(reply))
    s.push_user_message("one")
    t = threading.Thread(target=s.generate)
    t.start()
    assert started.wait(20)
    pushed = s.push_user_message("two")  # committed immediately, even mid-inference
    assert s.events[-1] == pushed
    release.set()
    t.join(20)
    s.generate()
    assert seen[0] == ["one"]
    # "two" arrived while the model answered "one": it is shown after that answer, unanswered
    assert seen[1] == ["one", "ok", "two"]
    s.close()


def test_failed_generate_does_not_block_the_queue():
    calls = [0]

    def reply(request):
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("provider down")
        return "recovered"

    s = Session(FunctionModel(reply))
    s.push_user_message("x")
    with pytest.raises(RuntimeError, match="provider down"):
        s.generate()
    assert s.generate().text == "recovered"
    s.close()


def test_abort_current_generation_cancels_and_the_next_one_runs():
    started = threading.Event()

    @tool
    def slow() -> str:
        """Block until cancelled."""
        started.set()
        time.sleep(0.2)
        return "slow done"

    model = ScriptedModel([ToolCall("slow"), "never", "after abort"])
    s = Session(model, tools=[slow])
    s.push_user_message("go")
    errors = []

    def run():
        try:
            s.generate()
        except CancelledError as exc:
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    assert started.wait(20)
    assert s.abort_current_generation("user pressed stop") is True
    t.join(20)
    assert errors and "user pressed stop" in str(errors[0])
    kinds = [type(e) for e in s.events]
    assert ControlEvent in kinds and ToolResultEvent in kinds  # the finished tool was committed
    assert s.abort_current_generation() is False
    assert s.generate().text == "never"  # the queue is free; the script continues
    s.close()


def test_orphaned_tool_calls_are_closed_before_the_next_inference():
    model = ScriptedModel([lambda r: "roles=" + ",".join(m.role for m in r.messages)])
    s = Session(model)
    s.push_user_message("go")
    s.push_event(AssistantMessageEvent(content=(ToolCallPart(tool_call_id="lost", tool_name="t", input={}),)))
    r = s.generate()
    assert r.text == "roles=user,assistant,tool"
    closing = [e for e in s.events if isinstance(e, ToolResultEvent)]
    assert closing[0].tool_call_id == "lost" and closing[0].output.is_error
    s.close()


def test_external_cancel_token_and_per_call_overrides():
    token = CancelToken()
    token.cancel("already")
    s = Session(ScriptedModel(["a", "b"]), system="default")
    s.push_user_message("x")
    with pytest.raises(CancelledError):
        s.generate(cancel=token)
    r = s.generate(system="override", model=ScriptedModel(["other model"]))
    assert r.text == "other model"
    s.close()


def test_listeners_receive_events_in_commit_order_and_can_unsubscribe():
    s = Session(echo_model())
    got = []
    unsubscribe = s.subscribe(got.append)
    s.push_user_message("a")
    s.generate()
    assert wait_for(lambda: len(got) == 2)
    assert [e.seq for e in got] == [1, 2]
    unsubscribe()
    s.push_user_message("b")
    time.sleep(0.05)
    assert len(got) == 2
    s.close()


def test_unsubscribe_with_drain_delivers_every_queued_event_before_it_returns():
    s = Session(echo_model())
    got, release = [], threading.Event()

    def slow(event):
        release.wait(20)  # events queue up behind the first call
        got.append(event.seq)

    unsubscribe = s.subscribe(slow)
    for i in range(5):
        s.push_user_message(str(i))
    threading.Timer(0.2, release.set).start()
    unsubscribe(drain=True, timeout=20)
    assert got == [1, 2, 3, 4, 5]  # all queued, none dropped, in order
    s.push_user_message("after")
    time.sleep(0.05)
    assert got == [1, 2, 3, 4, 5]  # and nothing after the unsubscribe
    s.close()


def test_unsubscribe_with_drain_gives_up_after_its_timeout_and_checks_it():
    s = Session(echo_model())
    release = threading.Event()
    unsubscribe = s.subscribe(lambda event: release.wait(30))
    s.push_user_message("x")
    with pytest.raises(ConfigurationError, match="timeout"):
        unsubscribe(drain=True, timeout=-1)
    assert len(s._subs) == 1  # a bad call removed nothing
    unsubscribe(drain=True, timeout=0.2)  # returns although the listener is stalled
    release.set()
    assert s._subs == []
    s.close()


def test_a_raising_listener_is_removed_with_a_warning_and_the_session_goes_on():
    s = Session(echo_model())
    good = []

    def bad(event):
        raise ValueError("listener bug")

    s.subscribe(bad)
    s.subscribe(good.append)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s.push_user_message("a")
        assert wait_for(lambda: any("listener bug" in str(w.message) for w in caught))
    s.push_user_message("b")
    assert wait_for(lambda: len(good) == 2)
    assert len(s._subs) == 1
    s.close()


def test_a_stalled_listener_is_removed_without_blocking_commits():
    s = Session(echo_model(), listener_timeout=0.2, listener_queue_size=5)
    release = threading.Event()
    s.subscribe(lambda e: release.wait(30))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.monotonic()
        for i in range(50):
            s.push_runtime_event("tick", {"i": i})
            time.sleep(0.01)
        elapsed = time.monotonic() - start
    assert len(s.events) == 50
    assert s._subs == [] and any("removed session listener" in str(w.message) for w in caught)
    assert elapsed < 20
    release.set()
    s.close()


def test_close_refuses_further_work_and_is_idempotent():
    s = Session(echo_model())
    s.push_user_message("x")
    s.close()
    s.close()
    assert s.closed
    with pytest.raises(SessionClosedError):
        s.push_user_message("y")
    with pytest.raises(SessionClosedError):
        s.generate()


def test_abort_session_refuses_future_generations():
    s = Session(echo_model())
    s.push_user_message("x")
    s.abort_session("shutting down")
    with pytest.raises(SessionClosedError, match="shutting down"):
        s.generate()
    s.push_user_message("pushes still work")
    s.close()


def test_bad_input_raises_before_side_effects():
    s = Session(echo_model())
    with pytest.raises(ConfigurationError):
        s.push_user_message([])
    with pytest.raises(ConfigurationError):
        s.push_runtime_event("x", {"bad": object()})
    with pytest.raises(ConfigurationError):
        s.push_event("not an event")  # type: ignore[arg-type]
    e = s.push_user_message("ok")
    with pytest.raises(ConfigurationError, match="already committed"):
        s.push_event(e)
    with pytest.raises(ConfigurationError, match="invalid session id"):
        Session(echo_model(), session_id="../etc")
    with pytest.raises(ConfigurationError, match="no model"):
        Session().generate()
    assert len(s.events) == 1
    s.close()


def test_session_seeded_with_events_continues_from_them():
    first = Session(echo_model())
    first.push_user_message("earlier")
    first.generate()
    events = first.events
    second = Session(echo_model(), events=[e.with_seq(0) for e in events])
    second.push_user_message("later")
    assert second.generate().text == "saw earlier,later"
    assert [e.seq for e in second.events] == [1, 2, 3, 4]


def test_a_user_message_pushed_while_tools_run_comes_after_their_real_results():
    started, release = threading.Barrier(3, timeout=20), threading.Event()

    @tool
    def work(n: int) -> str:
        """Work until released."""
        started.wait()
        release.wait(20)
        return f"done {n}"

    def final(request):
        return "|".join(
            f"{m.role}:" + (",".join(p.output.as_text() for p in m.content) if m.role == "tool" else m.text)
            for m in request.messages
        )

    model = ScriptedModel([[ToolCall("work", {"n": 1}), ToolCall("work", {"n": 2})], final, final])
    s = Session(model, tools=[work])
    s.push_user_message("go")
    t = threading.Thread(target=s.generate)
    t.start()
    started.wait()  # both tools are running
    s.push_user_message("by the way")
    release.set()
    t.join(20)
    # the real results were shown, not "interrupted", and the user message follows them
    assert model.requests[1].messages[-2].content[0].output.value == "done 1"
    seen = final(model.requests[1])
    assert seen.endswith("tool:done 1,done 2|user:by the way") and "interrupted" not in seen
    s.close()


def test_generate_from_inside_a_tool_of_the_same_session_fails_clearly_instead_of_deadlocking():
    holder = {}

    @tool
    def reenter() -> str:
        """Call generate() on the session running this tool."""
        return holder["s"].generate().text

    for mode in ("sequential", "parallel"):
        s = holder["s"] = Session(ScriptedModel([[ToolCall("reenter"), ToolCall("reenter")], "done"]),
                                  tools=[reenter], tool_execution=mode)
        s.push_user_message("go")
        result = {}
        t = threading.Thread(target=lambda s=s, result=result: result.setdefault("r", s.generate()), daemon=True)
        t.start()
        t.join(20)
        assert not t.is_alive(), f"{mode}: generate() deadlocked"
        assert result["r"].text == "done"
        for call in result["r"].tool_calls:
            assert "SessionError" in call.error and "wait for itself forever" in call.error
        s.close()
    other = Session(ScriptedModel(["inner answer"]))
    other.push_user_message("hi")

    @tool
    def ask_other() -> str:
        """Another session may be driven from a tool."""
        return other.generate().text

    assert run_agent_text([ToolCall("ask_other"), "ok"], [ask_other]) == ["inner answer"]


def run_agent_text(script, tools):
    from agentkit import run_agent

    return [c.output.value for c in run_agent(ScriptedModel(script), "go", tools=tools).tool_calls]


def _session_with_a_held_gate():
    """A session whose first generate() runs and holds the gate until ``release`` is set."""
    running, release = threading.Event(), threading.Event()

    def reply(request):
        if not running.is_set():
            running.set()
            release.wait(20)
        return "ok"

    s = Session(FunctionModel(reply))
    s.push_user_message("x")
    first = threading.Thread(target=s.generate)
    first.start()
    assert running.wait(20)
    return s, first, release


def test_a_queued_generate_whose_token_is_cancelled_leaves_the_queue_at_once():
    s, first, release = _session_with_a_held_gate()
    token, outcome = CancelToken(), {}

    def queued():
        try:
            s.generate(cancel=token)
        except CancelledError as exc:
            outcome["error"] = exc

    waiter = threading.Thread(target=queued)
    waiter.start()
    assert wait_for(lambda: len(s._queue) == 2)
    token.cancel("no longer needed")
    waiter.join(20)
    assert not waiter.is_alive() and "no longer needed" in str(outcome["error"])
    assert first.is_alive() and list(s._queue) != [] and len(s._queue) == 1  # the first still runs
    release.set()
    first.join(20)
    s.push_user_message("y")
    assert s.generate().text == "ok"  # nothing was left behind in the queue
    assert not any(isinstance(e, ControlEvent) for e in s.events)  # it never started
    s.close()


def test_ctrl_c_while_waiting_for_the_gate_does_not_block_later_generations():
    import signal

    s, first, release = _session_with_a_held_gate()
    main = threading.main_thread().ident

    def interrupt():
        if wait_for(lambda: len(s._queue) == 2):
            signal.pthread_kill(main, signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt).start()
        with pytest.raises(KeyboardInterrupt):
            s.generate()  # queued behind the first, in the main thread
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(s._queue) == 1
    release.set()
    first.join(20)
    s.push_user_message("y")
    assert s.generate().text == "ok"
    s.close()


def test_abort_returns_at_once_while_a_parallel_tool_ignores_its_token():
    release = threading.Event()
    started = threading.Event()

    @tool
    def stubborn() -> str:
        """Ignore cancellation."""
        started.set()
        release.wait(30)
        return "late"

    quick_done = threading.Event()

    @tool
    def quick() -> str:
        """Finish at once."""
        quick_done.set()
        return "quick result"

    s = Session(ScriptedModel([[ToolCall("stubborn"), ToolCall("quick"), ToolCall("quick")], "next"]),
                tools=[stubborn, quick], max_tool_workers=2)  # the third call waits for a worker
    s.push_user_message("go")
    errors = []
    t = threading.Thread(target=lambda: errors.append(pytest.raises(CancelledError, s.generate).value))
    t.start()
    assert started.wait(20) and quick_done.wait(20) and wait_for(lambda: len(s.events) == 2)
    time.sleep(0.5)  # let the finished call's worker hand its result back (a bound for loaded machines)
    s.abort_current_generation("user pressed stop")
    t.join(20)
    assert not t.is_alive() and "user pressed stop" in str(errors[0])  # did not wait for stubborn
    results = [e.output for e in s.events if isinstance(e, ToolResultEvent)]
    assert len(results) == 3  # one per call, in the order the model wrote them
    assert "while this tool call was running; it may or may not have taken effect" in results[0].value
    assert results[1].value == "quick result"
    assert results[2].value == "quick result" or "before this tool call ran" in results[2].value
    release.set()
    assert s.generate().text == "next"  # a valid conversation goes on
    s.close()


def test_abort_does_not_wait_out_a_tool_timeout():
    release = threading.Event()

    @tool(timeout=60)
    def hang() -> str:
        """Ignore cancellation for a long time."""
        release.wait(30)
        return "late"

    s = Session(ScriptedModel([ToolCall("hang"), "after"]), tools=[hang])
    s.push_user_message("go")
    t = threading.Thread(target=lambda: pytest.raises(CancelledError, s.generate))
    t.start()
    assert wait_for(lambda: len(s.events) == 2)
    s.abort_current_generation("stop")
    t.join(20)
    assert not t.is_alive()
    release.set()
    s.close()


def test_tools_in_worker_threads_see_the_callers_context_variables():
    import contextvars

    request_id = contextvars.ContextVar("request_id", default=None)
    seen = []

    @tool
    def where() -> str:
        """Report the request id."""
        seen.append(request_id.get())
        return "ok"

    @tool(timeout=10)
    def where_timed() -> str:
        """Report the request id from a timed call."""
        seen.append(request_id.get())
        return "ok"

    request_id.set("req-7")
    s = Session(ScriptedModel([[ToolCall("where"), ToolCall("where"), ToolCall("where_timed")], "done"]),
                tools=[where, where_timed])
    s.push_user_message("go")
    s.generate()
    assert seen == ["req-7"] * 3
    s.close()


def test_threads_pushing_and_generating_at_once_keep_seq_order_and_lose_nothing():
    s = Session(echo_model())
    pushers, generators, per_thread = 4, 3, 50
    errors, reasons = [], []

    def pusher(k):
        try:
            for i in range(per_thread):
                s.push_user_message(f"p{k}-{i}")
        except Exception as exc:
            errors.append(exc)

    def generator():
        try:
            for _ in range(5):
                reasons.append(s.generate().finish_reason)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=pusher, args=(k,)) for k in range(pushers)]
    threads += [threading.Thread(target=generator) for _ in range(generators)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    events = s.events
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    answers = [e for e in events if isinstance(e, AssistantMessageEvent)]
    # a generate() that found every message answered called no model
    assert len(reasons) == generators * 5 and set(reasons) <= {"stop", "nothing-to-answer"}
    assert len(answers) == reasons.count("stop") >= 1
    for k in range(pushers):  # every push is there, each thread's in its own order
        mine = [e.content[0].text for e in events if isinstance(e, UserMessageEvent)
                and e.content[0].text.startswith(f"p{k}-")]
        assert mine == [f"p{k}-{i}" for i in range(per_thread)]
    # each inference saw a snapshot: the user messages committed before it started, in seq
    # order (a prefix of those before its answer), and at least all that the previous saw
    previous = 0
    for ans in answers:
        before = [e.content[0].text for e in events if isinstance(e, UserMessageEvent) and e.seq < ans.seq]
        seen = [t for t in ans.content[0].text.removeprefix("saw ").split(",") if t]
        assert seen == before[: len(seen)] and len(seen) >= previous
        previous = len(seen)
    s.close()


def test_a_removed_listener_is_never_called_again_not_even_for_events_queued_before():
    s = Session(echo_model(), listener_timeout=0.2)
    calls, release = [], threading.Event()

    def slow(event):
        calls.append(event.seq)
        if event.seq == 1:
            release.wait(20)

    s.subscribe(slow)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s.push_user_message("1")
        assert wait_for(lambda: calls == [1])
        s.push_user_message("2")  # queued behind the stalled call
        assert wait_for(lambda: (s.push_runtime_event("tick") and False) or s._subs == [])
    assert any("stalled" in str(w.message) for w in caught)
    release.set()
    time.sleep(0.1)  # give a wrongly-alive delivery thread the chance to misbehave
    assert calls == [1]
    s.close()


def test_a_listener_that_unsubscribes_itself_hears_nothing_more():
    s = Session(echo_model())
    calls, gate = [], threading.Event()
    holder = {}

    def once(event):
        calls.append(event.seq)
        gate.wait(20)  # let more events queue up behind this call
        holder["unsubscribe"]()

    holder["unsubscribe"] = s.subscribe(once)
    for i in range(5):
        s.push_user_message(str(i))
    gate.set()
    assert wait_for(lambda: s._subs == [])
    s.push_user_message("after")
    time.sleep(0.1)
    assert calls == [1]
    s.close()


def test_close_waits_for_stalled_listeners_within_one_shared_bound(monkeypatch):
    import agentkit.session._lifecycle as session_module

    monkeypatch.setattr(session_module, "_LISTENER_JOIN_SECONDS", 2.0)
    s = Session(echo_model())
    release = threading.Event()
    for _ in range(6):
        s.subscribe(lambda e: release.wait(30))
    s.push_user_message("x")
    start = time.monotonic()
    s.close()
    elapsed = time.monotonic() - start
    release.set()
    # about 2 s (one shared bound); 12 s if each listener had its own: the margin between
    # is for a loaded machine
    assert elapsed < 8


def test_listener_options_and_session_defaults_are_checked_without_a_model():
    for bad in ({"listener_queue_size": 0}, {"listener_timeout": 0}, {"max_steps": 0}, {"max_tool_workers": 0}):
        with pytest.raises(ConfigurationError):
            Session(**bad)


def test_an_event_given_twice_in_one_batch_is_refused_before_anything_is_committed():
    e = UserMessageEvent(content=(TextPart(text="once"),))
    with pytest.raises(ConfigurationError, match="given twice"):
        Session(echo_model(), events=[e, e])


def test_multimodal_user_messages_reach_the_model_from_a_session():
    model = ScriptedModel(["a cat"])
    img = ImagePart(url="https://example.invalid/cat.png", media_type="image/png")
    with Session(model) as s:
        s.push_user_message(["what is this?", img])
        s.generate()
    assert model.requests[0].messages[0].content == (TextPart(text="what is this?"), img)


def test_the_projection_is_incremental_earlier_messages_are_not_rebuilt():
    model = FunctionModel(lambda r: ToolCall("add", {"a": 1, "b": 1}) if r.messages[-1].role == "user" else "ok")

    with Session(model, tools=[add]) as s:
        for i in range(5):
            s.push_user_message(f"turn {i}")
            s.generate()
        first, last = model.requests[0].messages, model.requests[-1].messages
        # the same Message objects are handed to every later request: history is never re-projected
        assert all(a is b for a, b in zip(first, last[: len(first)], strict=True))
        assert all(a is b for a, b in zip(model.requests[-2].messages, last[:-2], strict=True))
        assert s._projector.count == len(s.events)


def test_close_from_a_tool_or_a_listener_does_not_deadlock():
    holder = {}

    @tool
    def shut() -> str:
        """Close the session running this tool."""
        holder["s"].close()
        return "closed"

    for mode in ("sequential", "parallel"):
        s = holder["s"] = Session(ScriptedModel([[ToolCall("shut"), ToolCall("shut")], "never"]),
                                  tools=[shut], tool_execution=mode)
        s.push_user_message("go")
        outcome = {}

        def run(s=s, outcome=outcome):
            try:
                s.generate()
            except (SessionClosedError, CancelledError) as exc:
                outcome["error"] = exc

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(20)
        assert not t.is_alive(), f"{mode}: close() from a tool deadlocked"
        assert "error" in outcome and s.closed

    s = Session(echo_model())
    heard = []

    def closer(event):
        heard.append(event.seq)
        s.close()

    s.subscribe(closer)
    s.subscribe(heard.append)
    s.push_user_message("x")
    assert wait_for(lambda: s.closed and len(heard) == 2)


def test_every_tool_call_gets_one_start_and_one_finish_callback_in_order():
    @tool
    def echo(x: int) -> int:
        """Echo."""
        return x

    script = [
        [ToolCall("echo", {"x": 1}, id="a"), ToolCall("echo", {"x": 1}, id="a"), ToolCall("nope", id="b")],
        ToolCall("echo", {"x": 1}, id="a"),  # reused
        "done",
    ]
    for mode in ("parallel", "sequential"):
        seen = []
        with Session(ScriptedModel(script), tools=[echo], tool_execution=mode) as s:
            s.push_user_message("go")
            s.generate(on_tool_call_start=lambda c, seen=seen: seen.append(("start", c.tool_call_id)),
                       on_tool_call_finish=lambda r, seen=seen: seen.append(("finish", r.tool_call_id)))
        starts = [cid for kind, cid in seen if kind == "start"]
        finishes = [cid for kind, cid in seen if kind == "finish"]
        assert starts == finishes == ["a", "a", "b", "a"], mode


def test_subscribing_to_a_closed_session_is_refused_without_starting_a_thread():
    s = Session(echo_model())
    s.close()
    before = threading.active_count()
    with pytest.raises(SessionClosedError):
        s.subscribe(print)
    assert threading.active_count() <= before


# -- strict JSON -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", [None, "memory", "file"])
def test_data_that_is_not_strict_json_is_refused_before_anything_is_committed(tmp_path, kind):
    store = {None: None, "memory": InMemoryEventStore(), "file": FileEventStore(tmp_path)}[kind]
    s = Session(store=store, session_id="s" if store else None)
    heard: list[int] = []
    s.subscribe(lambda e: heard.append(e.seq))
    for data, match in (
        ({1: "a", "b": 2}, "has the key 1"),  # mixed keys used to fail the durable session
        ({1: "a"}, "has the key 1"),
        ({"p": (1, 2)}, "is a tuple"),
        ({"x": float("nan")}, "is nan"),
        ({"x": float("inf")}, "is inf"),
        ({"deep": nested(500)}, "deeper than 500 levels"),
    ):
        with pytest.raises(ConfigurationError, match=match):
            s.push_runtime_event("tick", data)
    for data in ("text", ["a", "b"], [("a", 1)]):
        with pytest.raises(ConfigurationError, match=r"runtime event 'tick' data must be a dict \(a JSON object\)"):
            s.push_runtime_event("tick", data)
    slipped = RuntimeEvent(runtime_type="tick", data={"k": []})
    slipped.data["k"].append((1, 2))  # changed after its own check
    with pytest.raises(ConfigurationError, match=r"cannot commit runtime event .*\$\.data\.k\[0\] is a tuple"):
        s.push_event(slipped)
    call = ToolCallPart(tool_call_id="c1", tool_name="t", input={"x": float("nan")})
    expected = r"cannot commit assistant-message event .*is nan.*Nothing was committed"
    with pytest.raises(ConfigurationError, match=expected):
        s.push_event(AssistantMessageEvent(content=(call,)))
    assert s.events == () and s.revision == 0
    data = {"n": [1, {"k": "v", "e": []}], "f": 0.5, "big": 2**70, "t": True, "none": None, "deep": nested(499)}
    ok = s.push_runtime_event("tick", data)  # the session stays usable
    assert ok.seq == 1 and [e.seq for e in s.events] == [1]
    assert wait_for(lambda: heard == [1])
    s.close()
    if store is not None:
        (restored,) = store.load("s").events
        assert restored == ok and restored.data == data  # exactly as committed


def test_the_public_doors_take_no_private_argument_at_run_time_either():
    """What agentkit passes internally (where a stream's events go, ask's prompt, an
    Agent's built options, open()'s seeding) is not an argument of the public doors: a
    caller passing one gets an error, not a changed behaviour."""
    with Session(ScriptedModel(["hi"])) as session:
        session.push_user_message("x")
        for private in ({"_emit": print}, {"emit": print}, {"prompt": "x"}, {"_prompt": None}, {"options": {}}):
            with pytest.raises(ConfigurationError, match="unknown option"):
                session.generate(**private)
            if "prompt" not in private:  # ask's own first parameter
                with pytest.raises(ConfigurationError, match="unknown option"):
                    session.ask("x", **private)
        assert session.generate().text == "hi"
    for private in ({"_seed_if_new": True}, {"_options": None}):
        with pytest.raises(TypeError):
            Session(ScriptedModel([]), **private)
