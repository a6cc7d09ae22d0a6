"""Turn locks on PostgreSQL (private; :meth:`PostgresEventStore.turn_lock` uses it).

A session's turn lock is a session-level advisory lock (``{schema}.take_turn``, on the key
``{schema}.turn_key(session_id)``) held on a connection of its own, never one of the
pool's: PostgreSQL releases it when the block ends, when the holder's process dies (its
connection closes) or when the server loses that connection. Every grant takes the
session's next epoch (the fencing token of :class:`~agentkit.stores.base.TurnLease`);
``{schema}.append_leased`` refuses an append whose epoch is no longer current or whose
lock connection no longer holds the lock.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from ..cancel import CancelToken
from ..errors import CancelledError, ConfigurationError, StoreError
from ._checks import turn_timeout
from ._pg import LAYOUT, Pg, psycopg
from .base import TurnLease

__all__ = ["PgTurnLease", "TurnLocks"]

_IDLE = 2  # lock connections kept open for the next turn, per store object
_CANCEL_SLICE = 0.1  # seconds a try waits in the server when a cancel token may end the wait
_SLICE = 1.0  # ... when only a timeout can


class PgTurnLease(TurnLease):
    """A held turn lock: its epoch and the connection (backend ``pid``) holding it."""

    __slots__ = ("conn", "pid", "owner")

    def __init__(self, session_id: str, epoch: int, conn: psycopg.Connection[Any], owner: TurnLocks) -> None:
        super().__init__(session_id, epoch)
        self.conn = conn
        self.pid = conn.info.backend_pid
        self.owner = owner

    @property
    def held(self) -> bool:
        """False once released, refused by the store, or its lock connection is broken."""
        return not self._lost and not self.conn.closed and not self.conn.broken


class TurnLocks:
    """The turn locks one store object takes, and its idle lock connections."""

    def __init__(self, pg: Pg) -> None:
        self._pg = pg
        self.schema = pg.schema
        self._idle: list[psycopg.Connection[Any]] = []
        self._inherited: list[psycopg.Connection[Any]] = []  # a forked child's copies, kept from closing
        self._pid = os.getpid()
        self._mutex = threading.Lock()
        self._unlock_all = "SELECT pg_advisory_unlock_all()"

    def acquire(self, session_id: str, timeout: float | None, cancel: CancelToken | None) -> PgTurnLease:
        """Wait for the lock (in the server's queue, in slices of at most 0.1 s when
        ``cancel`` is given), then take the next epoch."""
        if timeout is not None and (
            not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout >= 0
        ):
            raise ConfigurationError(f"timeout must be None or a number of seconds >= 0, got {timeout!r}")
        if cancel is not None and not isinstance(cancel, CancelToken):
            raise ConfigurationError(f"cancel must be a CancelToken or None, not {type(cancel).__name__}")
        deadline = None if timeout is None else time.monotonic() + timeout
        what = f"cannot take the turn lock of session {session_id!r}"
        self._check_layout(what)
        conn, reused = self._connection(what)
        query = self._pg.q("SELECT {s}.take_turn(%s, %s)")
        # each try waits in the server's lock queue (woken at the release) for one slice,
        # short enough to see cancel promptly
        longest = _CANCEL_SLICE if cancel is not None else _SLICE
        busy = False
        try:
            while True:
                if cancel is not None and cancel.cancelled:
                    raise CancelledError(cancel.reason)
                left = None if deadline is None else deadline - time.monotonic()
                wait = longest if left is None else max(0.0, min(longest, left))
                try:
                    busy = True
                    with self._pg.bounded(conn, wait + self._pg.timeout):
                        row = conn.execute(query, [session_id, int(wait * 1000)]).fetchone()
                    busy = False
                except psycopg.OperationalError:
                    if not reused or not conn.broken:
                        raise
                    conn.close()  # an idle lock connection went stale (a server restart): one fresh try
                    conn, reused = self._connection(what, fresh=True)
                    continue
                reused = False
                epoch = int(row[0]) if row else 0
                if epoch:
                    return PgTurnLease(session_id, epoch, conn, self)
                # not granted in this slice; a grant racing the slice's lock_timeout may
                # still have left the lock with this connection, and a next take_turn
                # would then hold it twice (one release would not free it): an unleased
                # lock connection holds no advisory lock, so let go of any
                busy = True
                with self._pg.bounded(conn):
                    conn.execute(self._unlock_all)
                busy = False
                if left is not None and left <= wait:
                    raise turn_timeout(session_id, float(timeout or 0.0))
        except psycopg.Error as exc:
            conn.close()  # a lock it may have taken goes with the connection
            raise self._pg.unavailable(what, exc, written=False, tail="Nothing was written") from exc
        except BaseException:
            if busy:  # interrupted while asking: whether it holds the lock is unknown
                conn.close()
            else:
                self._keep(conn)  # take_turn answered 0: this connection holds nothing
            raise

    def release(self, lease: PgTurnLease) -> None:
        """Give the lock back; a connection that cannot say so is closed (PostgreSQL
        then releases the lock with the connection)."""
        lease._mark_lost()
        conn = lease.conn
        if conn.closed or conn.broken:
            conn.close()
            return
        try:
            with self._pg.bounded(conn):
                row = conn.execute(self._pg.q("SELECT pg_advisory_unlock({s}.turn_key(%s))"), [lease.session_id])
                released = bool(row.fetchone()[0])  # type: ignore[index]
                if released:  # and nothing else stays with a connection kept for the next turn
                    conn.execute(self._unlock_all)
        except psycopg.Error:
            released = False
        if released:
            self._keep(conn)
        else:
            conn.close()

    def close(self) -> None:
        """Close the idle lock connections."""
        with self._mutex:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _check_layout(self, what: str) -> None:
        if not self._pg.checked:
            self._pg.read("open the store", lambda conn: None)
        if self._pg.layout < LAYOUT:
            raise StoreError(
                f"{what}: PostgreSQL schema {self._pg.schema!r} was created by an older agentkit, without turn "
                f"locks. Call PostgresEventStore.migrate() once to upgrade it in place (safe while other hosts "
                f"use it; nothing stored changes)"
            )

    def _connection(self, what: str, *, fresh: bool = False) -> tuple[psycopg.Connection[Any], bool]:
        """(a lock connection, whether it was idle here before)."""
        with self._mutex:
            if self._pid != os.getpid():  # forked: those are the parent's; never use (or close) them
                self._inherited.extend(self._idle)
                self._idle, self._pid = [], os.getpid()
            if self._idle and not fresh:
                return self._idle.pop(), True
        conninfo, kwargs = self._pg.connect_args()
        try:
            conn = psycopg.connect(conninfo, **{**self._pg.socket_options(), **kwargs})
            try:
                self._pg.configure(conn)
            except BaseException:
                conn.close()
                raise
        except psycopg.Error as exc:
            raise self._pg.unavailable(what, exc, written=False, tail="Nothing was written") from exc
        return conn, False

    def _keep(self, conn: psycopg.Connection[Any]) -> None:
        if conn.closed or conn.broken:
            conn.close()
            return
        with self._mutex:
            if len(self._idle) < _IDLE:
                self._idle.append(conn)
                return
        conn.close()
