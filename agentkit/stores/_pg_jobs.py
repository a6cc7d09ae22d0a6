"""PostgresJobStore: job snapshots in PostgreSQL, compare-and-swap per job (private module;
import it from :mod:`agentkit.stores.postgres`)."""

from __future__ import annotations

from typing import Any

from .._json import dumps, loads
from ..errors import ConfigurationError, StoreConflictError, StoreCorruptionError
from ..jobs._base import JobState, StoredJob
from ._checks import check_revision
from ._pg import DEFAULT_TIMEOUT, NoAnswer, Pg, PoolTimeout, psycopg

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
        return [StoredJob(state=self._state(body), revision=rev) for body, rev in self._records()]

    def get(self, execution_id: str) -> StoredJob | None:
        """One job of this store's ``name`` and its revision (None when unknown), in one
        indexed read."""
        found = self._get_record(execution_id)
        if found is None:
            return None
        body, revision = found
        return StoredJob(state=self._state(body), revision=revision)

    def _state(self, body: dict[str, Any]) -> JobState:
        try:
            return JobState.from_dict(body)
        except (KeyError, TypeError, ValueError, AttributeError, ConfigurationError) as exc:
            raise StoreCorruptionError(
                f"the jobs table of PostgreSQL schema {self.schema!r} holds a malformed job record "
                f"({type(exc).__name__}: {exc}); remove it"
            ) from None

    def put(self, state: JobState, *, expected_revision: int) -> int:
        """Store ``state`` if the job is at ``expected_revision`` (0 for a new job), in one
        statement; returns the new revision or raises StoreConflictError."""
        if not isinstance(state, JobState):
            raise ConfigurationError(f"put takes a JobState, not {type(state).__name__}")
        return self._put_record(state.execution_id, state.started_at, state.to_dict(), expected_revision)

    # -- whole records (agentkit.celery keeps its own fields beside the JobState's) -------

    def _get_record(self, execution_id: str) -> tuple[dict[str, Any], int] | None:
        """(the stored JSON object, its revision) of one job, or None."""
        row = self._pg.read(
            f"load job {execution_id!r}",
            lambda conn: conn.execute(
                self._pg.q("SELECT state, revision FROM {s}.jobs WHERE name = %s AND execution_id = %s"),
                [self.name, execution_id],
            ).fetchone(),
        )
        if row is None:
            return None
        try:
            body = loads(row[0])
        except ValueError as exc:
            raise StoreCorruptionError(
                f"the jobs table of PostgreSQL schema {self.schema!r} holds a job record for "
                f"{execution_id!r} that is not JSON ({exc}); remove it"
            ) from None
        if not isinstance(body, dict):
            raise StoreCorruptionError(
                f"the jobs table of PostgreSQL schema {self.schema!r} holds a job record for "
                f"{execution_id!r} that is not a JSON object; remove it"
            )
        return body, int(row[1])

    def _records(self, *, running_only: bool = False, **celery: str) -> list[tuple[dict[str, Any], int]]:
        """Every stored JSON object of this store's ``name`` and its revision, oldest
        first; ``running_only`` keeps the running ones, and ``celery`` fields (such as
        ``session_id=...``) keep those whose ``celery`` object has these values."""
        where, args = "name = %s", [self.name]
        if running_only:
            where += " AND state::jsonb ->> 'state' = 'running'"
        for key, value in sorted(celery.items()):
            where += " AND state::jsonb -> 'celery' ->> %s = %s"
            args += [key, value]
        query = self._pg.q(f"SELECT state, revision FROM {{s}}.jobs WHERE {where} ORDER BY started_at, execution_id")
        rows = self._pg.read("load jobs", lambda conn: conn.execute(query, args).fetchall())
        try:
            return [(loads(state), int(rev)) for state, rev in rows]
        except ValueError as exc:
            raise StoreCorruptionError(
                f"the jobs table of PostgreSQL schema {self.schema!r} holds a job record that is not "
                f"JSON ({exc}); remove it"
            ) from None

    def _put_record(self, execution_id: str, started_at: float, body: dict[str, Any], expected_revision: int) -> int:
        """Compare-and-swap one job's whole JSON object (see :meth:`put`)."""
        expected = check_revision(expected_revision)
        text = dumps(body, ensure_ascii=True)
        if expected == 0:
            query = self._pg.q(
                "INSERT INTO {s}.jobs (name, execution_id, revision, started_at, state) VALUES (%s, %s, 1, %s, %s) "
                "ON CONFLICT (name, execution_id) DO NOTHING RETURNING revision"
            )
            args: list[Any] = [self.name, execution_id, started_at, text]
        else:
            query = self._pg.q(
                "UPDATE {s}.jobs SET revision = revision + 1, state = %s, started_at = %s "
                "WHERE name = %s AND execution_id = %s AND revision = %s RETURNING revision"
            )
            args = [text, started_at, self.name, execution_id, expected]
        for attempt in (1, 2):
            try:
                with self._pg.connection() as conn:
                    row = conn.execute(query, args).fetchone()
                    if row is None:
                        cur = conn.execute(
                            self._pg.q("SELECT revision, state FROM {s}.jobs WHERE name = %s AND execution_id = %s"),
                            [self.name, execution_id],
                        ).fetchone()
            except psycopg.OperationalError as exc:
                if attempt == 1 and not isinstance(exc, (NoAnswer, PoolTimeout)):
                    self._pg.recheck()  # a lost connection (a restarted server): once more on a checked pool
                    continue
                raise self._pg.unavailable(
                    f"cannot store job {execution_id!r}",
                    exc,
                    written=None,
                    tail="Whether it was stored is unknown: load() shows the job's revision once the server is back",
                ) from exc
            if row is not None:
                return int(row[0])
            if attempt == 2 and cur and int(cur[0]) == expected + 1 and cur[1] == text:
                return expected + 1  # the first try was written before its connection was lost
            break
        actual = int(cur[0]) if cur else 0
        raise StoreConflictError(
            f"job {execution_id!r} is at revision {actual}, not {expected}: another writer "
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
