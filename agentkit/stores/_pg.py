"""What the PostgreSQL stores share (private): the connection pool, the migration and the
schema-version check, and readable errors for a lost server (the schema SQL is
``_pg_schema``'s; re-exported here)."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from .._threads import CallTimeout, run_and_wait
from ..errors import ConfigurationError, MissingDependencyError, SchemaVersionError, StoreError, StoreUnavailableError
from ._pg_schema import LAYOUT, SCHEMA_SQL, channel_name, check_schema_name, schema_sql
from .base import SCHEMA_VERSION

try:
    import psycopg
    from psycopg import sql
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as _exc:  # tests/test_models_registry.py: a missing extra is named
    raise MissingDependencyError(
        _exc.name or "psycopg", "postgres", "agentkit.stores.postgres (the PostgreSQL stores)"
    ) from _exc

from ._pg_wait import WATCHDOG  # noqa: E402 - it needs psycopg: after the check that names the extra

__all__ = [
    "DEFAULT_TIMEOUT",
    "LAYOUT",
    "SCHEMA_SQL",
    "NoAnswer",
    "Pg",
    "PoolTimeout",
    "channel_name",
    "check_schema_name",
    "psycopg",
    "schema_sql",
]

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0
"""Seconds any one network wait of a PostgreSQL store may take, by default."""

_FORK_LOCK = threading.Lock()

class NoAnswer(psycopg.OperationalError):
    """The server did not answer within the store's timeout: the connection was cut."""


class Pg:
    """A connection pool (given, or made from a conninfo string) plus the schema it uses."""

    def __init__(
        self,
        target: object,
        *,
        schema: str,
        pool_size: int,
        connect_timeout: float,
        owner: str,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        check_schema_name(schema)
        if not isinstance(pool_size, int) or isinstance(pool_size, bool) or pool_size < 1:
            raise ConfigurationError(f"pool_size must be an int >= 1, got {pool_size!r}")
        for name, value in (("connect_timeout", connect_timeout), ("timeout", timeout)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < float("inf"):
                raise ConfigurationError(f"{name} must be a positive number of seconds, got {value!r}")
        self.schema = schema
        self.ident = sql.Identifier(schema)
        self.owner = owner
        self.timeout = float(timeout)
        """Seconds any one network wait may take (a statement, a socket read)."""
        self.connect_timeout = min(float(connect_timeout), self.timeout)
        """Seconds an operation waits for a connection."""
        self.checked = False
        self.layout = 0  # the schema's table layout version, read on first use
        self._pid = os.getpid()
        self._inherited: list[ConnectionPool] = []  # a forked child's copies, kept from closing
        if isinstance(target, ConnectionPool):
            self._pool = target
            self.own_pool = False
        elif isinstance(target, str):
            self._conninfo, self._pool_size = target, pool_size
            self._pool = self._new_pool()
            self.own_pool = True
        else:
            raise ConfigurationError(
                f"{owner} takes a libpq connection string (e.g. 'postgresql://user@host/db') or a "
                f"psycopg_pool.ConnectionPool, not {type(target).__name__}"
            )

    def _new_pool(self) -> ConnectionPool:
        pool = ConnectionPool(
            self._conninfo,
            min_size=1,
            max_size=self._pool_size,
            kwargs={"autocommit": True, **self.socket_options()},
            configure=self.configure,
            timeout=self.connect_timeout,
            open=True,
            name=f"agentkit-{self.schema}",
        )
        pool.check_connection = self._check_connection  # type: ignore[method-assign]
        return pool

    @property
    def pool(self) -> ConnectionPool:
        """The connection pool. A store made in a process that then forked (a Celery
        prefork or gunicorn ``--preload`` worker) gets a pool of its own in the child on
        first use: the parent's connections and pool threads are never used there, nor
        closed (closing would end the parent's connections)."""
        if self._pid != os.getpid() and self.own_pool:
            with _FORK_LOCK:
                if self._pid != os.getpid():
                    self._inherited.append(self._pool)
                    self._pool = self._new_pool()
                    self._pid = os.getpid()
        return self._pool

    def socket_options(self) -> dict[str, Any]:
        """libpq options bounding waits on a connection of ours: the connect, unanswered
        data (tcp_user_timeout) and a silent peer (keepalives)."""
        probe = max(1, int(self.timeout / 3))
        return {
            "connect_timeout": max(2, math.ceil(self.connect_timeout)),  # libpq's floor is 2 s
            "keepalives": 1,
            "keepalives_idle": probe,
            "keepalives_interval": probe,
            "keepalives_count": 3,
            "tcp_user_timeout": int(self.timeout * 1000),
        }

    def configure(self, conn: psycopg.Connection[Any]) -> None:
        """Server-side bounds for a new connection of ours: a statement or a lock wait
        ends after 0.8 x timeout (before the client gives up, so the server reports it
        and the statement provably did not commit), and the server notices a vanished
        client within about one timeout (so it releases that client's turn locks)."""
        ms = max(1, int(self.timeout * 800))
        probe = max(1, int(self.timeout / 3))
        settings = {
            "statement_timeout": f"{ms}ms",
            "lock_timeout": f"{ms}ms",
            "tcp_keepalives_idle": str(probe),
            "tcp_keepalives_interval": str(probe),
            "tcp_keepalives_count": "3",
        }
        if conn.info.server_version >= 140000:
            settings["client_connection_check_interval"] = f"{probe * 1000}ms"
        query = "SELECT " + ", ".join("set_config(%s, %s, false)" for _ in settings)
        params = [x for kv in settings.items() for x in kv]
        entry = WATCHDOG.arm(conn, self.timeout)
        try:
            conn.execute(query, params)
        finally:
            WATCHDOG.disarm(entry)
        if not conn.autocommit:
            conn.commit()

    def connect_args(self) -> tuple[str, dict[str, Any]]:
        """conninfo and keyword arguments for a connection of its own (LISTEN)."""
        conninfo = self.pool.conninfo() if callable(self.pool.conninfo) else self.pool.conninfo
        kwargs = self.pool.kwargs() if callable(self.pool.kwargs) else self.pool.kwargs
        return conninfo, {**(kwargs or {}), "autocommit": True}

    def q(self, text: str) -> sql.Composed:
        """``text`` with ``{s}`` replaced by the quoted schema name."""
        return sql.SQL(text).format(s=self.ident)

    @contextmanager
    def connection(self, limit: float | None = None) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection; the schema version is checked on first use. The wait for
        it and the block's work on it each take at most ``limit`` (default: the timeout)
        seconds: then its socket is cut and the block ends in :class:`NoAnswer`."""
        seconds = self.timeout if limit is None else max(0.001, min(limit, self.timeout))
        deadline = time.monotonic() + seconds
        with self.pool.connection(timeout=min(seconds, self.connect_timeout)) as conn:
            with self.bounded(conn, max(0.001, deadline - time.monotonic())):
                if not self.checked:
                    self._check_version(conn)
                yield conn
                if not conn.autocommit:
                    conn.commit()

    @contextmanager
    def bounded(self, conn: psycopg.Connection[Any], seconds: float | None = None) -> Iterator[None]:
        """Cut ``conn`` when the block takes more than ``seconds`` (default: the timeout);
        a wait cut so ends in :class:`NoAnswer`."""
        seconds = self.timeout if seconds is None else seconds
        entry = WATCHDOG.arm(conn, seconds)
        try:
            yield
        except psycopg.OperationalError as exc:
            if entry.fired and not isinstance(exc, NoAnswer):
                raise NoAnswer(f"no answer in time (the store's timeout is {self.timeout:g} s)") from exc
            raise
        finally:
            WATCHDOG.disarm(entry)

    def _check_version(self, conn: psycopg.Connection[Any]) -> None:
        try:
            rows = conn.execute(
                self.q("SELECT key, value FROM {s}.meta WHERE key IN ('schema_version', 'layout')")
            ).fetchall()
        except psycopg.errors.UndefinedTable:
            if not conn.autocommit:
                conn.rollback()
            raise StoreError(
                f"PostgreSQL schema {self.schema!r} has no agentkit tables: call {self.owner}.migrate() once "
                f"(or run the SQL in docs/durability.md) before using the store"
            ) from None
        if not conn.autocommit:
            conn.commit()
        found = dict(rows)
        version = int(found.get("schema_version", 0))
        self.layout = int(found.get("layout", 1))
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"PostgreSQL schema {self.schema!r} has schema version {version}, but this agentkit reads "
                f"schema versions up to {SCHEMA_VERSION}: upgrade agentkit (nothing was changed)"
            )
        self.checked = True

    def migrate(self) -> None:
        """Create the schema, tables and functions when missing (idempotent)."""
        text = schema_sql(self.schema)
        with self.pool.connection(timeout=self.timeout) as conn:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ["agentkit-migrate-" + self.schema])
                row = None
                exists = conn.execute(
                    "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = 'meta'",
                    [self.schema],
                ).fetchone()
                if exists:
                    row = conn.execute(self.q("SELECT value FROM {s}.meta WHERE key = 'schema_version'")).fetchone()
                if row and int(row[0]) > SCHEMA_VERSION:
                    raise SchemaVersionError(
                        f"PostgreSQL schema {self.schema!r} has schema version {row[0]}, newer than this "
                        f"agentkit's {SCHEMA_VERSION}: upgrade agentkit (nothing was changed)"
                    )
                conn.execute(text.encode())
        self.checked = True
        self.layout = LAYOUT

    def read(self, what: str, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run a read-only ``fn``; after a lost connection (a restarted server, a stale
        pooled connection) once more on a checked pool, then StoreUnavailableError. The
        whole read takes at most about one timeout."""
        deadline = time.monotonic() + self.timeout
        for attempt in (1, 2):
            try:
                with self.connection(deadline - time.monotonic()) as conn:
                    return fn(conn)
            except psycopg.OperationalError as exc:
                if attempt == 2 or isinstance(exc, (PoolTimeout, NoAnswer)) or time.monotonic() >= deadline:
                    raise self.unavailable(f"cannot {what}", exc, written=None) from exc
                self.recheck(deadline - time.monotonic())
        raise AssertionError("unreachable")  # pragma: no cover

    def gone(self, pid: int, limit: float) -> bool:
        """Terminate backend ``pid`` (a connection of ours that was lost while it may
        still run a statement) from a fresh connection and wait until it is gone: True
        once PostgreSQL confirms no such backend runs, so whatever it ran has committed or
        aborted for good; False when that cannot be confirmed within ``limit`` seconds."""
        if pid <= 0:
            return False  # not known
        deadline = time.monotonic() + limit
        self.recheck(limit / 2)
        try:
            with self.connection(deadline - time.monotonic()) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = %s AND usename = current_user",
                    [pid],
                )
                while True:
                    if conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone() is None:
                        return True
                    if time.monotonic() + 0.02 >= deadline:
                        return False
                    time.sleep(0.02)
        except psycopg.Error:
            return False

    def recheck(self, limit: float | None = None) -> None:
        """Drop broken idle connections (after a server restart), waiting at most
        ``limit`` (default: the timeout) seconds: a frozen server cannot hold it up."""
        try:
            run_and_wait(self._check_pool, name="agentkit-pg-check",
                         timeout=self.timeout if limit is None else max(0.0, min(limit, self.timeout)))
        except CallTimeout:
            pass  # a frozen server: the check runs on, on its own thread

    def _check_pool(self) -> None:
        try:
            self.pool.check()
        except psycopg.Error:
            pass  # dead connections are replaced on the next use; the caller reports its own error

    def _check_connection(self, conn: psycopg.Connection[Any]) -> None:
        """The pool's check of one idle connection, bounded by the timeout."""
        with self.bounded(conn):
            ConnectionPool.check_connection(conn)

    def unavailable(self, what: str, exc: BaseException, *, written: bool | None, tail: str = "") -> StoreError:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        text = f"{what}: PostgreSQL could not be reached ({type(exc).__name__}: {reason})"
        return StoreUnavailableError(text + (f". {tail}" if tail else ""), written=written)

    def close(self) -> None:
        """Close the pool when this object made it (in a forked child that never used
        it, the pool is the parent's: nothing of this process's to close)."""
        if self.own_pool and self._pid == os.getpid():
            self._pool.close()
