"""A PostgreSQL session's prefix copied into a new session in one statement (private):
:meth:`PostgresEventStore.copy_prefix <agentkit.stores.postgres.PostgresEventStore.copy_prefix>`,
what ``Session.fork`` writes with. The copied rows never leave the server (``INSERT ...
SELECT``); only the few events that follow them are sent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, StoreConflictError
from ..events import Event
from ._checks import check_events, conflict
from ._pg_schema import channel_name
from .base import validate_session_id

if TYPE_CHECKING:
    from .postgres import PostgresEventStore

__all__ = ["copy_prefix"]

# One statement, so one snapshot and all or nothing: the source's first events up to and
# including the event %(last)s (checked: there are %(count)s and the first is %(first)s),
# then the given events, become the new session %(dst)s, unless it exists already.
_COPY = """\
WITH src AS (
    SELECT e.event_id, e.body, row_number() OVER (ORDER BY e.position) AS n
      FROM {s}.events e
     WHERE e.session_id = %(src)s
       AND e.position <= (SELECT position FROM {s}.events WHERE session_id = %(src)s AND event_id = %(last)s)
), found AS (
    SELECT count(*) AS total, max(event_id) FILTER (WHERE n = 1) AS first_id FROM src
), made AS (
    INSERT INTO {s}.sessions (session_id, revision, head)
    SELECT %(dst)s, %(count)s + %(extra)s, %(count)s + %(extra)s FROM found
     WHERE found.total = %(count)s AND found.first_id = %(first)s
    ON CONFLICT (session_id) DO NOTHING
    RETURNING revision
), copied AS (
    INSERT INTO {s}.events (session_id, position, rev, event_id, body)
    SELECT %(dst)s, src.n - 1, src.n, src.event_id, src.body FROM src, made
), added AS (
    INSERT INTO {s}.events (session_id, position, rev, event_id, body)
    SELECT %(dst)s, %(count)s + x.i - 1, %(count)s + x.i, x.id, x.body
      FROM unnest(%(ids)s::text[], %(bodies)s::text[]) WITH ORDINALITY AS x(id, body, i), made
)
SELECT (SELECT revision FROM made), (SELECT total FROM found), (SELECT first_id FROM found),
       (SELECT revision FROM {s}.sessions WHERE session_id = %(dst)s),
       (SELECT count(pg_notify(%(channel)s, %(dst)s || ' ' || revision)) FROM made)
"""


def copy_prefix(
    self: PostgresEventStore, session_id: str, new_session_id: str, *, count: int, first_event_id: str,
    last_event_id: str, events: Sequence[Event] = (),
) -> int:
    """Start session ``new_session_id`` with the first ``count`` events of session
    ``session_id``'s active log (the first is ``first_event_id``, the last
    ``last_event_id``) followed by ``events``, in one statement: the copied rows are
    copied inside the server. Returns the new session's revision (``count +
    len(events)``, as if one append had written them all).

    Raises :class:`~agentkit.errors.StoreConflictError` (nothing written) when
    ``new_session_id`` exists, or when the source's active log no longer begins with
    those ``count`` events (it was compacted since: load it and decide again)."""
    validate_session_id(session_id)
    validate_session_id(new_session_id)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ConfigurationError(f"count must be an int >= 1 (how many events to copy), got {count!r}")
    ids, bodies = self._bodies(check_events(events))
    params: dict[str, Any] = {
        "src": session_id, "dst": new_session_id, "last": last_event_id, "first": first_event_id, "count": count,
        "extra": len(ids), "ids": ids, "bodies": bodies, "channel": channel_name(self.schema),
    }
    query = self._pg.q(_COPY)
    row = self._write(f"copy session {session_id!r} into {new_session_id!r}",
                      lambda conn: conn.execute(query, params).fetchone(), new_session_id, "", retry=False)
    made, total, first, existing = row[0], row[1], row[2], row[3]
    if made is not None:
        return int(made)
    if existing is not None or (total == count and first == first_event_id):  # (created meanwhile)
        raise conflict(new_session_id, 0, int(existing or 0))
    raise StoreConflictError(
        f"session {session_id!r} no longer begins with the {count} events ending at {last_event_id!r} "
        f"(found {total}): it was compacted or changed meanwhile. Nothing was written. Reload it and fork again.",
        expected_revision=count, actual_revision=int(total or 0),
    )
