"""A process-local, thread-safe event store with the same semantics as the file store."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ..errors import StoreConflictError
from ..events import Event
from ._checks import archive_conflict, check_events, check_revision
from .base import StoredSession, validate_session_id

__all__ = ["InMemoryEventStore"]


class InMemoryEventStore:
    """Keeps event logs in memory. Revisions count appended events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: dict[str, list[Event]] = {}
        self._archives: dict[tuple[str, str], tuple[Event, ...]] = {}

    def load(self, session_id: str) -> StoredSession | None:
        """The stored session, or None."""
        validate_session_id(session_id)
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                return None
            return StoredSession(session_id=session_id, events=tuple(log), revision=len(log))

    def append(self, session_id: str, events: Sequence[Event], *, expected_revision: int) -> int:
        """Compare-and-swap append; returns the new revision."""
        validate_session_id(session_id)
        check_revision(expected_revision)
        batch = check_events(events)
        with self._lock:
            log = self._logs.get(session_id)
            current = 0 if log is None else len(log)
            if expected_revision != current:
                raise StoreConflictError(
                    f"session {session_id!r} is at revision {current}, not {expected_revision}: "
                    f"another writer appended first. Reload the session and retry.",
                    expected_revision=expected_revision,
                    actual_revision=current,
                )
            if log is None:
                log = self._logs[session_id] = []
            log.extend(batch)
            return len(log)

    def archive(self, session_id: str, archive_id: str, events: Sequence[Event]) -> None:
        """Keep archived events. Archiving the same event ids again is a no-op; different
        events under a used id are refused."""
        validate_session_id(session_id)
        validate_session_id(archive_id)
        batch = tuple(check_events(events))
        with self._lock:
            existing = self._archives.get((session_id, archive_id))
            if existing is not None:
                if [e.id for e in existing] == [e.id for e in batch]:
                    return
                raise archive_conflict(session_id, archive_id)
            self._archives[(session_id, archive_id)] = batch

    def load_archive(self, session_id: str, archive_id: str) -> tuple[Event, ...] | None:
        """Archived events, or None."""
        validate_session_id(session_id)
        validate_session_id(archive_id)
        with self._lock:
            return self._archives.get((session_id, archive_id))

    def list_sessions(self) -> list[str]:
        """Sorted session ids."""
        with self._lock:
            return sorted(self._logs)

    def delete(self, session_id: str) -> bool:
        """Remove a session and its archives."""
        validate_session_id(session_id)
        with self._lock:
            found = self._logs.pop(session_id, None) is not None
            for key in [k for k in self._archives if k[0] == session_id]:
                del self._archives[key]
                found = True
            return found
