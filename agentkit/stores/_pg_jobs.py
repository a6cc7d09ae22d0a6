"""PostgresJobStore: job snapshots in PostgreSQL, compare-and-swap per job (private module;
import it from :mod:`agentkit.stores.postgres`)."""

from __future__ import annotations

from typing import Any

from .._json import dumps, loads
from ..errors import ConfigurationError, StoreConflictError, StoreCorruptionError
from ..jobs._base import JobState, StoredJob
from ._checks import check_revision
from ._pg import DEFAULT_TIMEOUT, Pg, psycopg

__all__ = ["PostgresJobStore"]


class PostgresJobStore:
    """A :class:`~agentkit.jobs.JobStore` in PostgreSQL (the ``jobs`` table of
    ``schema``; :meth:`migrate` creates it, with the event store's tables).

    ``name`` keeps one job runner's jobs apart from another's: an execution context
    opened over a store treats every job recorded as running as left behind by a host
    that died, so give each process that runs jobs (each web-server worker, each host)
    its own name. ``target`` is a connection string or a ``psycopg_pool.ConnectionPool``,
    and ``timeout`` bounds every network wait, as for
    :class:`~agentkit.stores.postgres.PostgresEventStore`.
    """

    def __init__(
        self,
        target: Any,
        *,
        name: str = "default",
        schema: str = "agentkit",
        pool_size: int = 2,
        connect_timeout: float = 10.0,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if not isinstance(name, str) or not name or len(name) > 200:
            raise ConfigurationError(f"name must be a non-empty string of at most 200 characters, got {name!r}")
        self._pg = Pg(
            target,
            schema=schema,
            pool_size=pool_size,
            connect_timeout=connect_timeout,
            timeout=timeout,
            owner="PostgresJobStore",
        )
        self.name = name
        self.schema = schema

    def __repr__(self) -> str:
        return f"PostgresJobStore(name={self.name!r}, schema={self.schema!r})"

    def close(self) -> None:
        """Close the connection pool this store made (a pool you passed stays open)."""
        self._pg.close()

    def migrate(self) -> None:
        """Create the schema, tables and functions when missing (idempotent)."""
        self._pg.migrate()

    def load(self) -> list[StoredJob]:
        """Every job of this store's ``name``, oldest first."""
        rows = self._pg.read(
            "load jobs",
            lambda conn: conn.execute(
                self._pg.q("SELECT state, revision FROM {s}.jobs WHERE name = %s ORDER BY started_at, execution_id"),
                [self.name],
            ).fetchall(),
        )
        try:
            return [StoredJob(state=JobState.from_dict(loads(state)), revision=int(rev)) for state, rev in rows]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StoreCorruptionError(
                f"the jobs table of PostgreSQL schema {self.schema!r} holds a malformed job record "
                f"({type(exc).__name__}: {exc}); remove it"
            ) from None

    def put(self, state: JobState, *, expected_revision: int) -> int:
        """Store ``state`` if the job is at ``expected_revision`` (0 for a new job), in one
        statement; returns the new revision or raises StoreConflictError."""
        expected = check_revision(expected_revision)
        if not isinstance(state, JobState):
            raise ConfigurationError(f"put takes a JobState, not {type(state).__name__}")
        body = dumps(state.to_dict(), ensure_ascii=True)
        if expected == 0:
            query = self._pg.q(
                "INSERT INTO {s}.jobs (name, execution_id, revision, started_at, state) VALUES (%s, %s, 1, %s, %s) "
                "ON CONFLICT (name, execution_id) DO NOTHING RETURNING revision"
            )
            args: list[Any] = [self.name, state.execution_id, state.started_at, body]
        else:
            query = self._pg.q(
                "UPDATE {s}.jobs SET revision = revision + 1, state = %s, started_at = %s "
                "WHERE name = %s AND execution_id = %s AND revision = %s RETURNING revision"
            )
            args = [body, state.started_at, self.name, state.execution_id, expected]
        try:
            with self._pg.connection() as conn:
                row = conn.execute(query, args).fetchone()
                if row is None:
                    cur = conn.execute(
                        self._pg.q("SELECT revision FROM {s}.jobs WHERE name = %s AND execution_id = %s"),
                        [self.name, state.execution_id],
                    ).fetchone()
        except psycopg.OperationalError as exc:
            raise self._pg.unavailable(
                f"cannot store job {state.execution_id!r}",
                exc,
                written=None,
                tail="Whether it was stored is unknown: load() shows the job's revision once the server is back",
            ) from exc
        if row is not None:
            return int(row[0])
        actual = int(cur[0]) if cur else 0
        raise StoreConflictError(
            f"job {state.execution_id!r} is at revision {actual}, not {expected}: another writer "
            f"changed it; reload the store before writing",
            expected_revision=expected,
            actual_revision=actual,
        )

    def delete(self, execution_id: str) -> None:
        """Forget a job (unknown ids are ignored)."""
        self._pg.read(
            f"delete job {execution_id!r}",
            lambda conn: conn.execute(
                self._pg.q("DELETE FROM {s}.jobs WHERE name = %s AND execution_id = %s"), [self.name, execution_id]
            ),
        )
