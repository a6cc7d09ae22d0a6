"""Delivery of committed events to listeners, each with a bounded queue, on the
process's shared delivery threads (:mod:`agentkit._workers`), so a slow or failing
listener never blocks or breaks the session, and open sessions do not each hold a
thread."""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

from .._workers import WorkerPool, delivery_pool
from ..events import Event

__all__ = ["Listener", "Subscription", "Unsubscribe"]

Listener = Callable[[Event], object]


class Unsubscribe(Protocol):
    """What ``subscribe()`` returns: call it to remove the listener."""

    def __call__(self, *, drain: bool = False, timeout: float = 5.0) -> None:
        """Remove the listener. ``drain=False``: it is never called again, not even for
        events already queued (a call in flight may end, waited for up to ``timeout``
        seconds). ``drain=True``: nothing new is queued, and this returns once every
        event already queued for it has been delivered, or ``timeout`` seconds passed."""
logger = logging.getLogger("agentkit.session")

class Subscription:
    """One listener's queue, delivered in commit order by one shared delivery thread at
    a time (never two calls of one listener at once).

    States: active (events are queued and delivered), draining (closing: what is queued is
    still delivered, nothing new is taken) and stopped (nothing more is delivered, not
    even what was queued -- a removed listener is never called again)."""

    _BATCH = 64
    """Events delivered per turn on a shared thread before other listeners get theirs."""

    def __init__(self, listener: Listener, *, max_queue: int, timeout: float,
                 on_remove: Callable[[Subscription], None], pool: WorkerPool | None = None) -> None:
        self.listener = listener
        self._items: deque[Event] = deque()
        self._max = max_queue
        self._timeout = timeout
        self._on_remove = on_remove
        self._pool = pool or delivery_pool()
        self._cond = threading.Condition(threading.Lock())
        self._state = "active"
        self._scheduled = False  # a delivery turn is queued or running
        self._runner: threading.Thread | None = None
        self._busy_since: float | None = None

    @property
    def active(self) -> bool:
        """True while new events are accepted."""
        return self._state == "active"

    def offer(self, events: Sequence[Event]) -> None:
        """Queue committed events without blocking the committer. A listener whose
        current call has run past the timeout, or whose queue is full, is removed."""
        busy = self._busy_since
        if busy is not None and time.monotonic() - busy > self._timeout:
            self._drop(f"one call has been running for more than {self._timeout:g}s (stalled)")
            return
        with self._cond:
            if self._state != "active":
                return
            if len(self._items) + len(events) <= self._max:
                self._items.extend(events)
                self._schedule()
                return
        self._drop(f"it fell {self._max} events behind (queue full)")

    def _schedule(self) -> None:
        # under self._cond
        if self._items and not self._scheduled:
            self._scheduled = True
            self._pool.run(self._deliver)

    def close(self, *, drain: bool = True) -> None:
        """Stop taking events; deliver what is queued when ``drain``, else nothing more.
        Does not wait: see :meth:`join`."""
        with self._cond:
            if self._state == "stopped" or (drain and self._state == "draining"):
                return
            self._state = "draining" if drain else "stopped"
            if not drain:
                self._items.clear()
            self._cond.notify_all()

    def join(self, deadline: float) -> None:
        """Wait until nothing more will be delivered (closed and drained, no call in
        flight) or ``deadline`` (time.monotonic) passes; returns at once when called from
        inside this listener."""
        if threading.current_thread() is self._runner:
            return
        with self._cond:
            while self._state == "active" or self._items or self._scheduled:
                if self._state == "stopped" and not self._scheduled:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)

    def _drop(self, why: str) -> None:
        with self._cond:
            if self._state == "stopped":
                return
            self._state = "stopped"
            self._items.clear()
            self._cond.notify_all()
        msg = f"agentkit: removed session listener {self.listener!r}: {why}"
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
        logger.warning(msg)
        self._on_remove(self)

    def _deliver(self) -> None:
        """One delivery turn on a shared thread: up to ``_BATCH`` events, then the turn
        is queued again behind other listeners' turns if more are waiting."""
        self._runner = threading.current_thread()
        try:
            for _ in range(self._BATCH):
                with self._cond:
                    if self._state == "stopped" or not self._items:
                        break
                    item = self._items.popleft()
                self._busy_since = time.monotonic()
                try:
                    self.listener(item)
                except Exception as exc:  # noqa: BLE001 - listener bugs must not break sessions
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
