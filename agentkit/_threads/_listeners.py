"""The one listener queue: items delivered to one listener in order, from a bounded
queue, on the process's shared delivery threads (:func:`~._pool.delivery_pool`), so a
slow or failing listener never blocks the producer or the other listeners, and open
listeners do not each hold a thread."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, Literal, TypeVar

from ._pool import WorkerPool, delivery_pool

__all__ = ["ListenerQueue"]

T = TypeVar("T")

Overflow = Literal["drop-listener", "drop-new", "wait"]
"""What a full queue does: remove the listener, drop the new items (counted), or make the
producer wait for room (backpressure) for up to ``timeout`` seconds, then remove it."""


class ListenerQueue(Generic[T]):
    """One listener's queue, delivered in order by one shared delivery thread at a time
    (never two calls of one listener at once).

    States: active (items are queued and delivered), draining (closing: what is queued is
    still delivered, nothing new is taken) and stopped (nothing more is delivered, not
    even what was queued -- a removed listener is never called again).

    The listener is removed (``on_drop(why)`` is called once, after it stopped) when it
    raises, when one call has run for more than ``timeout`` seconds (seen at the next
    :meth:`offer`; None: never) and, with ``overflow="drop-listener"``, when its queue is
    full. With ``overflow="drop-new"`` a full queue drops the new items instead and counts
    them in :attr:`dropped`; with ``overflow="wait"`` :meth:`offer` waits for room up to
    ``timeout`` seconds (backpressure) and removes the listener after that."""

    _BATCH = 64
    """Items delivered per turn on a shared thread before other listeners get theirs."""

    def __init__(self, listener: Callable[[T], object], *, max_queue: int, timeout: float | None,
                 on_drop: Callable[[str], object], overflow: Overflow = "drop-listener",
                 pool: WorkerPool | None = None) -> None:
        self.listener = listener
        self._items: deque[T] = deque()
        self._max = max_queue
        self._timeout = timeout
        self._on_drop = on_drop
        self._overflow = overflow
        self._pool = pool or delivery_pool()
        self._cond = threading.Condition(threading.Lock())
        self._state = "active"
        self._scheduled = False  # a delivery turn is queued or running
        self._runner: threading.Thread | None = None
        self._busy_since: float | None = None
        self.dropped = 0
        """Items dropped because the queue was full (``overflow="drop-new"``)."""

    @property
    def active(self) -> bool:
        """True while new items are accepted."""
        return self._state == "active"

    def in_listener(self) -> bool:
        """True when called from inside this listener."""
        return threading.current_thread() is self._runner

    def offer(self, items: Sequence[T]) -> bool:
        """Queue ``items`` (without blocking the producer, unless ``overflow="wait"``);
        False when they were not taken (the listener is removed or closing, or the queue
        is full)."""
        busy = self._busy_since
        if busy is not None and self._timeout is not None and time.monotonic() - busy > self._timeout:
            self._drop(f"one call has been running for more than {self._timeout:g}s (stalled)")
            return False
        with self._cond:
            if self._state != "active":
                return False
            if self._overflow == "wait" and len(self._items) + len(items) > self._max:
                self._wait_for_room(len(items))
                if self._state != "active":
                    return False
            if len(self._items) + len(items) <= self._max:
                self._items.extend(items)
                self._schedule()
                return True
            if self._overflow == "drop-new":
                self.dropped += len(items)
                return False
        if self._overflow == "wait":
            self._drop(f"it did not take an event for {self._timeout:g}s (stalled)")
        else:
            self._drop(f"it fell {self._max} events behind (queue full)")
        return False

    def _wait_for_room(self, n: int) -> None:
        # under self._cond
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while self._state == "active" and len(self._items) + n > self._max:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            self._cond.wait(left)

    def _schedule(self) -> None:
        # under self._cond
        if self._items and not self._scheduled:
            self._scheduled = True
            self._pool.run(self._deliver)

    def close(self, *, drain: bool = True) -> None:
        """Stop taking items; deliver what is queued when ``drain``, else nothing more.
        Does not wait: see :meth:`join`."""
        with self._cond:
            if self._state == "stopped" or (drain and self._state == "draining"):
                return
            self._state = "draining" if drain else "stopped"
            if not drain:
                self._items.clear()
            self._cond.notify_all()

    def join(self, deadline: float) -> bool:
        """Wait until nothing more will be delivered (closed and drained, no call in
        flight) or ``deadline`` (time.monotonic) passes; returns at once when called from
        inside this listener. False when it returned with deliveries still to come."""
        if self.in_listener():
            return False
        with self._cond:
            while self._state == "active" or self._items or self._scheduled:
                if self._state == "stopped" and not self._scheduled:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def _drop(self, why: str) -> None:
        with self._cond:
            if self._state == "stopped":
                return
            self._state = "stopped"
            self._items.clear()
            self._cond.notify_all()
        self._on_drop(why)

    def _deliver(self) -> None:
        """One delivery turn on a shared thread: up to ``_BATCH`` items, then the turn is
        queued again behind other listeners' turns if more are waiting."""
        self._runner = threading.current_thread()
        try:
            for _ in range(self._BATCH):
                with self._cond:
                    if self._state == "stopped" or not self._items:
                        break
                    item = self._items.popleft()
                    if self._overflow == "wait":
                        self._cond.notify_all()  # a producer may wait for this room
                self._busy_since = time.monotonic()
                try:
                    self.listener(item)
                except Exception as exc:  # noqa: BLE001 - listener bugs must not break producers
                    self._busy_since = None
                    self._drop(f"it raised {type(exc).__name__}: {exc}")
                    break
                self._busy_since = None
        finally:
            self._runner = None
            with self._cond:
                self._scheduled = False
                if self._state == "stopped":
                    self._items.clear()
                elif self._items:
                    self._schedule()
                elif self._state == "draining":
                    self._state = "stopped"
                self._cond.notify_all()
