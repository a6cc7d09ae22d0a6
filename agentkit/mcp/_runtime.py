"""What a toolset owns and must tear down: the loop thread, the server connections and
the notification delivery thread. Nothing here refers back to the toolset, so a
``weakref.finalize`` can own a :class:`Runtime` and shut it down at garbage collection or
interpreter exit."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import McpError

__all__: list[str] = []

log = logging.getLogger("agentkit.mcp")

_SHUTDOWN_GRACE = 20.0
"""How long close() waits for the servers to disconnect before cancelling them."""


_MAX_PENDING = 10_000
"""Notifications waiting for slow listeners; beyond this, new ones are dropped."""


class Notifier:
    """Delivers notifications to listeners in order, on one thread of its own, so a slow
    listener (a Session writing to its store) never blocks the event loop. The backlog
    is bounded: a chatty server cannot grow memory without limit behind a slow listener."""

    def __init__(self, max_pending: int = _MAX_PENDING) -> None:
        self._listeners: list[Callable[[dict[str, Any]], Any]] = []
        self._lock = threading.Lock()
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=max_pending)
        self._thread: threading.Thread | None = None
        self._closed = False
        self._abandoned = False
        self.dropped = 0
        """How many notifications were dropped because the backlog was full."""

    def add(self, listener: Callable[[dict[str, Any]], Any]) -> Callable[[], None]:
        with self._lock:
            if self._closed:
                raise McpError("the MCP toolset is closed; notifications cannot be forwarded")
            self._listeners.append(listener)
            if self._thread is None:
                self._thread = threading.Thread(target=self._deliver, name="agentkit-mcp-notify", daemon=True)
                self._thread.start()

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def in_delivery_thread(self) -> bool:
        """True when called from a listener (the delivery thread)."""
        return threading.current_thread() is self._thread

    def put(self, note: dict[str, Any]) -> None:
        with self._lock:
            if self._closed or not self._listeners:
                return
        try:
            self._queue.put_nowait(note)
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1:
                log.warning("MCP notification listeners fell %d notifications behind; dropping new "
                            "notifications until they catch up", self._queue.maxsize)

    def _deliver(self) -> None:
        while True:
            note = self._queue.get()
            if note is None or self._abandoned:
                return
            with self._lock:
                listeners = list(self._listeners)
            for listener in listeners:
                try:
                    listener(note)
                except Exception:  # noqa: BLE001 - one listener must not stop the others
                    log.warning("an MCP notification listener failed and was removed", exc_info=True)
                    with self._lock:
                        if listener in self._listeners:
                            self._listeners.remove(listener)

    def close(self, timeout: float = 10.0) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        if thread is threading.current_thread():  # closed by a listener: nothing more is delivered
            self._abandoned = True
            try:
                self._queue.put_nowait(None)  # wakes the loop when the queue was empty
            except queue.Full:
                pass
            return
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:  # a listener is stuck: leave its (daemon) thread behind
            log.warning("an MCP notification listener did not return within %gs", timeout)
            return
        if thread is not None:
            thread.join(timeout)


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
                    loop.portal.call(_request_stop_all, list(self.conns.values()))
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
