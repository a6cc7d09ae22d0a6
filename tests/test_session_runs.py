"""Bounded concurrent runs: ``Agent(max_concurrent_runs=N)`` and ``Session`` likewise,
``active_runs``, ``queue_timeout``, and a close that drains (agentkit/_threads/_limiter.py,
agentkit/session/_runs.py).

The model used here blocks on a condition (not a sleep) until the test releases it, or
until its request's cancel token is cancelled, and records how many calls were inside it
at once under a lock."""

from __future__ import annotations

import gc
import threading
from typing import Any

import pytest
from _procs import wait_for

from agentkit import (
    Agent,
    AgentClosedError,
    CancelledError,
    CancelToken,
    ConfigurationError,
    FunctionModel,
    RunLimitTimeout,
    Session,
    SessionClosedError,
)


class Gauge:
    """A model whose calls wait until :meth:`release` (or their cancel), counting how
    many are inside at once (``current``, the highest in ``peak``)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.current = 0
        self.peak = 0
        self.entered = 0
        self.released = False

    def fn(self, request: Any) -> str:
        with self.cond:
            self.current += 1
            self.entered += 1
            self.peak = max(self.peak, self.current)
            self.cond.notify_all()
        forget = request.cancel._on_cancel(self._wake)
        try:
            with self.cond:
                while not self.released and not request.cancel.cancelled:
                    self.cond.wait()
        finally:
            forget()
            with self.cond:
                self.current -= 1
                self.cond.notify_all()
        return "done"

    def model(self) -> FunctionModel:
        return FunctionModel(self.fn)

    def _wake(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def wait(self, predicate: Any, what: str) -> None:
        with self.cond:
            assert self.cond.wait_for(predicate, timeout=60), what

    def release(self) -> None:
        with self.cond:
            self.released = True
            self.cond.notify_all()


def start(target: Any, *args: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``target(*args)`` on a thread; its result or error lands in the dict."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = target(*args)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def prompts(events: Any) -> list[str]:
    """The texts of the user messages among ``events``."""
    return [e.content[0].text for e in events if e.type == "user-message"]


def joined(thread: threading.Thread) -> None:
    thread.join(60)
    assert not thread.is_alive(), "the run did not end"


# -- Agent ------------------------------------------------------------------------------


def test_fifty_concurrent_runs_on_an_agent_capped_at_eight_never_exceed_eight_and_all_finish() -> None:
    gauge = Gauge()
    agent = Agent(gauge.model(), max_concurrent_runs=8)
    runs = [start(agent.run, f"question {i}") for i in range(50)]
    gauge.wait(lambda: gauge.current == 8, "eight runs inside the model")
    wait_for(lambda: agent._runs.waiting == 42, what="the other 42 runs waiting for a slot")
    assert agent.active_runs == 8
    assert gauge.current == 8  # nobody got past the cap while the others waited
    gauge.release()
    for thread, out in runs:
        joined(thread)
        assert "error" not in out, out.get("error")
        assert out["result"].text == "done"
    assert gauge.peak == 8
    assert gauge.entered == 50
    assert agent.active_runs == 0


def test_without_a_cap_the_same_runs_overlap_past_eight() -> None:
    """The control for the test above: it is the cap that holds them to eight."""
    gauge = Gauge()
    agent = Agent(gauge.model())
    runs = [start(agent.run, "q") for _ in range(12)]
    gauge.wait(lambda: gauge.current == 12, "all twelve runs inside the model at once")
    assert agent.active_runs == 12 and agent.max_concurrent_runs is None
    gauge.release()
    for thread, _ in runs:
        joined(thread)


def test_a_run_over_the_cap_waits_and_queue_timeout_ends_the_wait_with_a_clear_error() -> None:
    gauge = Gauge()
    agent = Agent(gauge.model(), max_concurrent_runs=1, queue_timeout=0.2)
    first, out = start(agent.run, "first")
    gauge.wait(lambda: gauge.current == 1, "the first run inside the model")
    with pytest.raises(RunLimitTimeout) as caught:
        agent.run("second")
    assert isinstance(caught.value, TimeoutError)
    assert caught.value.limit == 1 and caught.value.waited == 0.2
    assert "max_concurrent_runs=1" in str(caught.value) and "queue_timeout" in str(caught.value)
    assert gauge.entered == 1  # the timed-out run never reached the model
    gauge.release()
    joined(first)
    assert out["result"].text == "done"
    assert agent.run("third").text == "done"  # the slots are all back


def test_a_run_that_raises_gives_its_slot_back() -> None:
    def broken(request: Any) -> str:
        raise RuntimeError("the model broke")

    agent = Agent(FunctionModel(broken), max_concurrent_runs=1, queue_timeout=5)
    for _ in range(3):  # a lost slot would make the second one time out
        with pytest.raises(RuntimeError, match="the model broke"):
            agent.run("q")
    assert agent.active_runs == 0


def test_a_cancelled_run_gives_its_slot_back_and_a_cancelled_waiter_leaves_the_queue() -> None:
    gauge = Gauge()
    agent = Agent(gauge.model(), max_concurrent_runs=1)
    running_token, waiting_token = CancelToken(), CancelToken()
    running, running_out = start(lambda: agent.run("a", cancel=running_token))
    gauge.wait(lambda: gauge.current == 1, "the first run inside the model")
    waiting, waiting_out = start(lambda: agent.run("b", cancel=waiting_token))
    wait_for(lambda: agent._runs.waiting == 1, what="the second run waiting for a slot")
    waiting_token.cancel("the caller gave up")
    joined(waiting)
    assert isinstance(waiting_out["error"], CancelledError)
    assert gauge.entered == 1 and agent._runs.waiting == 0
    running_token.cancel("stop")
    joined(running)
    assert isinstance(running_out["error"], CancelledError)
    assert agent.active_runs == 0
    gauge.release()
    assert agent.run("c").text == "done"


def test_a_stream_is_a_run_until_it_ends_or_is_closed() -> None:
    gauge = Gauge()
    agent = Agent(gauge.model(), max_concurrent_runs=2)
    finished = agent.stream("ends")
    closed = agent.stream("closed")
    gauge.wait(lambda: gauge.current == 2, "both streams inside the model")
    assert agent.active_runs == 2
    closed.close()
    wait_for(lambda: agent.active_runs == 1, what="the closed stream's slot given back")
    gauge.release()
    assert finished.result.text == "done"
    wait_for(lambda: agent.active_runs == 0, what="the finished stream's slot given back")


def test_an_abandoned_stream_gives_its_slot_back_once_collected() -> None:
    gauge = Gauge()
    agent = Agent(gauge.model(), max_concurrent_runs=1)
    stream = agent.stream("dropped")
    gauge.wait(lambda: gauge.current == 1, "the stream inside the model")
    assert agent.active_runs == 1
    del stream
    gc.collect()
    wait_for(lambda: agent.active_runs == 0, what="the dropped stream's slot given back")
    gauge.release()
    assert agent.run("next").text == "done"


def test_with_options_copies_share_the_cap_and_the_count() -> None:
    gauge = Gauge()
    agent = Agent(gauge.model(), max_concurrent_runs=1, queue_timeout=0.2)
    copy = agent.with_options(system="be brief")
    thread, _ = start(agent.run, "q")
    gauge.wait(lambda: gauge.current == 1, "the run inside the model")
    assert copy.active_runs == 1
    with pytest.raises(RunLimitTimeout):
        copy.run("q")
    gauge.release()
    joined(thread)


def test_close_refuses_new_and_waiting_runs_and_drains_the_running_ones() -> None:
    gauge = Gauge()
    agent = Agent(gauge.model(), max_concurrent_runs=2)
    running = [start(agent.run, "q") for _ in range(2)]
    gauge.wait(lambda: gauge.current == 2, "two runs inside the model")
    waiting, waiting_out = start(agent.run, "queued")
    wait_for(lambda: agent._runs.waiting == 1, what="a third run waiting for a slot")
    closer, closer_out = start(agent.close, 60)
    joined(waiting)
    assert isinstance(waiting_out["error"], AgentClosedError)
    assert "closed" in str(waiting_out["error"])
    with pytest.raises(AgentClosedError):
        agent.run("new")
    with pytest.raises(AgentClosedError):
        agent.stream("new")
    assert closer.is_alive()  # still draining: the running runs have not ended
    gauge.release()
    joined(closer)
    assert closer_out["result"] == 0  # none had to be cancelled
    for thread, out in running:
        joined(thread)
        assert out["result"].text == "done"
    assert gauge.entered == 2


def test_close_cancels_the_runs_still_running_at_its_timeout_and_says_how_many() -> None:
    gauge = Gauge()
    agent = Agent(gauge.model())
    thread, out = start(agent.run, "stuck")
    gauge.wait(lambda: gauge.current == 1, "the run inside the model")
    assert agent.close(timeout=0.1) == 1
    joined(thread)
    assert isinstance(out["error"], CancelledError)
    assert "close(timeout=0.1)" in str(out["error"])
    assert agent.active_runs == 0


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"max_concurrent_runs": 0}, "max_concurrent_runs"),
        ({"max_concurrent_runs": True}, "max_concurrent_runs"),
        ({"max_concurrent_runs": 2.5}, "max_concurrent_runs"),
        ({"queue_timeout": 0}, "queue_timeout"),
        ({"queue_timeout": "5"}, "queue_timeout"),
    ],
)
def test_bad_limits_are_refused_before_anything_runs(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigurationError, match=words):
        Agent(FunctionModel(lambda r: "x"), **kwargs)
    with pytest.raises(ConfigurationError, match=words):
        Session(FunctionModel(lambda r: "x"), **kwargs)


def test_close_refuses_a_negative_timeout() -> None:
    agent = Agent(FunctionModel(lambda r: "x"))
    with pytest.raises(ConfigurationError, match="timeout"):
        agent.close(timeout=-1)
    assert agent.run("still open").text == "x"


# -- Session ----------------------------------------------------------------------------


def test_a_session_counts_its_running_and_queued_generations_and_caps_them() -> None:
    gauge = Gauge()
    session = Session(gauge.model(), max_concurrent_runs=2, queue_timeout=0.2)
    first, first_out = start(session.ask, "one")
    gauge.wait(lambda: gauge.current == 1, "the first generation inside the model")
    second, second_out = start(session.ask, "two")
    wait_for(lambda: len(session._gate.queue) == 2, what="the second generation queued at the gate")
    assert session.active_runs == 2
    with pytest.raises(RunLimitTimeout, match="max_concurrent_runs=2"):
        session.ask("three")
    assert prompts(session.events) == ["one"]  # "three" never committed
    gauge.release()
    joined(first)
    joined(second)
    assert first_out["result"].text == second_out["result"].text == "done"
    assert session.active_runs == 0
    session.close()


def test_a_session_stream_holds_a_slot_until_it_is_closed() -> None:
    gauge = Gauge()
    session = Session(gauge.model(), max_concurrent_runs=1)
    stream = session.ask_stream("streamed")
    gauge.wait(lambda: gauge.current == 1, "the stream inside the model")
    assert session.active_runs == 1
    stream.close()
    assert session.active_runs == 0
    gauge.release()
    assert session.ask("next").text == "done"
    session.close()


def test_session_close_with_a_timeout_drains_the_running_generation_and_refuses_the_rest() -> None:
    gauge = Gauge()
    session = Session(gauge.model())
    running, running_out = start(session.ask, "running")
    gauge.wait(lambda: gauge.current == 1, "the generation inside the model")
    queued, queued_out = start(session.ask, "queued")
    wait_for(lambda: session.active_runs == 2, what="the second generation queued at the gate")
    closer, _ = start(lambda: session.close(timeout=60))
    joined(queued)
    assert isinstance(queued_out["error"], SessionClosedError)
    assert "closing" in str(queued_out["error"])
    with pytest.raises(SessionClosedError):
        session.ask("new")
    assert closer.is_alive()
    gauge.release()
    joined(closer)
    joined(running)
    assert running_out["result"].text == "done"  # it finished: close waited for it
    assert session.closed
    assert prompts(session._log.events) == ["running"]


def test_session_close_cancels_a_generation_that_outlives_its_timeout() -> None:
    gauge = Gauge()
    session = Session(gauge.model())
    running, out = start(session.ask, "stuck")
    gauge.wait(lambda: gauge.current == 1, "the generation inside the model")
    session.close(timeout=0.1)
    joined(running)
    assert isinstance(out["error"], CancelledError)
    assert session.active_runs == 0 and session.closed


def test_a_session_generation_that_raises_gives_its_slot_back() -> None:
    calls = iter([RuntimeError("broke"), "fine"])

    def model(request: Any) -> str:
        item = next(calls)
        if isinstance(item, Exception):
            raise item
        return item

    session = Session(FunctionModel(model), max_concurrent_runs=1, queue_timeout=5)
    with pytest.raises(RuntimeError, match="broke"):
        session.ask("a")
    assert session.active_runs == 0
    assert session.ask("b").text == "fine"
    session.close()


def test_session_close_refuses_a_generation_waiting_for_a_slot() -> None:
    gauge = Gauge()
    session = Session(gauge.model(), max_concurrent_runs=1)
    running, running_out = start(session.ask, "running")
    gauge.wait(lambda: gauge.current == 1, "the generation inside the model")
    waiting, waiting_out = start(session.ask, "waiting")
    wait_for(lambda: session._runs.waiting == 1, what="a generation waiting for the one slot")
    closer, _ = start(lambda: session.close(timeout=60))
    joined(waiting)
    assert isinstance(waiting_out["error"], SessionClosedError)
    gauge.release()
    joined(closer)
    joined(running)
    assert running_out["result"].text == "done"


def test_an_agents_session_takes_its_own_max_concurrent_runs() -> None:
    agent = Agent(FunctionModel(lambda r: "x"), max_concurrent_runs=5)
    with agent.session(max_concurrent_runs=1, queue_timeout=3) as session:
        assert session._runs.limit == 1
        assert session.ask("q").text == "x"
        assert session.active_runs == 0 and agent.active_runs == 0  # a session's generations are its own
