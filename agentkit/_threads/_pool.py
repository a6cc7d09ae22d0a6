"""The one pool implementation, and the process-wide pools shared by every session.

Three pools serve all sessions of a process, so 10,000 open sessions cost O(workers)
threads, not O(sessions):

- the **tool pool** runs tool calls (each session reaches it through a
  :class:`SessionExecutor`, which keeps that session's ``max_tool_workers`` cap and
  cancels its queued calls on close). Its size bounds how many tool calls run at once;
  a call submitted from a tool pool thread (a tool whose work runs a generation with
  parallel tools of its own) always gets a thread, so nesting cannot deadlock the pool.
- the **delivery pool** runs listener delivery. A stalled listener holds one thread;
  when queued deliveries wait while every thread has been busy for ``stall_after``
  seconds, a watchdog adds a thread, so a stalled listener cannot stall the others.
- the **stream pool** runs the generations of streams. Every task is urgent: there is
  no bound (a generation may start streams of its own, and a bound could make it wait
  for itself), but a thread that finished one stream serves the next.

Threads start on demand and end after ``idle_seconds`` without work.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

__all__ = ["SessionExecutor", "WorkerPool", "delivery_pool", "stream_pool", "tool_pool"]

T = TypeVar("T")

_IDLE_SECONDS = 10.0


class WorkerPool:
    """Threads that run queued callables; at most ``size`` unless a call is urgent or
    the watchdog finds the pool stalled (see the module docstring)."""

    def __init__(self, size: int, *, name: str, stall_after: float | None = None,
                 idle_seconds: float = _IDLE_SECONDS) -> None:
        self.size = size
        self._name = name
        self._stall_after = stall_after
        self._idle_seconds = idle_seconds
        self._cond = threading.Condition(threading.Lock())
        self._tasks: deque[Callable[[], None]] = deque()
        self._threads = 0
        self._idle = 0
        self._last_progress = time.monotonic()
        self._watchdog: threading.Thread | None = None
        self._local = threading.local()

    @property
    def threads(self) -> int:
        """Threads alive now."""
        return self._threads

    def in_worker(self) -> bool:
        """True on one of this pool's threads."""
        return getattr(self._local, "worker", False)

    def run(self, fn: Callable[[], None], *, urgent: bool = False) -> None:
        """Queue ``fn``; it runs on a pool thread."""
        with self._cond:
            self._tasks.append(fn)
            if len(self._tasks) > self._idle and (self._threads < self.size or urgent):
                self._spawn()
            else:
                self._cond.notify()
            if self._stall_after is not None and self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch, name=f"{self._name}-watchdog", daemon=True)
                self._watchdog.start()

    def _spawn(self) -> None:
        self._threads += 1
        threading.Thread(target=self._work, name=self._name, daemon=True).start()

    def _work(self) -> None:
        self._local.worker = True
        while True:
            with self._cond:
                while not self._tasks:
                    self._idle += 1
                    woke = self._cond.wait(self._idle_seconds)
                    self._idle -= 1
                    if not woke and not self._tasks:
                        self._threads -= 1
                        return
                task = self._tasks.popleft()
                self._last_progress = time.monotonic()
            try:
                task()
            except BaseException:  # noqa: BLE001 - tasks report their own errors
                pass
            with self._cond:
                self._last_progress = time.monotonic()

    def _watch(self) -> None:
        assert self._stall_after is not None
        while True:
            time.sleep(self._stall_after / 2)
            with self._cond:
                stalled = time.monotonic() - self._last_progress > self._stall_after
                if self._tasks and self._idle == 0 and stalled:
                    self._spawn()
                    self._last_progress = time.monotonic()


def _env_int(name: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(name, default)))
    except ValueError:
        return default


_tool_pool: WorkerPool | None = None
_delivery_pool: WorkerPool | None = None
_stream_pool: WorkerPool | None = None
_pools_lock = threading.Lock()


def tool_pool() -> WorkerPool:
    """The process's shared tool pool (``AGENTKIT_TOOL_THREADS`` threads, default 32)."""
    global _tool_pool
    with _pools_lock:
        if _tool_pool is None:
            _tool_pool = WorkerPool(_env_int("AGENTKIT_TOOL_THREADS", 32), name="agentkit-tool")
        return _tool_pool


def delivery_pool() -> WorkerPool:
    """The process's shared listener-delivery pool (``AGENTKIT_DELIVERY_THREADS``
    threads, default 4; more while listeners stall)."""
    global _delivery_pool
    with _pools_lock:
        if _delivery_pool is None:
            _delivery_pool = WorkerPool(_env_int("AGENTKIT_DELIVERY_THREADS", 4), name="agentkit-listener",
                                        stall_after=0.5)
        return _delivery_pool


def stream_pool() -> WorkerPool:
    """The process's shared stream threads: submit with ``urgent=True`` (every stream
    gets a thread at once); a thread idle for 30 seconds exits."""
    global _stream_pool
    with _pools_lock:
        if _stream_pool is None:
            _stream_pool = WorkerPool(1, name="agentkit-stream", idle_seconds=30.0)
        return _stream_pool


class _Call:
    __slots__ = ("future", "call", "urgent")

    def __init__(self, future: Future[Any], call: Callable[[], Any], *, urgent: bool) -> None:
        self.future = future
        self.call = call
        self.urgent = urgent


class SessionExecutor(Executor):
    """One session's door to the shared tool pool: at most ``max_workers`` of its calls
    run at once; :meth:`shutdown` refuses new calls and cancels the queued ones."""

    def __init__(self, max_workers: int, pool: WorkerPool | None = None) -> None:
        self._max = max_workers
        self._pool = pool or tool_pool()
        self._lock = threading.Lock()
        self._running = 0
        self._waiting: deque[_Call] = deque()
        self._shutdown = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        # submitted from a tool thread: a nested generation, which must not wait behind
        # the calls that wait for it
        item = _Call(future, lambda: fn(*args, **kwargs), urgent=self._pool.in_worker())
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new tool calls after the session closed")
            if self._running >= self._max:
                self._waiting.append(item)
                return future
            self._running += 1
        self._start(item)
        return future

    def _start(self, item: _Call) -> None:
        def task() -> None:
            try:
                if item.future.set_running_or_notify_cancel():
                    try:
                        item.future.set_result(item.call())
                    except BaseException as exc:  # noqa: BLE001 - handed to the waiter
                        item.future.set_exception(exc)
            finally:
                self._next()

        self._pool.run(task, urgent=item.urgent)

    def _next(self) -> None:
        with self._lock:
            if not self._waiting:
                self._running -= 1
                return
            item = self._waiting.popleft()
        self._start(item)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            waiting, self._waiting = (list(self._waiting), deque()) if cancel_futures else ([], self._waiting)
        for item in waiting:
            item.future.cancel()
