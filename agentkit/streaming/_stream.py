"""The agent event stream: a generation on a worker thread, consumed as events.

``Session.stream(...)`` and ``run_agent_stream(...)`` run a generation on a worker
thread and hand the caller an :class:`AgentStream`: an iterator of
:class:`~agentkit.AgentEvent` objects (``_events.py``), ending with exactly one
``generation-end``, and a ``.result``. Events wait in a bounded buffer between the two
threads; a stream dropped before its end is stopped by the reaper thread.
"""

from __future__ import annotations

import contextvars
import queue
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Generic, Literal

from typing_extensions import TypeVar

from .._threads import anyio_module, stream_pool
from ..cancel import CancelToken
from ..errors import ConfigurationError
from ..results import RunResult
from ._events import AgentEvent, Emit, GenerationEndEvent

__all__ = ["AgentStream"]


class _Buffer:
    """A bounded FIFO between the generation thread (producer) and the consumer. A full
    buffer makes the producer wait; closing it wakes both sides. A side is woken once
    when the other starts waiting for it (not once per event), and the consumer takes
    everything buffered at once, so a consumer that keeps up costs one lock round per
    batch and the producer one uncontended lock per event."""

    def __init__(self, bound: int) -> None:
        self._items: deque[AgentEvent] = deque()
        self._taken: deque[AgentEvent] = deque()  # the consumer's batch (its thread only)
        self._bound = bound
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._closed = False  # the consumer went away: drop what the producer sends
        self._ended = False  # the producer sent its last event
        self._sleepers = 0  # threads waiting on the condition and not yet woken

    def _wait(self, timeout: float | None = None) -> bool:
        """Wait (the lock held) until woken or ``timeout``; the waker clears the count."""
        self._sleepers += 1
        woken = self._cond.wait(timeout)
        if not woken:
            self._sleepers = max(0, self._sleepers - 1)
        return woken

    def _wake(self) -> None:
        if self._sleepers:
            self._sleepers = 0
            self._cond.notify_all()

    def put(self, event: AgentEvent) -> None:
        with self._lock:
            # the consumer's batch counts: at most ``bound`` events wait in all (it
            # takes the next batch, and wakes this thread, when it has used up this one)
            while len(self._items) + len(self._taken) >= self._bound and not self._closed:
                self._wait()
            if self._closed:
                return
            self._items.append(event)
            if self._sleepers:
                self._wake()

    def end(self) -> None:
        with self._lock:
            self._ended = True
            self._sleepers = 0
            self._cond.notify_all()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._items.clear()
            self._taken.clear()
            self._sleepers = 0
            self._cond.notify_all()

    def get(self, timeout: float | None = None) -> AgentEvent | None | Literal[False]:
        """The next event, None when there will be no more, or False when ``timeout``
        seconds passed without one."""
        taken = self._taken
        if taken:
            try:
                return taken.popleft()
            except IndexError:  # closed from another thread just now
                pass
        with self._lock:
            while not self._items and not self._ended and not self._closed:
                if not self._wait(timeout) and timeout is not None:
                    return False
            if not self._items:
                return None
            self._items, self._taken = self._taken, self._items
            if self._sleepers:
                self._wake()
        return self._taken.popleft()


def _submit(fn: Callable[..., None], *args: Any) -> None:
    """Run ``fn(*args)`` on a stream thread (:func:`agentkit._threads.stream_pool`), in a
    copy of the caller's context (contextvars), so the generation's tracing span is a
    child of the caller's current span, as without a stream."""
    context = contextvars.copy_context()
    stream_pool().run(lambda: context.run(fn, *args), urgent=True)


class _Run:
    """The generation's side of a stream: all the worker thread holds. It never refers
    to the :class:`AgentStream`, so a stream its consumer dropped can be collected, and
    collecting it cancels the generation (see :func:`_abandoned`)."""

    __slots__ = ("buffer", "cancel", "done", "error", "result")

    def __init__(self, buffer: _Buffer, cancel: CancelToken) -> None:
        self.buffer = buffer
        self.cancel = cancel
        self.done = threading.Event()
        self.result: RunResult | None = None
        self.error: BaseException | None = None

    def work(self, run: Callable[[Emit, CancelToken], RunResult]) -> None:
        ended = False
        put = self.buffer.put

        def emit(event: AgentEvent) -> None:
            nonlocal ended
            if type(event) is GenerationEndEvent:
                ended = True
            put(event)

        try:
            self.result = run(emit, self.cancel)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            self.error = exc
        finally:
            if not ended:  # it failed before it started (closed session, bad option)
                self.buffer.put(GenerationEndEvent(result=self.result, error=self.error))
            self.done.set()
            self.buffer.end()

    def stop(self, reason: str) -> None:
        """Cancel the generation if it still runs and drop what is buffered (a producer
        waiting for room goes on at once), without waiting."""
        if not self.done.is_set():
            self.cancel.cancel(reason)
        self.buffer.close()


class _Reaper:
    """Stops the generations of streams collected before their end, on its own daemon
    thread: a weakref callback may run inside the cyclic garbage collector, on any
    thread, while that thread holds any lock (a buffer's, a token's), so it only puts
    the run on a queue (``SimpleQueue.put`` is safe there) and this thread stops it."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Run] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def ensure_running(self) -> None:
        thread = self._thread
        if thread is None or not thread.is_alive():  # not started yet, or lost in a fork
            with self._lock:
                if self._thread is thread:
                    self._thread = threading.Thread(target=self._serve, name="agentkit-stream-reaper", daemon=True)
                    self._thread.start()

    def abandoned(self, run: _Run) -> None:
        if not run.done.is_set():  # a flag read: no lock taken
            self._queue.put(run)

    def _serve(self) -> None:
        while True:
            self._queue.get().stop("the stream was dropped before its end, without close()")


_REAPER = _Reaper()

OutputT = TypeVar("OutputT", default=Any, covariant=True)


class AgentStream(Iterator[AgentEvent], Generic[OutputT]):
    """A generation running on a worker thread, consumed as an iterator of events.

    Iterate it (on any one thread) to receive every :class:`AgentEvent` in order; the
    last is a ``generation-end``. ``.result`` waits for the end and returns the result
    or raises the generation's error. ``close()`` (or leaving a ``with`` block) before
    the end cancels the generation; what it committed stays committed. A stream dropped
    before its end without ``close()`` cancels it too, once it is garbage collected.
    Events wait in a bounded buffer: when the consumer falls ``max_buffer`` events
    behind, the generation waits for it, so a slow consumer loses nothing and memory
    stays bounded.
    """

    def __init__(
        self,
        run: Callable[[Emit, CancelToken], RunResult[OutputT]],
        *,
        max_buffer: int = 1000,
        cancel: CancelToken | None = None,
    ) -> None:
        if not isinstance(max_buffer, int) or max_buffer < 1:
            raise ConfigurationError(f"max_buffer must be an int >= 1, got {max_buffer!r}")
        self._buffer = _Buffer(max_buffer)
        self._cancel = CancelToken()
        if cancel is not None:
            cancel.link(self._cancel)
        self._run = _Run(self._buffer, self._cancel)
        self._done = self._run.done
        self._finished = False
        _REAPER.ensure_running()
        weakref.finalize(self, _REAPER.abandoned, self._run).atexit = False
        _submit(self._run.work, run)

    def __iter__(self) -> AgentStream[OutputT]:
        return self

    def __next__(self) -> AgentEvent:
        taken = self._buffer._taken  # the batch in hand: no lock, no wait
        if taken and not self._finished:
            try:
                ready = taken.popleft()
            except IndexError:  # closed from another thread just now
                pass
            else:
                if type(ready) is GenerationEndEvent:
                    self._finished = True
                return ready
        event = self._next_within(None)
        if event is None:
            raise StopIteration
        assert event is not False
        return event

    def _next_within(self, timeout: float | None) -> AgentEvent | None | Literal[False]:
        """The next event, None at the end, or False when ``timeout`` seconds passed
        without one (web helpers send a keep-alive then)."""
        if self._finished:
            return None
        event = self._buffer.get(timeout)
        if event is None:
            self._finished = True
        elif isinstance(event, GenerationEndEvent):
            self._finished = True
        return event

    @property
    def result(self) -> RunResult[OutputT]:
        """The generation's result (waits for its end); raises its error instead when it
        failed or was cancelled. Events not yet consumed are discarded."""
        if not self._done.is_set():
            self._buffer.close()  # nobody will read them: the producer must not wait
            self._done.wait()
        if self._run.error is not None:
            raise self._run.error
        assert self._run.result is not None
        return self._run.result

    @property
    def done(self) -> bool:
        """True once the generation has ended."""
        return self._done.is_set()

    def close(self, reason: str = "stream closed") -> None:
        """Stop consuming: cancel the generation if it is still running and wait for it
        to stop. Idempotent."""
        self._stop(reason)
        self._done.wait()

    def _stop(self, reason: str) -> None:
        """Cancel the generation and drop what is buffered, without waiting."""
        self._finished = True
        self._run.stop(reason)

    def __enter__(self) -> AgentStream[OutputT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- async consumers (ASGI views): each wait runs on a worker thread (anyio) -------

    def __aiter__(self) -> AgentStream[OutputT]:
        return self

    async def __anext__(self) -> AgentEvent:
        """The next event, awaited without blocking the event loop. Cancelling the
        awaiting task closes the stream (and so cancels the generation)."""
        event = await self._anext_within(None)
        if event is None:
            raise StopAsyncIteration
        assert event is not False
        return event

    async def _anext_within(self, timeout: float | None) -> AgentEvent | None | Literal[False]:
        anyio = anyio_module()
        try:
            event: AgentEvent | None | Literal[False] = await anyio.to_thread.run_sync(
                self._next_within, timeout, abandon_on_cancel=True
            )
        except BaseException:
            self._stop("the consuming task was cancelled")
            raise
        return event

    async def aclose(self, reason: str = "stream closed") -> None:
        """:meth:`close` for async code: waits for the generation to stop on a worker thread."""
        anyio = anyio_module()
        self._stop(reason)  # at once, even when this task is being cancelled
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._done.wait)
