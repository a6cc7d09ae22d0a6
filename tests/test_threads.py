"""agentkit._threads: the one pool, run-and-wait, the model-stream reader, the listener
queue and the background event loop, each on its own."""

from __future__ import annotations

import contextvars
import multiprocessing
import os
import threading
import warnings
from concurrent.futures import Future

import pytest
from _procs import wait_for

from agentkit import CancelledError, CancelToken
from agentkit._threads import (
    CallTimeout,
    ListenerQueue,
    LoopThread,
    ModelStream,
    SessionExecutor,
    WorkerPool,
    run_and_wait,
    shared_loop,
    stream_pool,
    wait_future,
)
from agentkit.models.base import ModelRequest, TextDelta

# -- the pool ----------------------------------------------------------------------------


def test_a_pool_runs_at_most_size_tasks_at_once_and_queues_the_rest_in_order():
    pool = WorkerPool(2, name="agentkit-test-pool")
    release = threading.Event()
    running: list[int] = []
    finished: list[int] = []
    lock = threading.Lock()

    def task(i: int) -> None:
        with lock:
            running.append(i)
        release.wait(30)
        with lock:
            finished.append(i)

    for i in range(6):
        pool.run(lambda i=i: task(i))
    wait_for(lambda: len(running) == 2, what="two tasks to start")
    assert pool.threads == 2 and sorted(running) == [0, 1]  # the other four wait: backpressure
    release.set()
    wait_for(lambda: len(finished) == 6, what="every task")
    assert running[2:] == [2, 3, 4, 5] and pool.threads <= 2


def test_a_failing_task_does_not_stop_the_pool_or_the_tasks_behind_it():
    pool = WorkerPool(1, name="agentkit-test-pool")
    done: list[str] = []

    def fails() -> None:
        raise RuntimeError("a task's own bug")

    pool.run(fails)
    pool.run(lambda: done.append("next"))
    wait_for(lambda: done == ["next"], what="the task behind the failing one")
    assert pool.threads == 1


def test_an_urgent_task_gets_a_thread_of_its_own_so_a_task_may_wait_for_another():
    pool = WorkerPool(1, name="agentkit-test-pool")
    inner_ran = threading.Event()
    outer_saw: list[bool] = []

    def outer() -> None:
        pool.run(inner_ran.set, urgent=True)  # waits for work queued behind it
        outer_saw.append(inner_ran.wait(30))

    pool.run(outer)
    wait_for(lambda: outer_saw, what="the outer task")
    assert outer_saw == [True] and pool.threads == 2


def test_idle_threads_end_and_a_finished_thread_serves_the_next_task():
    pool = WorkerPool(4, name="agentkit-test-pool", idle_seconds=0.2)
    names: list[str] = []
    for _ in range(5):
        ran = threading.Event()
        pool.run(lambda ran=ran: (names.append(threading.current_thread().name), ran.set()))
        assert ran.wait(30)
        wait_for(lambda: pool._idle == pool.threads, what="the thread to go idle")
    assert pool.threads == 1 and names == ["agentkit-test-pool"] * 5
    wait_for(lambda: pool.threads == 0, what="the idle thread to end")


def test_a_session_executor_keeps_its_cap_and_cancels_queued_calls_on_shutdown():
    pool = WorkerPool(8, name="agentkit-test-pool")
    executor = SessionExecutor(2, pool)
    release = threading.Event()
    started: list[int] = []

    def call(i: int) -> int:
        started.append(i)
        release.wait(30)
        return i

    futures = [executor.submit(call, i) for i in range(4)]
    wait_for(lambda: len(started) == 2, what="two calls to start")
    assert not futures[2].running() and not futures[3].running()
    executor.shutdown(cancel_futures=True)
    release.set()
    assert [f.result(30) for f in futures[:2]] == [0, 1]
    assert futures[2].cancelled() and futures[3].cancelled() and started == [0, 1]
    with pytest.raises(RuntimeError, match="after the session closed"):
        executor.submit(call, 9)


def test_the_stream_pool_gives_every_task_a_thread_and_reuses_finished_ones():
    pool = stream_pool()
    first = threading.Event()
    second_saw: list[bool] = []
    pool.run(lambda: second_saw.append(first.wait(30)), urgent=True)
    pool.run(first.set, urgent=True)  # would never run behind the first on one thread
    wait_for(lambda: second_saw, what="both stream tasks")
    assert second_saw == [True]


# -- run and wait ------------------------------------------------------------------------


def test_run_and_wait_returns_the_result_on_a_named_thread_in_the_callers_context():
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var")
    var.set("caller's")
    seen = run_and_wait(lambda: (threading.current_thread().name, var.get()), name="agentkit-test-wait")
    assert seen == ("agentkit-test-wait", "caller's")


def test_run_and_wait_raises_the_calls_exception():
    def fails() -> None:
        raise KeyError("inside")

    with pytest.raises(KeyError, match="inside"):
        run_and_wait(fails, cancel=CancelToken())


def test_run_and_wait_stops_waiting_when_cancelled_and_hands_a_late_result_to_abandoned():
    cancel = CancelToken()
    release = threading.Event()
    started = threading.Event()
    abandoned: list[str] = []

    def blocks() -> str:
        started.set()
        release.wait(30)
        return "late"

    threading.Thread(target=lambda: (started.wait(30), cancel.cancel("stop now"))).start()
    with pytest.raises(CancelledError, match="stop now"):
        run_and_wait(blocks, cancel=cancel, abandoned=abandoned.append)
    assert abandoned == []  # still running: nothing to close yet
    release.set()
    wait_for(lambda: abandoned == ["late"], what="the late result to be handed over")


def test_run_and_wait_with_a_cancelled_token_never_starts_the_call():
    cancel = CancelToken()
    cancel.cancel("already")
    ran: list[bool] = []
    with pytest.raises(CancelledError, match="already"):
        run_and_wait(lambda: ran.append(True), cancel=cancel)
    assert ran == []


def test_run_and_wait_raises_call_timeout_and_a_result_that_came_first_wins_over_a_cancel():
    release = threading.Event()
    with pytest.raises(CallTimeout, match="no answer within 0.05s"):
        run_and_wait(lambda: release.wait(30), timeout=0.05)
    release.set()

    cancel = CancelToken()

    def answers_then_cancels() -> str:
        cancel.cancel("after the answer")
        return "answer"

    assert run_and_wait(answers_then_cancels, cancel=cancel) == "answer"


def test_wait_future_returns_the_result_or_raises_on_cancel():
    done: Future[int] = Future()
    done.set_result(3)
    assert wait_future(done, CancelToken()) == 3

    pending: Future[int] = Future()
    cancel = CancelToken()
    threading.Timer(0.01, cancel.cancel, args=("gave up",)).start()
    with pytest.raises(CancelledError, match="gave up"):
        wait_future(pending, cancel)


# -- the model-stream reader -------------------------------------------------------------


class _Stream:
    """A provider stream that ignores the token and records whether it was closed."""

    def __init__(self, texts: list[str], on_event=None) -> None:
        self.texts = texts
        self.on_event = on_event
        self.closed = False

    def __iter__(self):
        for text in self.texts:
            if self.on_event is not None:
                self.on_event(text)
            yield TextDelta(text=text)

    def close(self) -> None:
        self.closed = True


class _Model:
    def __init__(self, stream: _Stream) -> None:
        self._stream = stream
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> _Stream:
        self.requests.append(request)
        return self._stream


def test_model_stream_yields_every_event_and_closes_the_stream_at_the_end():
    stream = _Stream(["a", "b"])
    with ModelStream(_Model(stream), ModelRequest(messages=())) as events:
        assert [e.text for e in events] == ["a", "b"]
    assert stream.closed


def test_model_stream_stops_at_the_next_event_once_cancelled_and_closes_the_stream():
    cancel = CancelToken()
    stream = _Stream(["a", "b", "c"], on_event=lambda text: text == "b" and cancel.cancel("user stop"))
    seen: list[str] = []
    with pytest.raises(CancelledError, match="user stop"):
        with ModelStream(_Model(stream), ModelRequest(messages=(), cancel=cancel)) as events:
            for event in events:
                seen.append(event.text)
    assert seen == ["a"] and stream.closed


def test_model_stream_closes_the_stream_when_the_reader_fails():
    stream = _Stream(["a", "b"])
    with pytest.raises(ValueError, match="reader bug"):
        with ModelStream(_Model(stream), ModelRequest(messages=())) as events:
            for _ in events:
                raise ValueError("reader bug")
    assert stream.closed


# -- the listener queue -----------------------------------------------------------------


def _queue(listener, **kw) -> tuple[ListenerQueue[int], list[str]]:
    drops: list[str] = []
    kw.setdefault("max_queue", 100)
    kw.setdefault("timeout", 30.0)
    return ListenerQueue(listener, on_drop=drops.append, **kw), drops


def test_a_listener_queue_delivers_in_order_and_drains_on_close():
    got: list[int] = []
    queue, drops = _queue(got.append, max_queue=300)
    for i in range(0, 300, 3):
        assert queue.offer([i, i + 1, i + 2])
    queue.close(drain=True)
    assert not queue.offer([999])  # closing: nothing new is taken
    assert queue.join(_deadline())
    assert got == list(range(300)) and drops == []


def test_closing_without_drain_delivers_nothing_more():
    release = threading.Event()
    got: list[int] = []

    def slow(item: int) -> None:
        release.wait(30)
        got.append(item)

    queue, _ = _queue(slow)
    queue.offer([1, 2, 3])
    wait_for(lambda: queue._busy_since is not None, what="the first call")
    queue.close(drain=False)
    release.set()
    assert queue.join(_deadline())
    assert got == [1]  # the call in flight ended; the queued ones were never delivered


def test_a_full_queue_removes_its_listener_by_default_or_drops_new_items():
    release = threading.Event()
    queue, drops = _queue(lambda item: release.wait(30), max_queue=2)
    queue.offer([0])
    wait_for(lambda: queue._busy_since is not None, what="the first call")
    assert queue.offer([1, 2]) and not queue.offer([3])
    assert drops == ["it fell 2 events behind (queue full)"] and not queue.active
    release.set()

    got: list[int] = []
    hold = threading.Event()
    keeps, drops = _queue(lambda item: (hold.wait(30), got.append(item)), max_queue=2, overflow="drop-new")
    keeps.offer([0])
    wait_for(lambda: keeps._busy_since is not None, what="the first call")
    assert keeps.offer([1, 2]) and not keeps.offer([3]) and not keeps.offer([4])
    assert keeps.active and keeps.dropped == 2 and drops == []
    hold.set()
    keeps.close()
    assert keeps.join(_deadline()) and got == [0, 1, 2]


def test_a_full_queue_in_wait_mode_holds_the_producer_back_then_removes_a_stalled_listener():
    got: list[int] = []
    gate = threading.Semaphore(0)
    queue, drops = _queue(lambda item: (gate.acquire(timeout=30), got.append(item)), max_queue=1,
                          overflow="wait", timeout=30.0)
    offered: list[int] = []

    def produce() -> None:
        for i in range(4):
            queue.offer([i])
            offered.append(i)

    producer = threading.Thread(target=produce)
    producer.start()
    wait_for(lambda: offered == [0, 1], what="the queue to fill")
    assert producer.is_alive() and offered == [0, 1]  # waiting for room: backpressure
    for _ in range(4):
        gate.release()
    producer.join(30)
    queue.close()
    assert queue.join(_deadline()) and got == [0, 1, 2, 3] and drops == []

    stuck = threading.Event()
    stalled, drops = _queue(lambda item: stuck.wait(30), max_queue=1, overflow="wait", timeout=0.05)
    stalled.offer([0])
    wait_for(lambda: stalled._busy_since is not None, what="the first call")
    assert stalled.offer([1]) is True
    assert stalled.offer([2]) is False  # no room within the timeout: removed
    assert drops[0] in ("it did not take an event for 0.05s (stalled)",
                        "one call has been running for more than 0.05s (stalled)")
    stuck.set()


def test_a_raising_or_stalled_listener_is_removed_and_never_blocks_the_others():
    raising, raising_drops = _queue(lambda item: 1 / 0)
    raising.offer([1, 2])
    wait_for(lambda: raising_drops, what="the raising listener's removal")
    assert raising_drops == ["it raised ZeroDivisionError: division by zero"] and not raising.active

    stuck = threading.Event()
    stalled, stalled_drops = _queue(lambda item: stuck.wait(30), timeout=0.01)
    stalled.offer([1])
    wait_for(lambda: stalled._busy_since is not None, what="the stalled call")
    got: list[int] = []
    fine, _ = _queue(got.append)
    fine.offer([7, 8])  # delivered although a listener holds a shared thread
    wait_for(lambda: got == [7, 8], what="the other listener's items")
    wait_for(lambda: not stalled.offer([2]), what="the stall to be seen")
    assert stalled_drops == ["one call has been running for more than 0.01s (stalled)"]
    stuck.set()


def _deadline() -> float:
    import time

    return time.monotonic() + 30


# -- the background event loop -----------------------------------------------------------


async def _sleep_then(value: str, seconds: float) -> str:
    import anyio

    await anyio.sleep(seconds)
    return value


def test_a_loop_thread_runs_calls_with_result_timeout_and_cancel_and_refuses_calls_once_stopped():
    class Closed(Exception):
        pass

    loop = LoopThread("agentkit-test-loop", error=Closed, closed="the test loop is closed")
    try:
        assert loop.run(_sleep_then, "done", 0, timeout=30) == "done"
        with pytest.raises(CallTimeout):
            loop.run(_sleep_then, "never", 60, timeout=0.05)
        cancel = CancelToken()
        threading.Timer(0.05, cancel.cancel, args=("stop",)).start()
        with pytest.raises(CancelledError, match="stop"):
            loop.run(_sleep_then, "never", 60, timeout=None, cancel=cancel)
    finally:
        loop.stop()
    with pytest.raises(Closed, match="the test loop is closed"):
        loop.run(_sleep_then, "x", 0, timeout=1)


def test_the_shared_loop_is_started_once_and_a_cancel_cancels_its_task():
    import asyncio

    loop = shared_loop()
    assert shared_loop() is loop
    first_loop = loop.run(_running_loop, timeout=None, cancel=CancelToken())
    assert loop.run(_running_loop, timeout=None, cancel=CancelToken()) is first_loop  # one loop thread, kept
    cancelled = threading.Event()

    async def waits() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    cancel = CancelToken()
    threading.Timer(0.05, cancel.cancel, args=("stop",)).start()
    with pytest.raises(CancelledError, match="stop"):
        loop.run(waits, timeout=None, cancel=cancel)
    assert cancelled.wait(30)  # the task on the loop was cancelled, not left running


async def _running_loop():
    import asyncio

    return asyncio.get_running_loop()


def _child_runs_on_the_shared_loop(conn) -> None:
    conn.send(shared_loop().run(_sleep_then, "from the child", 0, timeout=None))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX-only")
def test_a_forked_child_gets_a_shared_loop_of_its_own():
    assert shared_loop().run(_sleep_then, "parent", 0, timeout=None) == "parent"  # running now
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() of a threaded process
        child = ctx.Process(target=_child_runs_on_the_shared_loop, args=(send,), daemon=True)
        child.start()
    try:
        assert receive.poll(60), "the forked child did not answer"
        assert receive.recv() == "from the child"
    finally:
        child.join(30)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0


def test_stopping_a_loop_thread_cancels_the_anyio_tasks_still_running_and_joins_its_thread():
    """The MCP toolset's loop and the shared loop are one implementation: anyio code (the
    mcp SDK's) runs on it, and stop() cancels what still runs there (an MCP server's
    supervisor task) before the thread ends."""
    import anyio

    loop = LoopThread("agentkit-test-stop")
    cancelled = threading.Event()

    async def serves_forever() -> None:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.sleep, 60)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise

    future = loop.submit(serves_forever)
    assert loop.call(threading.get_ident, timeout=10) == loop.thread_id
    loop.stop()
    assert cancelled.is_set() and future.cancelled()
    assert not any(t.name == "agentkit-test-stop" for t in threading.enumerate())
    loop.stop()  # idempotent


def _child_uses_the_parents_loop(loop, conn) -> None:
    try:
        loop.run(_sleep_then, "answered", 0, timeout=5)
    except RuntimeError as exc:
        conn.send(str(exc))
    else:
        conn.send("the call was answered")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX-only")
def test_a_forked_child_calling_its_parents_loop_gets_an_error_not_a_hang():
    """A toolset opened before a fork (Celery prefork, gunicorn --preload) cannot be used in
    the child, whose copy of the loop has no thread: the call says so at once."""
    loop = LoopThread("agentkit-test-fork", what="MCP call")
    try:
        ctx = multiprocessing.get_context("fork")
        receive, send = ctx.Pipe(duplex=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            child = ctx.Process(target=_child_uses_the_parents_loop, args=(loop, send), daemon=True)
            child.start()
        assert receive.poll(30), "the forked child hung"
        message = receive.recv()
        child.join(30)
        assert "started in process" in message and "forked child" in message, message
        assert loop.run(_sleep_then, "parent", 0, timeout=10) == "parent"  # the parent's still works
    finally:
        loop.stop()
