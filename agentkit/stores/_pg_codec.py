"""The PostgreSQL event store's event bodies: events to JSON bodies (with the size
limit checked before anything is written) and stored bodies back to events, every
damage a :class:`~agentkit.errors.StoreCorruptionError` naming session and schema (private)."""

from __future__ import annotations

from collections.abc import Sequence

from .._json import dumps, loads
from ..errors import ConfigurationError, StoreCorruptionError
from ..events import Event
from ._decode import OutOfOrder, Unreadable, restore_events


def encode_bodies(events: Sequence[Event], max_event_bytes: int) -> tuple[list[str], list[str]]:
    """(ids, JSON bodies) of events already checked by check_events; an event over
    ``max_event_bytes`` is refused (ConfigurationError) before anything is written."""
    ids: list[str] = []
    bodies: list[str] = []
    for ev in events:
        try:
            body = dumps(ev.to_dict(), ensure_ascii=True, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"cannot store these events: they are not JSON-serialisable ({exc}). "
                f"Event data must be plain JSON values."
            ) from None
        if len(body) > max_event_bytes:
            raise ConfigurationError(
                f"event {ev.id!r} is {len(body)} bytes as JSON, over this store's max_event_bytes "
                f"({max_event_bytes}). Nothing was written. Keep large data elsewhere (a file, "
                f"an object store) and put a reference in the event, or raise max_event_bytes."
            )
        ids.append(ev.id)
        bodies.append(body)
    return ids, bodies


def decode_bodies(schema: str, session_id: str, bodies: Sequence[str], what: str = "active log") -> tuple[Event, ...]:
    """The events of stored JSON ``bodies`` (in log order), or StoreCorruptionError
    naming the session and the event when one is not what agentkit writes."""
    items = []
    for i, body in enumerate(bodies):
        try:
            items.append(loads(body))
        except ValueError as exc:
            raise StoreCorruptionError(
                f"event {i + 1} of the {what} of session {session_id!r} in PostgreSQL schema {schema!r} "
                f"is not JSON ({exc}). Nothing was changed. Restore it from a backup."
            ) from None
    return restore(schema, session_id, items, what)


def restore(schema: str, session_id: str, items: Sequence[object], what: str) -> tuple[Event, ...]:
    """Events from decoded JSON ``items``, or StoreCorruptionError."""
    try:
        return restore_events(items, what)
    except OutOfOrder as exc:
        raise StoreCorruptionError(
            f"the {what} of session {session_id!r} in PostgreSQL schema {schema!r} holds events no "
            f"agentkit writes in this order ({exc}). Nothing was changed. Restore it from a backup."
        ) from None
    except Unreadable as exc:
        raise StoreCorruptionError(
            f"the {what} of session {session_id!r} in PostgreSQL schema {schema!r} holds an event "
            f"agentkit cannot read ({exc}). If a newer agentkit wrote it, upgrade agentkit; otherwise "
            f"restore it."
        ) from None


def decode_archive(schema: str, session_id: str, archive_id: str, body: str) -> tuple[Event, ...]:
    """The events of an archive's stored JSON list, or StoreCorruptionError."""
    try:
        items = loads(body)
    except ValueError as exc:
        items = exc
    if not isinstance(items, list):
        raise StoreCorruptionError(
            f"archive {archive_id!r} of session {session_id!r} in PostgreSQL schema {schema!r} is not "
            f"a JSON list of events ({items}). Restore it from a backup."
        )
    return restore(schema, session_id, items, f"archive {archive_id!r}")
