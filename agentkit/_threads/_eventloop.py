"""The background event-loop thread that synchronous callers cross into, for async-only
dependencies: one implementation, :class:`LoopThread`.

Instead of running a fresh event loop per call (which breaks inside Jupyter, ASGI
servers and threads that already run a loop), a :class:`LoopThread` is one asyncio loop
running forever in a daemon thread; every sync call submits a coroutine there and waits
for it with a timeout and a CancelToken, and a call abandoned either way has its task on
the loop cancelled. anyio code (the mcp SDK) runs on it unchanged, since anyio's asyncio
backend needs nothing but a running asyncio loop.

Two kinds of owner: an MCP toolset owns one (the mcp SDK is async-only; the toolset's
servers live and die with it), and work that belongs to no object (coroutine-only
LangChain tools) shares the process's :func:`shared_loop`, started on first use and again
in a forked child (a Celery prefork worker), where the parent's loop thread does not
exist, so async clients a tool keeps stay on one loop across calls and runs.

Plain asyncio rather than anyio's blocking portal: a portal started in a forked child
whose parent ran coroutines on one never answers its first call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..cancel import CancelToken
from ..errors import CancelledError
from ._wait import CallTimeout

__all__ = ["LoopThread", "shared_loop"]

T = TypeVar("T")

log = logging.getLogger("agentkit")

_POLL = 0.05
"""How often a waiting caller looks at its CancelToken (seconds)."""

_STOP_GRACE = 10.0
"""How long :meth:`LoopThread.stop` waits for cancelled tasks to finish (seconds)."""


class LoopThread:
    """A running asyncio event loop in a daemon thread. Misuse (a call after
    :meth:`stop`, a call from a forked child, a blocking call from the loop thread)
    raises ``error`` with ``closed`` or a message naming ``what`` calls it."""

    def __init__(self, thread_name: str = "agentkit-loop", *, error: type[Exception] = RuntimeError,
                 closed: str = "the event loop was stopped", what: str = "call") -> None:
        self._error = error
        self._closed = closed
        self._what = what
        self._lock = threading.Lock()
        self._stopped = False
        self._pid = os.getpid()
        self._loop = asyncio.new_event_loop()
        started = threading.Event()
        self._thread = threading.Thread(target=_serve, args=(self._loop, started), name=thread_name,
                                        daemon=True)
        self._thread.start()
        started.wait()
        self.thread_id: int = self._thread.ident or 0

    @property
    def stopped(self) -> bool:
        """True after :meth:`stop`."""
        return self._stopped

    def usable(self) -> bool:
        """True while calls can be made: not stopped, in the process that started the
        loop, and its thread still running."""
        return not self._stopped and self._pid == os.getpid() and self._thread.is_alive()

    def in_loop_thread(self) -> bool:
        """True when called from the loop thread itself (a blocking call would deadlock)."""
        return threading.get_ident() == self.thread_id

    def submit(self, fn: Callable[..., Awaitable[T]], *args: Any) -> concurrent.futures.Future[T]:
        """Start ``fn(*args)`` as a task on the loop; cancelling the future cancels it."""
        with self._lock:
            if self._stopped:
                raise self._error(self._closed)
            if self._pid != os.getpid():
                raise self._error(f"the {self._what} event loop was started in process {self._pid}, "
                                  f"not this one ({os.getpid()}, a forked child): create it again here")
            coro = _await(fn, args)
            try:
                return asyncio.run_coroutine_threadsafe(coro, self._loop)
            except RuntimeError as exc:  # the loop closed under us
                coro.close()
                raise self._error(f"the {self._what} event loop is not running: {exc}") from None

    def run(self, fn: Callable[..., Awaitable[T]], *args: Any, timeout: float | None,
            cancel: CancelToken | None = None, pump: Callable[[], None] | None = None) -> T:
        """Run ``fn(*args)`` on the loop and wait for its result.

        Raises :class:`CallTimeout` after ``timeout`` seconds and
        :class:`~agentkit.errors.CancelledError` when ``cancel`` is set; either way the
        task on the loop is cancelled. Exceptions of the task propagate unchanged.
        ``pump()`` runs in the waiting thread between waits and once more at the end (the
        toolset delivers a call's progress updates with it).
        """
        if self.in_loop_thread():
            raise self._error(f"a blocking {self._what} was made from its event-loop thread itself; "
                              "make it from ordinary threads")
        guard = _Abandon()
        future: concurrent.futures.Future[T] | None = None
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            future = self.submit(guard.run, fn, *args)
            while True:
                step = _POLL if deadline is None else max(0.0, min(_POLL, deadline - time.monotonic()))
                done, _ = concurrent.futures.wait([future], timeout=step)
                if pump is not None:
                    pump()
                if done:
                    return future.result()
                if cancel is not None and cancel.cancelled:
                    raise CancelledError(cancel.reason)
                if deadline is not None and time.monotonic() >= deadline:
                    raise CallTimeout(f"no answer within {timeout:g}s")
        except BaseException:
            # a timeout, the token, or KeyboardInterrupt in the waiting thread: the task
            # on the loop must not run on unobserved (Ctrl-C can even land while the task
            # is being submitted, after it started but before this thread holds its future)
            if future is not None:
                future.cancel()
            guard.abandon(self._loop)
            raise

    def call(self, fn: Callable[..., T], *args: Any, timeout: float | None) -> T:
        """Run the plain function ``fn(*args)`` in the loop thread (where loop-bound
        objects may be touched) and wait for its result."""
        async def in_loop() -> T:
            return fn(*args)

        return self.run(in_loop, timeout=timeout)

    def stop(self) -> None:
        """Cancel whatever still runs on the loop, wait for it (up to 10 s), stop the loop
        and join its thread. Idempotent; in a forked child it only marks the loop stopped
        (the loop thread is the parent's)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        if self.in_loop_thread():  # pragma: no cover - guarded by callers
            raise self._error(f"the {self._what} event loop cannot be stopped from its own thread")
        if self._pid != os.getpid() or not self._thread.is_alive():
            return
        try:
            asyncio.run_coroutine_threadsafe(_cancel_all(), self._loop).result(_STOP_GRACE + 1)
        except Exception:  # noqa: BLE001 - stop the loop whatever its tasks did
            log.debug("cancelling the tasks of the %s event loop failed", self._what, exc_info=True)
        try:
            self._loop.call_soon_threadsafe(self._loop.stop)
        except RuntimeError:  # already closed
            pass
        self._thread.join(_STOP_GRACE)


async def _await(fn: Callable[..., Awaitable[T]], args: tuple[Any, ...]) -> T:
    return await fn(*args)


async def _cancel_all() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=_STOP_GRACE)


def _serve(loop: asyncio.AbstractEventLoop, started: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(started.set)
    try:
        loop.run_forever()
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


class _Abandon:
    """Cancels one task for the thread waiting on it, whether or not that thread got the
    task's future: the task registers itself here when it starts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._task: asyncio.Task[Any] | None = None
        self._abandoned = False

    async def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        with self._lock:
            self._task = asyncio.current_task()
            if self._abandoned:
                raise asyncio.CancelledError
        return await fn(*args)

    def abandon(self, loop: asyncio.AbstractEventLoop) -> None:
        """Cancel the task (now, or as soon as it starts). Any thread but the loop's."""
        with self._lock:
            self._abandoned = True
            task = self._task
        if task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop is gone, and the task with it
                pass


_SHARED_LOCK = threading.Lock()
_SHARED: LoopThread | None = None


def shared_loop() -> LoopThread:
    """The process's one background loop for work that belongs to no object, started on
    first use and again in a forked child or after its thread died."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None or not _SHARED.usable():
            _SHARED = LoopThread("agentkit-async", what="async tool call")
        return _SHARED
