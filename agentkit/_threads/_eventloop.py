"""The background event-loop thread that synchronous callers cross into, for async-only
dependencies.

Instead of running a fresh event loop per call (which breaks inside Jupyter, ASGI
servers and threads that already run a loop), a :class:`LoopThread` is one loop thread
started with ``anyio.from_thread.start_blocking_portal()``; every sync call submits a
coroutine there and waits for it with a timeout and a CancelToken. An MCP toolset owns
one (the mcp SDK is async-only). Coroutine-only LangChain tools share the process's
:func:`shared_loop` (an :class:`AsyncioLoop`), started on first use and again in a
forked child, so async clients a tool keeps stay on one loop across calls and runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from ..cancel import CancelToken
from ..errors import CancelledError
from ._wait import CallTimeout

__all__ = ["AsyncioLoop", "LoopThread", "shared_loop"]

T = TypeVar("T")

_POLL = 0.05
"""How often a waiting caller looks at its CancelToken (seconds)."""


class _Stop(Exception):
    """Thrown into the portal context manager so remaining tasks are cancelled."""


class LoopThread:
    """A running event loop in a daemon thread, with a blocking portal into it. Misuse
    (a call after :meth:`stop`, a blocking call from the loop thread) raises ``error``
    with ``closed`` or a message naming ``what`` calls it."""

    def __init__(self, thread_name: str = "agentkit-loop", *, error: type[Exception] = RuntimeError,
                 closed: str = "the event loop was stopped", what: str = "call") -> None:
        from anyio.from_thread import start_blocking_portal

        self._error = error
        self._closed = closed
        self._what = what
        self._cm = start_blocking_portal()
        self.portal = self._cm.__enter__()
        self._lock = threading.Lock()
        self._stopped = False
        self.thread_id: int = self.portal.call(threading.get_ident)
        self.portal.call(_rename_thread, thread_name)

    @property
    def stopped(self) -> bool:
        """True after :meth:`stop`."""
        return self._stopped

    def in_loop_thread(self) -> bool:
        """True when called from the loop thread itself (a blocking call would deadlock)."""
        return threading.get_ident() == self.thread_id

    def submit(self, fn: Callable[..., Awaitable[T]], *args: Any) -> concurrent.futures.Future[T]:
        """Start ``fn(*args)`` as a task on the loop; cancelling the future cancels it."""
        with self._lock:
            if self._stopped:
                raise self._error(self._closed)
            try:
                return self.portal.start_task_soon(fn, *args)
            except RuntimeError as exc:  # the portal stopped under us
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
            guard.abandon(self.portal)
            raise

    def stop(self) -> None:
        """Cancel whatever still runs on the loop, stop it and join its thread. Idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        if self.in_loop_thread():  # pragma: no cover - guarded by callers
            raise self._error(f"the {self._what} event loop cannot be stopped from its own thread")
        self._cm.__exit__(_Stop, _Stop(), None)


class _Abandon:
    """Cancels one task for the thread waiting on it, whether or not that thread got the
    task's future: the task registers its cancel scope here when it starts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scope: Any = None
        self._abandoned = False

    async def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        import anyio

        with anyio.CancelScope() as scope:
            with self._lock:
                self._scope = scope
                if self._abandoned:
                    scope.cancel()
            return await fn(*args)
        raise anyio.get_cancelled_exc_class()()  # abandoned: the future ends cancelled

    def abandon(self, portal: Any) -> None:
        """Cancel the task (now, or as soon as it starts). Any thread but the loop's."""
        with self._lock:
            self._abandoned = True
            scope = self._scope
        if scope is not None:
            try:
                portal.start_task_soon(scope.cancel)
            except RuntimeError:  # the loop is gone, and the task with it
                pass


def _rename_thread(name: str) -> None:
    threading.current_thread().name = name


class AsyncioLoop:
    """The process's one long-lived asyncio loop in a daemon thread, for async-only work
    that belongs to no object (coroutine-only LangChain tools): started on first use, and
    again in a forked child (a Celery prefork worker), where the parent's loop thread does
    not exist. Works whether or not the calling thread runs a loop itself; async clients a
    tool keeps stay on this one loop across calls and runs.

    Plain asyncio rather than a :class:`LoopThread`: anyio's blocking portal, started in a
    forked child whose parent ran LangChain coroutines on one, never answers its first
    call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            alive = self._thread is not None and self._thread.is_alive()
            if self._loop is None or self._pid != os.getpid() or not alive:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=_serve, args=(loop,), name="agentkit-async", daemon=True)
                thread.start()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T], cancel: CancelToken) -> T:
        """Run ``coro`` on the loop and wait; cancelling ``cancel`` cancels the task."""
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure())
        while True:
            done, _ = concurrent.futures.wait([future], timeout=_POLL)
            if done:
                return future.result()
            if cancel.cancelled:
                future.cancel()
                raise CancelledError(cancel.reason)


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


_SHARED = AsyncioLoop()


def shared_loop() -> AsyncioLoop:
    """The process's one background asyncio loop (see :class:`AsyncioLoop`)."""
    return _SHARED
