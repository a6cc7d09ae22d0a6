"""Delivery of committed events to listeners, each on its own thread with a bounded
queue, so a slow or failing listener never blocks or breaks the session."""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Sequence

from .events import Event

__all__ = ["Listener", "Subscription"]

Listener = Callable[[Event], object]
logger = logging.getLogger("agentkit")

class Subscription:
    """One listener's queue and delivery thread. Events arrive in commit order.

    States: active (events are queued and delivered), draining (closing: what is queued is
    still delivered, nothing new is taken) and stopped (nothing more is delivered, not
    even what was queued -- a removed listener is never called again)."""

    def __init__(self, listener: Listener, *, max_queue: int, timeout: float,
                 on_remove: Callable[[Subscription], None]) -> None:
        self.listener = listener
        self._items: deque[Event] = deque()
        self._max = max_queue
        self._timeout = timeout
        self._on_remove = on_remove
        self._cond = threading.Condition(threading.Lock())
        self._state = "active"
        self._busy_since: float | None = None
        self._thread = threading.Thread(target=self._run, name="agentkit-listener", daemon=True)
        self._thread.start()

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
                self._cond.notify()
                return
        self._drop(f"it fell {self._max} events behind (queue full)")

    def close(self, *, drain: bool = True) -> None:
        """Stop taking events; deliver what is queued when ``drain``, else nothing more.
        Does not wait: see :meth:`join`."""
        with self._cond:
            if self._state == "stopped" or (drain and self._state == "draining"):
                return
            self._state = "draining" if drain else "stopped"
            if not drain:
                self._items.clear()
            self._cond.notify()

    def join(self, deadline: float) -> None:
        """Wait until the delivery thread ends or ``deadline`` (time.monotonic) passes;
        returns at once when called from the delivery thread itself."""
        if threading.current_thread() is not self._thread:
            self._thread.join(max(0.0, deadline - time.monotonic()))

    def _drop(self, why: str) -> None:
        with self._cond:
            if self._state == "stopped":
                return
            self._state = "stopped"
            self._items.clear()
            self._cond.notify()
        msg = f"agentkit: removed session listener {self.listener!r}: {why}"
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
        logger.warning(msg)
        self._on_remove(self)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._items and self._state == "active":
                    self._cond.wait()
                if self._state == "stopped" or not self._items:
                    self._state = "stopped"
                    return
                item = self._items.popleft()
            self._busy_since = time.monotonic()
            try:
                self.listener(item)
            except Exception as exc:  # noqa: BLE001 - listener bugs must not break sessions
                self._busy_since = None
                self._drop(f"it raised {type(exc).__name__}: {exc}")
                return
            self._busy_since = None
