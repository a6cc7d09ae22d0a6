"""Bounded waits on a PostgreSQL connection (private): one watchdog thread per process
shuts down the socket of a connection whose operation outlasts its deadline, so a
frozen or unreachable server ends the wait in an error instead of blocking forever.

TCP keepalives and ``tcp_user_timeout`` cannot do this: a stopped server's kernel still
acknowledges every packet. libpq then sees the shut-down socket as a lost connection;
the caller decides what that means for a write (see ``PostgresEventStore.append``).
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time
from typing import Any

import psycopg

__all__ = ["Deadline", "WATCHDOG", "Watchdog"]


class Deadline:
    """One armed operation: the socket it may cut and whether it was cut."""

    __slots__ = ("at", "fd", "fired", "done", "seconds")

    def __init__(self, at: float, fd: int, seconds: float) -> None:
        self.at = at
        self.fd = fd
        self.seconds = seconds
        self.fired = False
        self.done = False


class Watchdog:
    """Deadlines of operations in flight, kept by one daemon thread (started on first
    use, and again in a forked child)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Deadline]] = []
        self._seq = itertools.count()
        self._pid = 0

    def arm(self, conn: Any, seconds: float) -> Deadline:
        """Cut ``conn``'s socket unless :meth:`disarm` is called within ``seconds``."""
        try:
            fd = conn.pgconn.socket
        except (AttributeError, OSError, ValueError, psycopg.Error):  # closed: the operation fails on its own
            fd = -1
        entry = Deadline(time.monotonic() + seconds, fd, seconds)
        if fd < 0:
            return entry
        with self._cond:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._heap = []
                threading.Thread(target=self._run, name="agentkit-pg-watchdog", daemon=True).start()
            first = not self._heap or entry.at < self._heap[0][0]
            heapq.heappush(self._heap, (entry.at, next(self._seq), entry))
            if first:
                self._cond.notify()
        return entry

    def disarm(self, entry: Deadline) -> None:
        """The operation ended: never cut its socket (waits for a cut in progress)."""
        with self._cond:
            entry.done = True

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                delay = self._heap[0][0] - time.monotonic()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                _at, _seq, entry = heapq.heappop(self._heap)
                entry.fired = True
                _cut(entry.fd)


def _cut(fd: int) -> None:
    """Shut the socket down (both ways) through a duplicate of its descriptor: libpq's
    wait on it ends at once; the descriptor itself stays libpq's to close."""
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed or never connected: nothing left to cut
    finally:
        sock.close()


WATCHDOG = Watchdog()
"""The process's watchdog."""
