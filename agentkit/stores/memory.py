"""A process-local, thread-safe event store with the same semantics as the file store."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..events import Event
from ._checks import (
    archive_conflict,
    check_count,
    check_events,
    check_lease,
    check_revision,
    check_turn_timeout,
    compact_too_far,
    conflict,
    turn_timeout,
)
from ._locks import wait_for_lock
from ._records import stored_copies
from .base import StoredSession, TurnLease, validate_session_id

if TYPE_CHECKING:
    from ..cancel import CancelToken


class InMemoryEventStore:
    """Keeps event logs in memory, with the file store's semantics (revisions,
    compare-and-swap, archives, compaction)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: dict[str, list[Event]] = {}
        self._revisions: dict[str, int] = {}
        self._archives: dict[tuple[str, str], tuple[Event, ...]] = {}
        self._turns: dict[str, threading.Lock] = {}
        self._epochs: dict[str, int] = {}

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

    @contextmanager
    def turn_lock(
        self, session_id: str, *, timeout: float | None = None, cancel: CancelToken | None = None
    ) -> Iterator[TurnLease]:
        """Hold session ``session_id``'s turn lock for the block (one turn of it at a time
        across the threads of this process); yields the lease, whose epoch grows with every
        grant. Waits at most ``timeout`` seconds (None: no bound), then raises
        StoreUnavailableError; ``cancel`` ends the wait with CancelledError."""
        validate_session_id(session_id)
        wait = check_turn_timeout(timeout)
        with self._lock:
            lock = self._turns.setdefault(session_id, threading.Lock())
        if not wait_for_lock(lock, wait, cancel):
            assert wait is not None
            raise turn_timeout(session_id, wait)
        try:
            with self._lock:
                epoch = self._epochs[session_id] = self._epochs.get(session_id, 0) + 1
            lease = TurnLease(session_id, epoch)
            try:
                yield lease
            finally:
                lease._mark_lost()
        finally:
            lock.release()

    def append(
        self, session_id: str, events: Sequence[Event], *, expected_revision: int, lease: TurnLease | None = None
    ) -> int:
        """Compare-and-swap append; returns the new revision. With ``lease``, refused
        (TurnLockLostError) unless it is the turn lock's held lease."""
        validate_session_id(session_id)
        check_revision(expected_revision)
        batch = stored_copies(check_events(events))
        with self._lock:
            if lease is not None:
                check_lease(session_id, lease, self._epochs.get(session_id))
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

