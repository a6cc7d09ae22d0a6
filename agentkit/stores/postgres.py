"""PostgreSQL stores: the same sessions from several hosts (psycopg 3, ``sync-agentkit[postgres]``).

:class:`PostgresEventStore` implements the :class:`~agentkit.stores.base.EventStore` port
with the file store's guarantees: an append is one compare-and-swap statement (one round
trip, committed when it returns), a stale writer gets StoreConflictError and nothing is
written, loading reads only the active log, and ``watch`` hears another host's commits
through LISTEN/NOTIFY, which PostgreSQL delivers only once they are committed.
:class:`PostgresJobStore` keeps job snapshots. Create the tables once with ``migrate()``;
docs/durability.md ("Several hosts") shows the SQL and deployment advice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..cancel import CancelToken
from ..errors import (
    ConfigurationError,
    StoreError,
    TurnLockLostError,
)
from ..events import Event
from ._checks import archive_conflict, check_count, check_events, check_revision, compact_too_far, conflict
from ._pg import DEFAULT_TIMEOUT, Pg, psycopg
from ._pg import schema_sql as _schema_sql
from ._pg_codec import decode_archive, decode_bodies, encode_bodies
from ._pg_fork import copy_prefix
from ._pg_jobs import PostgresJobStore
from ._pg_turns import PgTurnLease, TurnLocks
from ._pg_watch import check_watch, follow_session, notes
from .base import StoredSession, TurnLease, validate_session_id

__all__ = ["PostgresEventStore", "PostgresJobStore"]

_DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024  # the largest event (as JSON) taken by default


class PostgresEventStore:
    """Session event logs in PostgreSQL, shared by every host that connects to it.

    ``target`` is a libpq connection string (the store then owns a pool of up to
    ``pool_size`` connections; :meth:`close` closes it) or a ``psycopg_pool.ConnectionPool``
    you manage. ``schema`` names the PostgreSQL schema holding the tables (one schema per
    application). Call :meth:`migrate` once to create them. An event whose JSON is larger
    than ``max_event_bytes`` is refused before anything is written.

    ``timeout`` (seconds, default 30) bounds every network wait: a statement (the server
    ends it after 0.8 x timeout; the client cuts the connection at 1 x, so a frozen
    server cannot block a call), a socket read, a connect (``connect_timeout`` bounds
    connecting and waiting for a pooled connection, at most ``timeout``). Every wait so
    ended raises :class:`~agentkit.errors.StoreUnavailableError`; an append ends within
    3 x timeout, a read within about one timeout.

    A lost connection during an append is never a silent duplicate or loss: the store
    terminates the lost connection's server process, confirms it is gone (so the
    statement cannot commit later), asks the table whether the events arrived (by their
    ids) and, when they did not, retries once. ``written=False`` means exactly that:
    provably not written, now or later. When that cannot be established it raises
    StoreUnavailableError with ``written=None``.
    """

    def __init__(
        self,
        target: Any,
        *,
        schema: str = "agentkit",
        pool_size: int = 4,
        connect_timeout: float = 10.0,
        max_event_bytes: int = _DEFAULT_MAX_EVENT_BYTES,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if not isinstance(max_event_bytes, int) or isinstance(max_event_bytes, bool) or max_event_bytes < 1:
            raise ConfigurationError(f"max_event_bytes must be an int >= 1, got {max_event_bytes!r}")
        self._pg = Pg(
            target,
            schema=schema,
            pool_size=pool_size,
            connect_timeout=connect_timeout,
            timeout=timeout,
            owner="PostgresEventStore",
        )
        self._turns = TurnLocks(self._pg)
        self._closing = CancelToken()  # ends the watches
        self.schema = schema
        """The PostgreSQL schema holding this store's tables."""
        self.max_event_bytes = max_event_bytes

    def __repr__(self) -> str:
        return f"PostgresEventStore(schema={self.schema!r})"

    def __enter__(self) -> PostgresEventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool this store made (a pool you passed stays open) and
        the idle turn-lock connections; watches end (within their ``poll_interval``)."""
        self._closing.cancel("the store was closed")
        self._turns.close()
        self._pg.close()

    def migrate(self) -> None:
        """Create the schema, tables and functions when missing; safe to call again and
        from several hosts at once (docs/durability.md shows the SQL)."""
        self._pg.migrate()

    def check_writable(self, session_id: str) -> None:
        """Raise :class:`~agentkit.errors.StoreError` when the store cannot be used now (the
        server is unreachable, the schema was not migrated or is newer than this agentkit).
        ``Session.open`` and ``Session(store=...)`` call it, so such a store is refused when
        the session is opened rather than at its first push."""
        validate_session_id(session_id)
        self._pg.read("open the store", lambda conn: None)

    @staticmethod
    def schema_sql(schema: str = "agentkit") -> str:
        """The SQL :meth:`migrate` runs for ``schema`` (for a DBA who creates the tables
        by hand; the store's database user then needs only to read and write them)."""
        return _schema_sql(schema)

    def _bodies(self, events: Sequence[Event]) -> tuple[list[str], list[str]]:
        return encode_bodies(events, self.max_event_bytes)

    def _decode(self, session_id: str, bodies: Sequence[str]) -> tuple[Event, ...]:
        return decode_bodies(self.schema, session_id, bodies)

    # -- reading -----------------------------------------------------------------------

    def load(self, session_id: str) -> StoredSession | None:
        """The stored session (its active log), or None; one consistent read."""
        validate_session_id(session_id)
        rows = self._pg.read(
            f"load session {session_id!r}",
            lambda conn: conn.execute(
                self._pg.q(
                    "SELECT s.revision, e.body FROM {s}.sessions s LEFT JOIN {s}.events e "
                    "ON e.session_id = s.session_id WHERE s.session_id = %s ORDER BY e.position"
                ),
                [session_id],
            ).fetchall(),
        )
        if not rows:
            return None
        events = self._decode(session_id, [body for _rev, body in rows if body is not None])
        return StoredSession(session_id=session_id, events=events, revision=int(rows[0][0]))

    def head(self, session_id: str) -> int | None:
        """The session's current revision, or None when it does not exist: one indexed
        read of its row (no events are read), seeing every commit any host made before."""
        validate_session_id(session_id)
        row = self._pg.read(
            f"read the revision of session {session_id!r}",
            lambda conn: conn.execute(
                self._pg.q("SELECT revision FROM {s}.sessions WHERE session_id = %s"), [session_id]
            ).fetchone(),
        )
        return None if row is None else int(row[0])

    def load_after(self, session_id: str, revision: int) -> tuple[int, tuple[Event, ...]] | None:
        """``(current revision, events that arrived after revision)``, or None when the
        session does not exist. Reads only those events. After a compaction past
        ``revision`` the events include its summary (and the kept events that arrived
        after ``revision``): use :meth:`load` to rebuild a view in that case."""
        validate_session_id(session_id)
        check_revision(revision)
        rows = self._pg.read(
            f"load session {session_id!r}",
            lambda conn: conn.execute(
                self._pg.q(
                    "SELECT s.revision, e.body FROM {s}.sessions s LEFT JOIN {s}.events e "
                    "ON e.session_id = s.session_id AND e.rev > %s WHERE s.session_id = %s ORDER BY e.position"
                ),
                [revision, session_id],
            ).fetchall(),
        )
        if not rows:
            return None
        return int(rows[0][0]), self._decode(session_id, [body for _rev, body in rows if body is not None])

    def load_archive(self, session_id: str, archive_id: str) -> tuple[Event, ...] | None:
        """The events archived under ``archive_id``, or None."""
        validate_session_id(session_id)
        validate_session_id(archive_id)
        row = self._pg.read(
            f"load archive {archive_id!r} of session {session_id!r}",
            lambda conn: conn.execute(
                self._pg.q("SELECT body FROM {s}.archives WHERE session_id = %s AND archive_id = %s"),
                [session_id, archive_id],
            ).fetchone(),
        )
        return None if row is None else decode_archive(self.schema, session_id, archive_id, row[0])

    def list_sessions(self) -> list[str]:
        """Ids of all stored sessions, sorted."""
        rows = self._pg.read(
            "list sessions", lambda conn: conn.execute(self._pg.q("SELECT session_id FROM {s}.sessions")).fetchall()
        )
        return sorted(r[0] for r in rows)

    # -- writing -----------------------------------------------------------------------

    def append(
        self, session_id: str, events: Sequence[Event], *, expected_revision: int, lease: TurnLease | None = None
    ) -> int:
        """Compare-and-swap append: one statement, committed when it returns. Returns the
        new revision; StoreConflictError (nothing written) when ``expected_revision`` is stale.

        With ``lease`` (what :meth:`turn_lock` yielded) the same statement checks that the
        lease is still the session's current grant and its lock connection still holds
        the lock, else raises :class:`~agentkit.errors.TurnLockLostError` and writes
        nothing. The call ends within 3 x ``timeout``: committed, refused, or
        StoreUnavailableError (``written=False`` only when the append provably cannot
        commit later; ``None`` when that is unknown)."""
        validate_session_id(session_id)
        expected = check_revision(expected_revision)
        ids, bodies = self._bodies(check_events(events))
        params: list[Any] = [session_id, expected, ids, bodies]
        if lease is None:
            query = self._pg.q("SELECT {s}.append_events(%s, %s, %s, %s)")
        else:
            held = self._held(session_id, lease)
            query = self._pg.q("SELECT {s}.append_leased(%s, %s, %s, %s, %s, %s)")
            params += [held.epoch, held.pid]
        what = f"cannot append to session {session_id!r}"
        deadline = time.monotonic() + 3 * self._pg.timeout
        for attempt in (1, 2):
            used: Any = None
            pid = 0
            try:
                with self._pg.connection(deadline - time.monotonic()) as conn:
                    used, pid = conn, conn.info.backend_pid  # (libpq forgets the pid once the connection fails)
                    row = conn.execute(query, params).fetchone()
                break
            except psycopg.Error as exc:
                if getattr(exc, "sqlstate", None) == "AK003" and lease is not None:
                    raise self._lost(lease) from None
                if not isinstance(exc, psycopg.OperationalError):
                    raise StoreError(f"{what}: {type(exc).__name__}: {exc}") from exc
                if used is None:  # no connection: nothing was sent
                    done = "Nothing was sent"
                elif self._written(session_id, ids, exc, what="append to", conn=used, pid=pid, deadline=deadline):
                    return expected + len(ids)
                elif attempt == 1 and time.monotonic() < deadline:
                    continue  # checked: nothing arrived, nor can it; compare-and-swap makes one more try safe
                else:
                    done = "Checked: nothing was written, nor can the failed statement commit later"
                raise self._pg.unavailable(
                    what, exc, written=False, tail=f"{done}; the session stays at revision {expected}. Retry later"
                ) from exc
        assert row is not None
        result = int(row[0])
        if result < 0:
            raise conflict(session_id, expected, -result - 1)
        return result

    def _held(self, session_id: str, lease: object) -> PgTurnLease:
        """``lease`` as this store's lease of ``session_id``, or an error before anything is sent."""
        if not isinstance(lease, PgTurnLease) or lease.owner.schema != self.schema:
            raise ConfigurationError(
                f"lease must be the TurnLease this store's turn_lock({session_id!r}) yielded, "
                f"not {lease!r}: nothing was written"
            )
        if lease.session_id != session_id:
            raise ConfigurationError(
                f"the lease is for session {lease.session_id!r}, not {session_id!r}: nothing was written"
            )
        if not lease.held:
            raise self._lost(lease)
        return lease

    def _lost(self, lease: TurnLease) -> TurnLockLostError:
        lease._mark_lost()
        return TurnLockLostError(
            f"session {lease.session_id!r}: this turn's lock (epoch {lease.epoch}) is no longer held (its lock "
            f"connection was lost, or another process was granted the lock since). Nothing was written. Another "
            f"process may be running this conversation's turn: stop this one, refresh the session and start again"
        )

    @contextmanager
    def turn_lock(
        self, session_id: str, *, timeout: float | None = None, cancel: CancelToken | None = None
    ) -> Iterator[TurnLease]:
        """Hold session ``session_id``'s turn lock for the block: one turn of the
        conversation at a time across threads, processes and hosts. It is a PostgreSQL
        advisory lock held on a connection of its own (not one of the pool's), released
        when the block ends, when this process dies, or when the server loses that
        connection. Each grant takes the session's next epoch; pass the lease to
        :meth:`append` (``lease=``) to have an append refused when the lock was lost
        meanwhile. Waits at most ``timeout`` seconds (None: no bound), then raises
        :class:`~agentkit.errors.StoreUnavailableError`; ``cancel`` ends the wait within
        0.1 s with :class:`~agentkit.errors.CancelledError`."""
        validate_session_id(session_id)
        lease = self._turns.acquire(session_id, timeout, cancel)
        try:
            yield lease
        finally:
            self._turns.release(lease)

    def _arrived(self, session_id: str, ids: list[str], limit: float | None = None) -> bool:
        """True when the events with ``ids`` are in the active log or an archive."""
        with self._pg.connection(limit) as conn:
            row = conn.execute(
                self._pg.q(
                    "SELECT (SELECT count(*) FROM {s}.events WHERE session_id = %s AND event_id = ANY(%s)),"
                    " EXISTS (SELECT 1 FROM {s}.archives WHERE session_id = %s AND event_ids && %s)"
                ),
                [session_id, ids, session_id, ids],
            ).fetchone()
        assert row is not None
        return bool(row[0]) or bool(row[1])

    def _written(
        self,
        session_id: str,
        ids: list[str],
        exc: BaseException,
        *,
        what: str,
        conn: Any,
        pid: int,
        deadline: float,
    ) -> bool:
        """After a write on ``conn`` (server process ``pid``) failed: can its events (``ids``) be in the log, now or
        later? An error the server reported on a live connection aborted the statement:
        False. A lost connection's backend may still run it: it is terminated and
        confirmed gone (so the statement committed or aborted for good), then the table
        is asked whether the events arrived (in the active log or, compacted since, an
        archive). Raises StoreUnavailableError(written=None) when that cannot be known
        before ``deadline``, or when there were no ids to look for."""
        if not conn.broken and getattr(exc, "sqlstate", None):
            return False  # the server answered with an error: the statement rolled back
        tail = (
            f"Whether the write committed is unknown. Once the server is back, reload the session "
            f"(Session.refresh()) before writing again: the events {ids[:3]}{'...' if len(ids) > 3 else ''} "
            f"are either all there or none"
        )
        unknown = self._pg.unavailable(f"cannot {what} session {session_id!r}", exc, written=None, tail=tail)
        if not ids or not self._pg.gone(pid, deadline - time.monotonic()):
            raise unknown from exc
        try:
            return self._arrived(session_id, ids, deadline - time.monotonic())
        except psycopg.OperationalError:
            raise unknown from exc

    def archive(self, session_id: str, archive_id: str, events: Sequence[Event]) -> None:
        """Keep ``events`` under ``archive_id`` (the active log is unchanged). The same
        event ids again is a no-op; different events under a used id are refused."""
        validate_session_id(session_id)
        validate_session_id(archive_id)
        ids, bodies = self._bodies(check_events(events))
        query = self._pg.q("SELECT {s}.archive_events(%s, %s, %s, %s)")
        # idempotent by design: a retry after a lost connection is safe
        self._write(
            f"archive events of session {session_id!r}",
            lambda conn: conn.execute(query, [session_id, archive_id, ids, "[" + ",".join(bodies) + "]"]),
            session_id,
            archive_id,
        )

    def compact(
        self,
        session_id: str,
        archive_id: str,
        *,
        expected_revision: int,
        remove: int,
        summary: Sequence[Event] = (),
    ) -> int:
        """Move the first ``remove`` events of the active log into archive ``archive_id``
        and put ``summary`` in their place, in one transaction; compare-and-swap like
        :meth:`append`. Returns ``expected_revision + 1``."""
        validate_session_id(session_id)
        validate_session_id(archive_id)
        expected = check_revision(expected_revision)
        count = check_count(remove)
        ids, bodies = self._bodies(check_events(summary))
        query = self._pg.q("SELECT {s}.compact_events(%s, %s, %s, %s, %s, %s)")
        try:
            row = self._write(
                f"compact session {session_id!r}",
                lambda conn: conn.execute(query, [session_id, archive_id, expected, count, ids, bodies]).fetchone(),
                session_id,
                archive_id,
                retry=False,
            )
        except _TooFew as exc:
            raise compact_too_far(session_id, count, exc.active) from None
        assert row is not None
        result = int(row[0])
        if result < 0:
            raise conflict(session_id, expected, -result - 1)
        return result

    def _write(
        self, what: str, fn: Any, session_id: str, archive_id: str, *, retry: bool = True
    ) -> Any:
        for attempt in (1, 2):
            try:
                with self._pg.connection() as conn:
                    return fn(conn)
            except psycopg.Error as exc:
                code = getattr(exc, "sqlstate", None)
                if code == "AK001":
                    raise archive_conflict(session_id, archive_id) from None
                if code == "AK002":
                    diag = getattr(exc, "diag", None)
                    raise _TooFew(int(getattr(diag, "message_detail", None) or 0)) from None
                if not isinstance(exc, psycopg.OperationalError):
                    raise StoreError(f"cannot {what}: {type(exc).__name__}: {exc}") from exc
                if attempt == 2 or not retry:
                    tail = (
                        "Whether it committed is unknown: once the server is back, load the session "
                        "and repeat the call if it did not (a compaction is all or nothing)"
                        if not retry
                        else "Whether it committed is unknown; the call is idempotent: repeat it when the server is up"
                    )
                    raise self._pg.unavailable(f"cannot {what}", exc, written=None, tail=tail) from exc
                self._pg.recheck()
        raise AssertionError("unreachable")  # pragma: no cover

    def delete(self, session_id: str) -> bool:
        """Remove a session and its archives, in one transaction; True when something was
        removed. Watchers of the session stop."""
        validate_session_id(session_id)
        query = self._pg.q("SELECT {s}.delete_session(%s)")
        row = self._write(
            f"delete session {session_id!r}",
            lambda conn: conn.execute(query, [session_id]).fetchone(),
            session_id,
            "",
        )
        return bool(row and row[0])

    copy_prefix = copy_prefix  # a new session from a prefix of one, copied inside the server (Session.fork)

    # -- following other hosts -----------------------------------------------------------

    def watch(
        self,
        session_id: str,
        after_revision: int = 0,
        cancel: CancelToken | None = None,
        *,
        poll_interval: float = 0.5,
    ) -> Iterator[Event]:
        """Yield the events committed to ``session_id`` after ``after_revision``, as they
        arrive from any host, until ``cancel`` is cancelled, the session is deleted, or the
        caller stops iterating (or the store is closed). With ``after_revision=0`` it also waits for the session to
        be created; with a higher one, a session that does not exist ends the watch.

        It LISTENs on its own connection (not one of the pool's) and reads what arrived
        when PostgreSQL notifies it of a commit: a notification is sent only once the
        commit is durable, so nothing is yielded that could still be lost. A lost
        connection is re-opened and reading resumes from the last revision seen, so no
        event is missed or repeated. A commit is yielded as soon as PostgreSQL delivers
        its notification (milliseconds after the commit, whatever ``poll_interval``);
        ``cancel`` is checked every ``poll_interval`` seconds. A typical follower:
        ``for _ in store.watch(sid, session.revision, token): session.refresh()``. For
        many sessions on one connection, see :meth:`watch_all`. End a watch with ``cancel`` or by closing the
        iterator: one left suspended keeps a listening connection open on the server."""
        validate_session_id(session_id)
        last = check_revision(after_revision)
        check_watch(cancel, poll_interval)
        heard = notes(self._pg, self._closing, cancel, poll_interval)
        yield from follow_session(heard, self.load_after, session_id, last, cancel, poll_interval, self._closing)

    def watch_all(
        self, cancel: CancelToken | None = None, *, poll_interval: float = 0.5
    ) -> Iterator[tuple[str, int | None]]:
        """Yield ``(session_id, revision)`` for every commit to any session of this
        schema, by any host, as PostgreSQL announces it (``revision`` None: the session
        was deleted), on one listening connection of its own, until ``cancel`` is
        cancelled, the store is closed or the caller stops iterating. One watch serves a follower of many
        sessions: refresh the sessions it names that you follow.

        It first yields ``("*", None)`` once it is listening, and again whenever it had
        to re-open a lost connection: announcements may have been missed before that
        point, so compare every followed session with :meth:`head` (or refresh it).
        A commit is announced only once it is durable, within milliseconds of it;
        ``cancel`` is checked every ``poll_interval`` seconds."""
        check_watch(cancel, poll_interval)
        for note in notes(self._pg, self._closing, cancel, poll_interval):
            if note is None:
                yield "*", None
                continue
            session_id, _, revision = note.rpartition(" ")
            yield session_id, None if revision == "deleted" else int(revision)


class _TooFew(Exception):
    """compact_events found fewer active events than asked to remove (internal)."""

    def __init__(self, active: int) -> None:
        super().__init__(active)
        self.active = active
