"""Delivery of committed events to listeners, each on its own thread with a bounded
queue, so a slow or failing listener never blocks or breaks the session."""

from __future__ import annotations

import logging
import queue
import threading
import time
import warnings
from collections.abc import Callable, Sequence

from .events import Event

__all__ = ["Listener", "Subscription"]

Listener = Callable[[Event], object]
logger = logging.getLogger("agentkit")

_STOP = object()


class Subscription:
    """One listener's queue and delivery thread. Events arrive in commit order."""

    def __init__(self, listener: Listener, *, max_queue: int, timeout: float,
                 on_remove: Callable[[Subscription], None]) -> None:
        self.listener = listener
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_queue)
        self._timeout = timeout
        self._on_remove = on_remove
        self.active = True
        self._busy_since: float | None = None
        self._thread = threading.Thread(target=self._run, name="agentkit-listener", daemon=True)
        self._thread.start()

    def offer(self, events: Sequence[Event]) -> None:
        """Queue committed events without blocking the committer. A listener whose
        current call has run past the timeout, or whose queue is full, is removed."""
        busy = self._busy_since
        if busy is not None and time.monotonic() - busy > self._timeout:
            self._drop(f"one call has been running for more than {self._timeout:g}s (stalled)")
            return
        for ev in events:
            if not self.active:
                return
            try:
                self._queue.put_nowait(ev)
            except queue.Full:
                self._drop(f"it fell {self._queue.maxsize} events behind (queue full)")
                return

    def close(self, *, drain: bool = True, timeout: float = 5.0) -> None:
        """Stop delivery (after queued events, when ``drain``)."""
        if not self.active:
            return
        self.active = False
        if not drain:
            return
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            return
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _drop(self, why: str) -> None:
        if not self.active:
            return
        self.active = False
        msg = f"agentkit: removed session listener {self.listener!r}: {why}"
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
        logger.warning(msg)
        self._on_remove(self)
        # unblock the thread if it waits on an empty queue
        try:
            self._queue.put_nowait(_STOP)
        except queue.Full:
            pass

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if not self.active and self._queue.empty():
                return
            self._busy_since = time.monotonic()
            try:
                self.listener(item)  # type: ignore[arg-type]
                self._busy_since = None
            except Exception as exc:  # noqa: BLE001 - listener bugs must not break sessions
                self._drop(f"it raised {type(exc).__name__}: {exc}")
                return
