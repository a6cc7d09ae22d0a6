"""Threads are a shared, bounded resource: tool calls of all sessions run on one shared
tool pool and listener delivery on shared delivery threads (agentkit/_threads/_pool.py)."""

from __future__ import annotations

import threading

import pytest
from _procs import wait_for

from agentkit import FunctionModel, Session, ToolCall, _threads, tool
from agentkit._threads import _pool
from agentkit.models import Turn


@tool
def work(n: int) -> str:
    """Return n doubled."""
    return str(2 * n)


def _parallel_then_answer(request):
    if request.messages[-1].role == "user":
        return Turn(tool_calls=(ToolCall(name="work", input={"n": 1}), ToolCall(name="work", input={"n": 2})))
    return "done"


def _agentkit_threads():
    return [t for t in threading.enumerate() if t.name.startswith("agentkit")]


def test_many_open_sessions_with_parallel_tools_and_listeners_hold_o_workers_threads():
    sessions, heard = [], []
    lock = threading.Lock()

    def listener(event):
        with lock:
            heard.append(event)

    # threads other tests left running in this process (a SessionPool's reaper, the
    # stream pool's idle workers, the async loop) are not this test's: it counts what 150
    # sessions add, which must be bounded by the shared pools, not grow with the sessions
    before = {t.ident for t in _agentkit_threads()}
    try:
        for _ in range(150):
            s = Session(FunctionModel(_parallel_then_answer), tools=[work])
            s.subscribe(listener)
            assert s.ask("go").text == "done"
            sessions.append(s)
        wait_for(lambda: len(heard) >= 150 * 5, what="every listener to hear its session")
        # per session (the old design) this was 2 threads each: 300+
        tool_pool, delivery = _threads.tool_pool(), _threads.delivery_pool()
        added = [t for t in _agentkit_threads() if t.ident not in before]
        assert len(added) <= tool_pool.size + delivery.size + 4, [t.name for t in added]
    finally:
        for s in sessions:
            s.close()


def test_stalled_listeners_do_not_stall_the_others():
    stall = threading.Event()
    stalled = []
    n_stalled = _threads.delivery_pool().size + 2  # more than the shared threads
    try:
        for _ in range(n_stalled):
            s = Session(listener_timeout=60)
            s.subscribe(lambda e: stall.wait(60))
            s.push_runtime_event("tick")
            stalled.append(s)
        heard = []
        with Session() as healthy:
            healthy.subscribe(heard.append)
            for i in range(20):
                healthy.push_runtime_event("tick", {"i": i})
            wait_for(lambda: len(heard) == 20, what="the healthy listener to hear every event")
            assert [e.data["i"] for e in heard] == list(range(20))  # in commit order
    finally:
        stall.set()
        for s in stalled:
            s.close()


def test_one_listener_hears_many_events_in_commit_order_never_two_at_once():
    seen, inside = [], [0]
    overlap = []

    def listener(event):
        inside[0] += 1
        if inside[0] > 1:
            overlap.append(event)
        seen.append(event.seq)
        inside[0] -= 1

    with Session() as s:
        s.subscribe(listener)
        threads = [threading.Thread(target=lambda: [s.push_runtime_event("t") for _ in range(200)]) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wait_for(lambda: len(seen) == 800, what="every event delivered")
    assert seen == list(range(1, 801)) and not overlap


def test_nested_generations_with_parallel_tools_do_not_deadlock_a_small_pool(monkeypatch):
    small = _threads.WorkerPool(2, name="agentkit-tool-test")
    monkeypatch.setattr(_pool, "_tool_pool", small)

    @tool
    def delegate(n: int) -> str:
        """Ask a sub-agent with parallel tools."""
        with Session(FunctionModel(_parallel_then_answer), tools=[work], max_tool_workers=1) as sub:
            return sub.ask(f"sub {n}").text

    def parent(request):
        if request.messages[-1].role == "user":
            return Turn(tool_calls=tuple(ToolCall(name="delegate", input={"n": i}) for i in range(3)))
        return "all delegated"

    with Session(FunctionModel(parent), tools=[delegate]) as s:
        result = s.ask("go")
    assert result.text == "all delegated"
    outputs = [r.output.as_text() for step in result.steps for r in step.tool_calls]
    assert outputs == ["done", "done", "done"]


def test_close_cancels_a_sessions_queued_tool_calls_only():
    release, started = threading.Event(), threading.Event()
    ran = []

    @tool
    def slow(n: int) -> str:
        """Wait, then record n."""
        started.set()
        release.wait(30)
        ran.append(n)
        return "ok"

    def three(request):
        if request.messages[-1].role == "user":
            return Turn(tool_calls=tuple(ToolCall(name="slow", input={"n": i}) for i in range(3)))
        return "end"

    s = Session(FunctionModel(three), tools=[slow], max_tool_workers=1)
    t = threading.Thread(target=lambda: pytest.raises(Exception, s.ask, "go"))
    t.start()
    wait_for(started.is_set, what="the first call running")
    queued = list(s._pool._waiting)
    assert len(queued) == 2
    s.close()
    release.set()
    t.join(30)
    wait_for(lambda: ran, what="the running call to finish")
    assert all(item.future.cancelled() for item in queued) and ran == [0]
