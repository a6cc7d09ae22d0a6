"""Delivery of committed events to listeners, each with a bounded queue (the one
listener queue, :class:`agentkit._threads.ListenerQueue`) on the process's shared
delivery threads, so a slow or failing listener never blocks or breaks the session, and
open sessions do not each hold a thread."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Protocol

from .._threads import ListenerQueue, WorkerPool
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

class Subscription(ListenerQueue[Event]):
    """One listener's queue of committed events (:class:`agentkit._threads.ListenerQueue`):
    a listener that raises, stalls past the timeout or falls ``max_queue`` events behind
    is removed with a warning."""

    def __init__(self, listener: Listener, *, max_queue: int, timeout: float,
                 on_remove: Callable[[Subscription], None], pool: WorkerPool | None = None) -> None:
        super().__init__(listener, max_queue=max_queue, timeout=timeout, on_drop=self._removed, pool=pool)
        self._on_remove = on_remove

    def _removed(self, why: str) -> None:
        msg = f"agentkit: removed session listener {self.listener!r}: {why}"
        warnings.warn(msg, RuntimeWarning, stacklevel=4)
        logger.warning(msg)
        self._on_remove(self)
