"""A process-local, thread-safe event store with the same semantics as the file store."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ..events import Event
from ._checks import archive_conflict, check_count, check_events, check_revision, compact_too_far, conflict
from ._records import stored_copies
from .base import StoredSession, validate_session_id

__all__ = ["InMemoryEventStore"]


class InMemoryEventStore:
    """Keeps event logs in memory, with the file store's semantics (revisions,
    compare-and-swap, archives, compaction)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: dict[str, list[Event]] = {}
        self._revisions: dict[str, int] = {}
        self._archives: dict[tuple[str, str], tuple[Event, ...]] = {}

    def load(self, session_id: str) -> StoredSession | None:
        """The stored session, or None."""
        validate_session_id(session_id)
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                return None
            return StoredSession(session_id=session_id, events=tuple(log), revision=self._revisions[session_id])

    def head(self, session_id: str) -> int | None:
        """The session's current revision, or None when it does not exist."""
        validate_session_id(session_id)
        with self._lock:
            return self._revisions.get(session_id)

    def append(self, session_id: str, events: Sequence[Event], *, expected_revision: int) -> int:
        """Compare-and-swap append; returns the new revision."""
        validate_session_id(session_id)
        check_revision(expected_revision)
        batch = stored_copies(check_events(events))
        with self._lock:
            current = self._revisions.get(session_id, 0)
            if expected_revision != current:
                raise conflict(session_id, expected_revision, current)
            self._logs.setdefault(session_id, []).extend(batch)
            self._revisions[session_id] = current + len(batch)
            return current + len(batch)

    def archive(self, session_id: str, archive_id: str, events: Sequence[Event]) -> None:
        """Keep archived events. Archiving the same event ids again is a no-op; different
        events under a used id are refused."""
        validate_session_id(session_id)
        validate_session_id(archive_id)
        batch = tuple(stored_copies(check_events(events)))
        with self._lock:
            self._archive_locked(session_id, archive_id, batch)

    def _archive_locked(self, session_id: str, archive_id: str, batch: tuple[Event, ...]) -> None:
        existing = self._archives.get((session_id, archive_id))
        if existing is not None:
            if [e.id for e in existing] == [e.id for e in batch]:
                return
            raise archive_conflict(session_id, archive_id)
        self._archives[(session_id, archive_id)] = batch

    def compact(
        self,
        session_id: str,
        archive_id: str,
        *,
        expected_revision: int,
        remove: int,
        summary: Sequence[Event] = (),
    ) -> int:
        """Archive the first ``remove`` events under ``archive_id`` and put ``summary`` in
        their place, compare-and-swap; returns ``expected_revision + 1``."""
        validate_session_id(session_id)
        validate_session_id(archive_id)
        check_revision(expected_revision)
        count = check_count(remove)
        replacement = stored_copies(check_events(summary))
        with self._lock:
            current = self._revisions.get(session_id, 0)
            if expected_revision != current:
                raise conflict(session_id, expected_revision, current)
            log = self._logs.get(session_id, [])
            if count > len(log):
                raise compact_too_far(session_id, count, len(log))
            self._archive_locked(session_id, archive_id, tuple(log[:count]))
            self._logs[session_id] = [*replacement, *log[count:]]
            self._revisions[session_id] = current + 1
            return current + 1

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
            self._revisions.pop(session_id, None)
            for key in [k for k in self._archives if k[0] == session_id]:
                del self._archives[key]
                found = True
            return found

