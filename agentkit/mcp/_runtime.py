"""What a toolset owns and must tear down: the loop thread, the server connections and
the notification listeners' queues. Nothing here refers back to the toolset, so a
``weakref.finalize`` can own a :class:`Runtime` and shut it down at garbage collection or
interpreter exit."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .._threads import ListenerQueue
from ..errors import McpError

__all__: list[str] = []

log = logging.getLogger("agentkit.mcp")

_SHUTDOWN_GRACE = 20.0
"""How long close() waits for the servers to disconnect before cancelling them."""


_MAX_PENDING = 10_000
"""Notifications waiting for slow listeners; beyond this, new ones are dropped."""


class Notifier:
    """Delivers notifications to each listener in order, from a bounded queue of its own
    on the process's shared delivery threads (the one listener queue,
    :class:`agentkit._threads.ListenerQueue`), so a slow listener (a Session writing to
    its store) never blocks the event loop or the other listeners. The backlog is
    bounded: a chatty server cannot grow memory without limit behind a slow listener;
    beyond ``max_pending``, new notifications are dropped."""

    def __init__(self, max_pending: int = _MAX_PENDING) -> None:
        self._queues: list[ListenerQueue[dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._max = max_pending
        self._closed = False
        self._dropped_before = 0  # by listeners removed since
        self._warned = False

    @property
    def dropped(self) -> int:
        """How many notifications were dropped because a backlog was full."""
        with self._lock:
            return self._dropped_before + sum(q.dropped for q in self._queues)

    def add(self, listener: Callable[[dict[str, Any]], Any]) -> Callable[[], None]:
        def failed(why: str) -> None:
            log.warning("an MCP notification listener failed and was removed: %s", why, exc_info=True)
            self._forget(queue)

        queue: ListenerQueue[dict[str, Any]] = ListenerQueue(listener, max_queue=self._max, timeout=None,
                                                             on_drop=failed, overflow="drop-new")
        with self._lock:
            if self._closed:
                raise McpError("the MCP toolset is closed; notifications cannot be forwarded")
            self._queues.append(queue)

        def remove() -> None:
            queue.close(drain=False)
            self._forget(queue)

        return remove

    def _forget(self, queue: ListenerQueue[dict[str, Any]]) -> None:
        with self._lock:
            if queue in self._queues:
                self._queues.remove(queue)
                self._dropped_before += queue.dropped

    def in_delivery_thread(self) -> bool:
        """True when called from a listener (a delivery thread delivering to it)."""
        with self._lock:
            queues = list(self._queues)
        return any(q.in_listener() for q in queues)

    def put(self, note: dict[str, Any]) -> None:
        with self._lock:
            if self._closed:
                return
            queues = list(self._queues)
        for queue in queues:
            if not queue.offer([note]) and queue.active and not self._warned:
                self._warned = True  # once: a chatty server must not flood the log too
                log.warning("MCP notification listeners fell %d notifications behind; dropping new "
                            "notifications until they catch up", self._max)

    def close(self, timeout: float = 10.0) -> None:
        """Deliver what is queued, waiting up to ``timeout`` seconds; from a listener,
        nothing more is delivered (it must not wait for itself)."""
        inside = self.in_delivery_thread()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            queues = list(self._queues)
        for queue in queues:
            queue.close(drain=not inside)
        if inside:
            return
        deadline = time.monotonic() + timeout
        if not all([queue.join(deadline) for queue in queues]):  # a listener is stuck: leave it behind
            log.warning("an MCP notification listener did not return within %gs", timeout)


class Runtime:
    """Everything that must be torn down: the loop thread, the connections, the notifier.
    Holds no reference to the toolset, so a finalizer can own it."""

    def __init__(self, loop: Any, conns: dict[str, Any], notifier: Notifier) -> None:
        self.loop = loop
        self.conns = conns
        self.notifier = notifier
        self.supervisor: Any = None
        self.closed = False
        self.lock = threading.Lock()
        self.shut_down = threading.Event()
        """Set once :meth:`shutdown` has finished (servers, loop and notifier stopped)."""

    def shutdown(self) -> None:
        """Stop everything. Idempotent; from the loop thread itself (a toolset collected
        there) the work is handed to a short-lived thread, since it needs the loop."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
        if self.loop.in_loop_thread():
            threading.Thread(target=self._finish, name="agentkit-mcp-close").start()
        else:
            self._finish()

    def _finish(self) -> None:
        try:
            self._shutdown()
        finally:
            self.shut_down.set()

    def _shutdown(self) -> None:
        loop = self.loop
        try:
            if not loop.stopped:
                try:
                    loop.call(_request_stop_all, list(self.conns.values()), timeout=_SHUTDOWN_GRACE)
                except Exception:  # noqa: BLE001 - the loop may already be gone
                    log.debug("requesting MCP servers to stop failed", exc_info=True)
                if self.supervisor is not None:
                    deadline = time.monotonic() + _SHUTDOWN_GRACE
                    while not self.supervisor.done() and time.monotonic() < deadline:
                        time.sleep(0.02)
        finally:
            loop.stop()
            self.notifier.close()
            for conn in self.conns.values():
                conn.ready.set()


def _request_stop_all(conns: list[Any]) -> None:
    for conn in conns:
        conn.request_stop()


async def supervise(conns: list[Any]) -> None:
    import anyio

    async with anyio.create_task_group() as tg:
        for conn in conns:
            tg.start_soon(conn.run)
