"""``ToolCache``: a read-only tool's successful results kept on disk or in PostgreSQL and
answered from there while they are fresh, shared by every session, thread and process
that opens the same place (private module; import ``ToolCache`` from ``agentkit``).

The rules:

* An entry's key is the SHA-256 of the cache's ``namespace``, the tool's name, the call's
  input as the tool function receives it (canonical JSON: sorted keys) and what the
  cache's ``key=`` function adds (for a tool whose answer depends on its ``ToolContext``,
  e.g. ``ctx.deps``). Nothing else: the session, the user and the context are not in it.
* The cache is asked after the call passed its schema, the approval gate and the
  ``before_tool_call`` hooks; a hit replaces only the run (``after_tool_call`` hooks see
  it as they see any result). Only successful outputs are stored: not error results, not
  timeouts, not a call that was cancelled or asked a person.
* An entry is fresh while it is younger than the reading cache's ``ttl`` and its writer's;
  one past its writer's ``ttl`` is a miss and is removed. A damaged entry is a miss.
* The cache is an optimisation: when its place cannot be read or written (a full disk,
  a lost database) the call runs as if there were no cache, and a warning is logged on
  the ``agentkit.tools`` logger.
* Within one process, calls missing the same entry at once run once: the others wait for
  that run and take its result (if it failed, each runs itself). Across processes two
  misses may both run; the last write wins.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol

from .._json import dumps
from ..errors import ConfigurationError, StoreError
from ..messages import ToolOutput, _output_from_dict, _output_to_dict
from ._tool import ToolContext

__all__ = ["Entry", "ToolCache"]

_log = logging.getLogger("agentkit.tools")

KeyFunction = Callable[[dict[str, Any], ToolContext], Any]
"""``key(input, ctx)``: a JSON value added to an entry's key (for answers that depend on
the context as well as the input)."""


Entry = tuple[dict[str, Any], float, float]
"""What a backend reads of an entry: its output (stored JSON form), when it was stored and
the backend's clock when it was read (seconds since the epoch; the age is their
difference)."""


class _Backend(Protocol):
    where: str
    """Names the place: two backends with the same ``where`` hold the same entries."""

    def get(self, key: str) -> Entry | None: ...
    def put(self, key: str, tool_name: str, output: str, ttl: float) -> None: ...
    def prune(self) -> int: ...
    def clear(self) -> int: ...
    def close(self) -> None: ...


class ToolCache:
    """A result cache for read-only tools: ``@tool(cache=ToolCache(path, ttl=60),
    read_only=True)``.

    ``target`` is a directory (``str`` or ``Path``; one file per entry, written
    atomically, shared by the processes that use it), a
    :class:`~agentkit.stores.postgres.PostgresEventStore` (its ``tool_cache`` table,
    created by its ``migrate()``), a PostgreSQL URI (``postgresql://...``, a pool of the
    cache's own) or a ``psycopg_pool.ConnectionPool`` (both in ``schema``). ``ttl``: the
    seconds an entry is fresh. ``namespace``: a version or name mixed into every key
    (change it to drop every earlier answer). ``key``: a function of the call's input and
    its :class:`~agentkit.ToolContext` returning a JSON value mixed into the key (say,
    ``lambda input, ctx: ctx.deps.tenant``). Any number of tools and caches may share
    one place: entries are keyed by tool name. ``fsync=False`` (a directory only) does
    not force entries to disk: a miss then costs a rename instead of two fsyncs, and a
    crash of the machine may lose the latest entries (they become misses).
    """

    def __init__(self, target: Any, *, ttl: float, namespace: str = "", key: KeyFunction | None = None,
                 schema: str = "agentkit", fsync: bool = True) -> None:
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not (0 < ttl < math.inf):
            raise ConfigurationError(f"ToolCache ttl must be a positive number of seconds, got {ttl!r}")
        if not isinstance(namespace, str):
            raise ConfigurationError(f"ToolCache namespace must be a str, got {type(namespace).__name__}")
        if key is not None and not callable(key):
            raise ConfigurationError("ToolCache key must be a function key(input, ctx) returning a JSON value")
        self.ttl = float(ttl)
        self.namespace = namespace
        self._key_fn = key
        if not isinstance(fsync, bool):
            raise ConfigurationError(f"ToolCache fsync must be True or False, got {fsync!r}")
        self._backend = _backend(target, schema, fsync)

    def __repr__(self) -> str:
        return f"ToolCache({self._backend.where!r}, ttl={self.ttl:g})"

    def key(self, tool_name: str, input: dict[str, Any], ctx: ToolContext | None = None) -> str:
        """The key of a call of ``tool_name`` with ``input`` (64 hex digits): what a hit's
        ``cache`` marker names. ``ctx`` is what the ``key=`` function sees."""
        extra = None if self._key_fn is None else self._key_fn(input, ctx)  # type: ignore[arg-type]
        material = [self.namespace, tool_name, input, extra]
        try:
            text = _canonical(material)
        except TypeError:  # a pydantic model or dataclass the input was converted to: its JSON form
            from pydantic_core import to_jsonable_python

            text = _canonical(to_jsonable_python(material))
        return hashlib.sha256(text.encode()).hexdigest()

    def through(self, tool_name: str, data: dict[str, Any], ctx: ToolContext,
                compute: Callable[[], ToolOutput]) -> tuple[ToolOutput, dict[str, Any] | None]:
        """The output of a call (``data``: its input), from the cache while fresh, else from
        ``compute`` (stored when it succeeds); with the marker of a hit, or None. The tool
        runner calls this."""
        try:
            key = self.key(tool_name, data, ctx)
        except Exception as exc:  # noqa: BLE001 - the user's key function, or a value JSON cannot hold
            return ToolOutput.error(
                f"tool {tool_name!r} was not run: its cache key could not be made "
                f"({type(exc).__name__}: {exc}); the ToolCache key= function must return a JSON value"
            ), None
        hit = self._hit(key)
        if hit is not None:
            return hit
        flight, leader = _flights.join(self._backend.where, key)
        if not leader:
            _flights.wait(flight, ctx)
            hit = self._hit(key)
            if hit is not None:
                return hit
        try:
            output = compute()
            if not output.is_error:
                self._store(key, tool_name, output)
        finally:
            if leader:
                _flights.leave(self._backend.where, key, flight)
        return output, None

    def prune(self) -> int:
        """Remove the entries past their ``ttl`` (and damaged ones); returns how many."""
        return self._backend.prune()

    def clear(self) -> int:
        """Remove every entry of this place (every tool's); returns how many."""
        return self._backend.clear()

    def close(self) -> None:
        """Close the connection pool the cache made for a PostgreSQL URI (nothing else
        holds resources)."""
        self._backend.close()

    def _hit(self, key: str) -> tuple[ToolOutput, dict[str, Any]] | None:
        try:
            entry = self._backend.get(key)
        except (OSError, StoreError) as exc:
            _log.warning("the tool cache %s could not be read (%s); the call runs", self._backend.where, exc)
            return None
        if entry is None:
            return None
        body, stored_at, now = entry
        if now - stored_at >= self.ttl:
            return None
        try:
            output = _output_from_dict(body)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None  # damaged: a miss (the run's entry replaces it)
        if output.kind not in _STORED or (output.kind == "text" and not isinstance(output.value, str)):
            return None  # not what a cache stores (only successes): damaged
        return output, {"hit": True, "key": key, "stored_at": stored_at}

    def _store(self, key: str, tool_name: str, output: ToolOutput) -> None:
        try:
            self._backend.put(key, tool_name, dumps(_output_to_dict(output), allow_nan=False), self.ttl)
        except (OSError, StoreError, ValueError) as exc:
            _log.warning("the tool cache %s could not store a result of tool %r (%s)", self._backend.where,
                         tool_name, exc)


_STORED = ("text", "json", "content")
"""The output kinds an entry may hold: successful ones."""


def _canonical(value: Any) -> str:
    """``value`` as canonical JSON: sorted keys, no spaces, no NaN (ValueError)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _backend(target: Any, schema: str, fsync: bool) -> _Backend:
    """The backend ``target`` names, or ConfigurationError saying what it may be."""
    if isinstance(target, (str, os.PathLike)):
        place = os.fspath(target)
        if isinstance(place, bytes):
            raise ConfigurationError("ToolCache takes a str or Path directory, not bytes")
        if place.startswith(("postgresql://", "postgres://")):
            from ..stores._pg_cache import PgCache

            return PgCache.from_conninfo(place, schema)
        from ._cache_file import FileCache

        return FileCache(place, fsync=fsync)
    stores = sys.modules.get("agentkit.stores.postgres")
    if stores is not None and isinstance(target, stores.PostgresEventStore):
        from ..stores._pg_cache import PgCache

        return PgCache.of_store(target)
    pools = sys.modules.get("psycopg_pool")
    if pools is not None and isinstance(target, pools.ConnectionPool):
        from ..stores._pg_cache import PgCache

        return PgCache.from_conninfo(target, schema)
    raise ConfigurationError(
        f"ToolCache keeps its entries in a directory (a str or Path), a PostgresEventStore, a "
        f"postgresql:// URI or a psycopg_pool.ConnectionPool, not {type(target).__name__}"
    )


class _Flights:
    """The misses running in this process, by place and key: the first runs, the others
    wait for it (then read its entry)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[tuple[str, str], threading.Event] = {}
        self.waiting = 0
        """Calls waiting for another's run now (the tests watch it)."""

    def join(self, where: str, key: str) -> tuple[threading.Event, bool]:
        with self._lock:
            flight = self._running.get((where, key))
            if flight is not None:
                return flight, False
            flight = self._running[(where, key)] = threading.Event()
            return flight, True

    def leave(self, where: str, key: str, flight: threading.Event) -> None:
        with self._lock:
            if self._running.get((where, key)) is flight:
                del self._running[(where, key)]
        flight.set()

    def wait(self, flight: threading.Event, ctx: ToolContext) -> None:
        """Until ``flight`` ends; CancelledError when the waiting call is cancelled."""
        with self._lock:
            self.waiting += 1
        try:
            while not flight.wait(0.05):
                ctx.cancel.raise_if_cancelled()
        finally:
            with self._lock:
                self.waiting -= 1


_flights = _Flights()

