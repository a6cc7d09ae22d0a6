"""The tool cache in PostgreSQL (private): the ``tool_cache`` table of a schema, one row
per entry, written with an upsert; times come from the server's clock, so every host
agrees on an entry's age. A row past its writer's ``ttl`` is a miss and is deleted."""

from __future__ import annotations

from typing import Any

from .._json import loads
from ..errors import StoreError
from ._pg import Pg, psycopg

__all__ = ["PgCache"]

_NOW = "extract(epoch from clock_timestamp())::float8"


class PgCache:
    """Entries as rows of ``<schema>.tool_cache``."""

    def __init__(self, pg: Pg, *, own: bool) -> None:
        self._pg = pg
        self._own = own
        conninfo = pg.pool.conninfo() if callable(pg.pool.conninfo) else pg.pool.conninfo
        try:  # named without its password: the name is logged
            parts = psycopg.conninfo.conninfo_to_dict(conninfo)
        except psycopg.ProgrammingError:
            parts = {}
        place = " ".join(f"{k}={parts[k]}" for k in ("host", "port", "dbname", "user") if parts.get(k))
        self.where = f"postgresql {place} schema={pg.schema}".replace("  ", " ")

    @classmethod
    def from_conninfo(cls, target: Any, schema: str) -> PgCache:
        """A cache on a URI (a pool of its own) or a ``ConnectionPool`` (the caller's)."""
        pg = Pg(target, schema=schema, pool_size=2, connect_timeout=10.0, owner="PostgresEventStore")
        return cls(pg, own=isinstance(target, str))

    @classmethod
    def of_store(cls, store: Any) -> PgCache:
        """A cache on a PostgresEventStore's pool and schema."""
        return cls(store._pg, own=False)

    def _run(self, what: str, statement: str, params: list[Any]) -> list[tuple[Any, ...]]:
        def query(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            cur = conn.execute(self._pg.q(statement), params)
            return cur.fetchall() if cur.description is not None else [(cur.rowcount,)]

        try:
            return self._pg.read(what, query)
        except psycopg.errors.UndefinedTable:
            raise StoreError(
                f"PostgreSQL schema {self._pg.schema!r} has no tool_cache table (it was migrated by an "
                f"older agentkit): call PostgresEventStore.migrate() again (it keeps what is there)"
            ) from None
        except psycopg.Error as exc:
            raise StoreError(f"cannot {what}: {type(exc).__name__}: {exc}") from exc

    def get(self, key: str) -> tuple[dict[str, Any], float, float] | None:
        rows = self._run("read the tool cache",
                         f"SELECT output, stored_at, expires_at, {_NOW} FROM {{s}}.tool_cache WHERE key = %s", [key])
        if not rows:
            return None
        body, stored_at, expires_at, now = rows[0]
        if now >= expires_at:
            self._run("remove an expired tool-cache entry",
                      f"DELETE FROM {{s}}.tool_cache WHERE key = %s AND expires_at <= {_NOW}", [key])
            return None
        try:
            output = loads(body)
        except ValueError:
            return None
        return (output, stored_at, now) if isinstance(output, dict) else None

    def put(self, key: str, tool_name: str, output: str, ttl: float) -> None:
        self._run(
            "write the tool cache",
            f"INSERT INTO {{s}}.tool_cache AS c (key, tool_name, stored_at, expires_at, output) "
            f"SELECT %s, %s, t.now, t.now + %s, %s FROM (SELECT {_NOW} AS now) AS t "
            f"ON CONFLICT (key) DO UPDATE SET tool_name = EXCLUDED.tool_name, stored_at = EXCLUDED.stored_at, "
            f"expires_at = EXCLUDED.expires_at, output = EXCLUDED.output",
            [key, tool_name, ttl, output],
        )

    def prune(self) -> int:
        rows = self._run("prune the tool cache", f"DELETE FROM {{s}}.tool_cache WHERE expires_at <= {_NOW}", [])
        return int(rows[0][0])

    def clear(self) -> int:
        return int(self._run("clear the tool cache", "DELETE FROM {s}.tool_cache", [])[0][0])

    def close(self) -> None:
        if self._own:
            self._pg.close()
