"""Keyed, debounced generations (Session.schedule_generate and GenerationScheduler)."""

from __future__ import annotations

import concurrent.futures
import threading
import time

import pytest
from _procs import wait_for

from agentkit import (
    CancelledError,
    CancelToken,
    ConfigurationError,
    FunctionModel,
    ScriptedModel,
    ScriptExhaustedError,
    Session,
    SessionClosedError,
)
from agentkit.session._scheduling import GenerationScheduler


class Clocked:
    """A model that records when each inference started."""

    def __init__(self, reply="ok", block: bool = False):
        self.started: list[float] = []
        self.block = block
        self.model = FunctionModel(self._reply)
        self.reply = reply

    def _reply(self, request):
        self.started.append(time.monotonic())
        if self.block:  # hold the generation until it is cancelled
            request.cancel.wait(30)
        return self.reply


def test_same_key_calls_reset_the_timer_and_share_one_future():
    clock = Clocked("answer")
    with Session(clock.model) as session:
        session.push_user_message("hi")
        futures = []
        # calls 0.1 s apart, each resetting a 3 s quiet period: a loaded machine would have
        # to stall one gap 30 times over for the timer to fire between two of them
        for _ in range(4):
            last_call = time.monotonic()
            futures.append(session.schedule_generate("k", debounce=3.0))
            time.sleep(0.1)
        assert all(f is futures[0] for f in futures)
        assert futures[0].result(timeout=30).text == "answer"
        assert len(clock.started) == 1
        # the quiet period counted from the last call, not the first
        assert clock.started[0] >= last_call + 3.0
        # a call after it finished schedules a new generation (for the new event)
        session.push_runtime_event("job-finished", {"job": "j1"})
        again = session.schedule_generate("k", debounce=0.01)
        assert again is not futures[0]
        again.result(timeout=30)
        assert len(clock.started) == 2


def test_different_keys_run_separately_and_in_turn():
    clock = Clocked()
    with Session(clock.model) as session:
        session.push_user_message("hi")
        a = session.schedule_generate("a", debounce=0.01)
        b = session.schedule_generate("b", debounce=0.01)
        assert a is not b
        # both ran, in turn: the second found the message answered and called no model
        reasons = sorted(f.result(timeout=30).finish_reason for f in (a, b))
        assert reasons == ["nothing-to-answer", "stop"]
        assert len(clock.started) == 1


def test_cancel_while_debouncing_cancels_the_future_and_runs_nothing():
    clock = Clocked()
    with Session(clock.model) as session:
        session.push_user_message("hi")
        future = session.schedule_generate("k", debounce=0.3)
        assert session.cancel_scheduled_generation("k") is True
        assert future.cancelled()
        assert session.cancel_scheduled_generation("k") is False
        time.sleep(0.6)
        assert clock.started == []


def test_cancel_while_running_aborts_the_generation():
    clock = Clocked(block=True)
    with Session(clock.model) as session:
        session.push_user_message("hi")
        future = session.schedule_generate("k", debounce=0.01)
        wait_for(lambda: clock.started, 20, "the scheduled generation to start")
        assert session.cancel_scheduled_generation("k") is True
        with pytest.raises(CancelledError):
            future.result(timeout=30)
        assert any(e.type == "control" and e.action == "generation-aborted" for e in session.events)


def test_conflicting_options_for_one_key_are_rejected():
    with Session(ScriptedModel(["x"])) as session:
        session.push_user_message("hi")
        session.schedule_generate("k", debounce=5, max_steps=3)
        with pytest.raises(ConfigurationError, match="different options"):
            session.schedule_generate("k", debounce=5, max_steps=4)
        assert session.schedule_generate("k", debounce=5, max_steps=3) is not None
        session.cancel_scheduled_generation("k")


@pytest.mark.parametrize("key,debounce", [("", 0.1), (3, 0.1), ("k", -1), ("k", "soon")])
def test_bad_key_or_debounce(key, debounce):
    with Session(ScriptedModel([])) as session:
        with pytest.raises(ConfigurationError):
            session.schedule_generate(key, debounce=debounce)


def test_errors_reach_the_future():
    with Session(ScriptedModel([])) as session:
        session.push_user_message("hi")
        future = session.schedule_generate("k", debounce=0.01)
        with pytest.raises(ScriptExhaustedError):
            future.result(timeout=30)


def test_abort_session_and_close_cancel_schedules():
    with Session(ScriptedModel(["x"])) as session:
        session.push_user_message("hi")
        future = session.schedule_generate("k", debounce=5)
        session.abort_session("done")
        assert future.cancelled()
        with pytest.raises(SessionClosedError, match="aborted"):
            session.schedule_generate("k")
    closed = Session(ScriptedModel(["x"]))
    pending = closed.schedule_generate("k", debounce=5)
    closed.close()
    assert pending.cancelled()
    with pytest.raises(SessionClosedError):
        closed.schedule_generate("k")
    assert isinstance(pending, concurrent.futures.Future)


def test_a_call_after_the_generation_started_schedules_the_next_one():
    """An event that arrives while the scheduled inference runs must get an inference of
    its own: the running one may already have read its snapshot."""
    release = threading.Event()
    seen: list[list[str]] = []

    def reply(request):
        seen.append([m.text for m in request.messages if m.role == "user"])
        if len(seen) == 1:
            release.wait(30)
        return f"answer {len(seen)}"

    with Session(FunctionModel(reply)) as session:
        session.push_user_message("job A finished")
        first = session.schedule_generate("jobs", debounce=0.01)
        wait_for(lambda: seen, what="the scheduled generation to start")
        session.push_user_message("job B finished")  # after the first snapshot was read
        second = session.schedule_generate("jobs", debounce=0.01)
        assert second is not first
        assert session.schedule_generate("jobs", debounce=0.01) is second  # still debouncing
        release.set()
        assert first.result(timeout=30).text == "answer 1"
        assert second.result(timeout=30).text == "answer 2"
    assert "job B finished" not in seen[0] and "job B finished" in seen[1]


def test_cancel_reaches_every_schedule_of_a_key():
    clock = Clocked(block=True)
    with Session(clock.model) as session:
        session.push_user_message("hi")
        running = session.schedule_generate("k", debounce=0.01)
        wait_for(lambda: clock.started, what="the scheduled generation to start")
        waiting = session.schedule_generate("k", debounce=5)
        assert session.cancel_scheduled_generation("k") is True
        assert waiting.cancelled()
        with pytest.raises(CancelledError):
            running.result(timeout=30)
        assert session.cancel_scheduled_generation("k") is False


def test_a_future_cancelled_by_the_caller_is_not_handed_out_again():
    with Session(ScriptedModel(["fresh"])) as session:
        session.push_user_message("hi")
        stale = session.schedule_generate("k", debounce=5)
        assert stale.cancel()
        fresh = session.schedule_generate("k", debounce=0.01)
        assert fresh is not stale
        assert fresh.result(timeout=30).text == "fresh"


# -- GenerationScheduler on its own: a run function that records its calls ----------------


SHARED = object()


class Runs:
    """A ``run`` for GenerationScheduler that records each call; ``hold`` makes calls
    wait until their token is cancelled or ``release`` is set."""

    def __init__(self, hold: bool = False) -> None:
        self.calls: list[dict] = []
        self.threads: list[tuple[str, bool]] = []
        self.hold = hold
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, **kwargs):
        me = threading.current_thread()
        self.threads.append((me.name, me.daemon))
        self.calls.append(kwargs)
        self.started.set()
        if self.hold:
            token = kwargs["cancel"]
            while not self.release.is_set():
                token.raise_if_cancelled()
                token.wait(0.02)
        return f"run {len(self.calls)}"


def test_a_cancel_token_given_to_schedule_aborts_the_generation_it_starts():
    runs = Runs(hold=True)
    scheduler = GenerationScheduler(runs)
    mine = CancelToken()
    future = scheduler.schedule("k", debounce=0, cancel=mine, max_steps=2)
    assert runs.started.wait(30)
    (call,) = runs.calls
    assert call["max_steps"] == 2 and isinstance(call["cancel"], CancelToken) and call["cancel"] is not mine
    assert runs.threads == [("agentkit-schedule-k", True)]  # a timer thread that never blocks exit
    mine.cancel("the host stopped it")
    with pytest.raises(CancelledError, match="the host stopped it"):
        future.result(timeout=30)
    wait_for(lambda: scheduler.pending() == [], what="the schedule to be forgotten")


def test_an_already_cancelled_token_given_to_schedule_aborts_at_once():
    runs = Runs(hold=True)
    scheduler = GenerationScheduler(runs)
    mine = CancelToken()
    mine.cancel("too late")
    with pytest.raises(CancelledError, match="too late"):
        scheduler.schedule("k", debounce=0, cancel=mine).result(timeout=30)


def test_a_future_cancelled_by_the_caller_never_runs():
    runs = Runs()
    scheduler = GenerationScheduler(runs)
    future = scheduler.schedule("k", debounce=0.01)
    assert future.cancel()
    # the timer fires, finds the future cancelled and forgets the schedule without running it
    wait_for(lambda: scheduler.pending() == [], what="the cancelled schedule to be forgotten")
    assert runs.calls == []
    assert scheduler.schedule("other", debounce=0).result(timeout=30) == "run 1"
    assert len(runs.calls) == 1


def test_pending_lists_waiting_and_running_keys_until_they_finish():
    runs = Runs(hold=True)
    scheduler = GenerationScheduler(runs)
    assert scheduler.pending() == []
    running = scheduler.schedule("b-running", debounce=0)
    assert runs.started.wait(30)
    waiting = scheduler.schedule("a-waiting", debounce=60)
    assert scheduler.pending() == ["a-waiting", "b-running"]
    assert scheduler.cancel("a-waiting") is True and waiting.cancelled()
    assert scheduler.pending() == ["b-running"]
    runs.release.set()
    assert running.result(timeout=30) == "run 1"
    wait_for(lambda: scheduler.pending() == [], what="the finished schedule to be forgotten")


@pytest.mark.parametrize(
    "first, second",
    [
        ({"max_steps": 1}, {"max_steps": True}),  # equal, but not the same option
        ({"max_steps": 1}, {"max_steps": 1.0}),
        ({"max_steps": 1}, {"max_steps": 2}),
        ({"max_steps": 1}, {}),
        ({}, {"max_steps": 1}),
        ({"a": 1}, {"b": 1}),
        ({"tools": [1]}, {"tools": [1]}),  # equal lists, but other objects
        ({"tools": SHARED, "max_steps": 1}, {"tools": SHARED, "max_steps": 2}),  # checked past a shared one
        ({"name": "".join("ab"), "max_steps": 1}, {"name": "ab", "max_steps": 2}),  # past an equal one
    ],
)
def test_options_must_agree_exactly_for_one_key(first, second):
    scheduler = GenerationScheduler(Runs())
    scheduler.schedule("k", debounce=60, **first)
    with pytest.raises(ConfigurationError, match="key 'k' is already scheduled with different options"):
        scheduler.schedule("k", debounce=60, **second)
    scheduler.close()


def test_equal_primitives_that_are_other_objects_share_the_schedule():
    built = {"name": "".join(["a", "b"]), "max_steps": int("1000"), "ratio": float("0.5"), "raw": bytes([98, 99])}
    literal = {"name": "ab", "max_steps": 1000, "ratio": 0.5, "raw": b"bc"}
    assert all(built[k] is not literal[k] for k in ("name", "max_steps", "raw"))
    scheduler = GenerationScheduler(Runs())
    future = scheduler.schedule("k", debounce=60, **built)
    assert scheduler.schedule("k", debounce=60, **literal) is future
    scheduler.close()


def test_the_same_options_share_the_schedule():
    shared = [1, 2]
    scheduler = GenerationScheduler(Runs())
    opts = {"tools": shared, "max_steps": 3, "name": "x", "flag": True, "ratio": 0.5, "raw": b"b", "none": None}
    future = scheduler.schedule("k", debounce=60, **opts)
    assert scheduler.schedule("k", debounce=60, **dict(opts)) is future
    scheduler.close()


def test_debounce_zero_runs_at_once_and_bad_arguments_are_refused():
    runs = Runs()
    scheduler = GenerationScheduler(runs)
    assert scheduler.schedule("k", debounce=0).result(timeout=30) == "run 1"
    assert scheduler.schedule("k", debounce=0.0).result(timeout=30) == "run 2"
    for bad in (True, -0.001, "1", None):
        with pytest.raises(ConfigurationError, match=f"debounce must be a number of seconds >= 0, got {bad!r}"):
            scheduler.schedule("k", debounce=bad)
    with pytest.raises(ConfigurationError, match="cancel must be a CancelToken"):
        scheduler.schedule("k", cancel="stop")
    with pytest.raises(ConfigurationError, match="non-empty string key"):
        scheduler.schedule(None)
    assert scheduler.schedule("k", debounce=0, cancel=None).result(timeout=30) == "run 3"


def test_cancel_all_cancels_everything_but_close_also_refuses_new_schedules():
    runs = Runs(hold=True)
    scheduler = GenerationScheduler(runs)
    running = scheduler.schedule("r", debounce=0)
    assert runs.started.wait(30)
    waiting = [scheduler.schedule(k, debounce=60) for k in ("a", "b")]
    scheduler.cancel_all("host restart")
    assert all(f.cancelled() for f in waiting)
    with pytest.raises(CancelledError, match="host restart"):
        running.result(timeout=30)
    assert scheduler.cancel("a") is False
    runs.hold = False
    assert scheduler.schedule("a", debounce=0).result(timeout=30) == "run 2"
    later = scheduler.schedule("b", debounce=60)
    scheduler.close("shutting down")
    assert later.cancelled()
    with pytest.raises(ConfigurationError, match="cannot schedule a generation: shutting down"):
        scheduler.schedule("c")


def test_cancelling_one_key_aborts_its_generation_queued_behind_another():
    """Two generations wait for the session's generation lock; cancelling one key fails
    that one's future with CancelledError and leaves the other alone."""
    gate = threading.Lock()
    entered: list[str] = []
    order: list[str] = []

    def run(cancel, name):
        entered.append(name)
        with gate:  # like the session's generation lock
            cancel.raise_if_cancelled()
            order.append(name)
            return name

    scheduler = GenerationScheduler(run)
    gate.acquire()
    first = scheduler.schedule("a", debounce=0, name="a")
    second = scheduler.schedule("b", debounce=0, name="b")
    wait_for(lambda: len(entered) == 2, what="both generations to be queued")
    assert scheduler.cancel("b", "not needed") is True
    gate.release()
    assert first.result(timeout=30) == "a"
    with pytest.raises(CancelledError, match="not needed"):
        second.result(timeout=30)
    assert order == ["a"]


def timer_threads(key: str) -> int:
    return sum(t.name == f"agentkit-schedule-{key}" for t in threading.enumerate())


def test_a_reset_or_replaced_schedule_leaves_one_timer_not_a_pile():
    """Each call resets the quiet period by cancelling the old timer: a host calling
    schedule_generate on every event must not leave a sleeping thread behind per call."""
    scheduler = GenerationScheduler(Runs())
    for _ in range(5):
        scheduler.schedule("reset-me", debounce=60)
    wait_for(lambda: timer_threads("reset-me") == 1, what="the replaced timers to end")
    stale = scheduler.schedule("replace-me", debounce=60)
    assert stale.cancel()
    scheduler.schedule("replace-me", debounce=60)
    wait_for(lambda: timer_threads("replace-me") == 1, what="the cancelled schedule's timer to end")
    scheduler.close()
    wait_for(lambda: timer_threads("reset-me") + timer_threads("replace-me") == 0, what="every timer to end")
