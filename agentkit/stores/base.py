"""The event-store port: :class:`EventStore` (durable, compare-and-swap storage of a
session's event log), :class:`StoredSession`, :class:`TurnLease`.

The job-store port (:class:`~agentkit.jobs.JobStore`, :class:`~agentkit.jobs.StoredJob`)
lives in ``agentkit/jobs/_base.py``. It is not imported back here: the stores' own modules
(``_checks``) import this one, and the job stores import those, so importing the jobs
package from here would need this module half-made."""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..errors import ConfigurationError
from ..events import Event

if TYPE_CHECKING:
    from ..cancel import CancelToken

SCHEMA_VERSION = 1
"""The version of the stored record format this agentkit writes and understands."""

_SESSION_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def validate_session_id(session_id: str) -> str:
    """Return ``session_id`` or raise ConfigurationError: 1-128 characters from
    ``A-Z a-z 0-9 . _ -``, not starting with a dot or dash, never a path."""
    if not isinstance(session_id, str) or not _SESSION_ID_RE.fullmatch(session_id) or ".." in session_id:
        raise ConfigurationError(
            f"invalid session id {session_id!r}: use 1-128 characters from A-Z a-z 0-9 . _ - "
            f"starting with a letter or digit (no path separators, no '..')"
        )
    return session_id


@dataclass(frozen=True, kw_only=True)
class StoredSession:
    """A session as loaded from a store."""

    session_id: str
    events: tuple[Event, ...]
    revision: int
    """Pass this as ``expected_revision`` to the next append or compaction. It starts at
    0; an append advances it by the number of events appended, a compaction by one."""
    schema_version: int = SCHEMA_VERSION


class TurnLease:
    """A held turn lock of one session (what :meth:`EventStore.turn_lock` yields).

    ``epoch`` is the fencing token: it grows every time any process is granted the turn
    lock of this session. An append made with ``lease=`` is refused with
    :class:`~agentkit.errors.TurnLockLostError` (nothing written) when the store knows the
    lease is no longer held: a newer epoch was granted, or the connection that held the
    lock is gone. Stores subclass it to keep their own handle."""

    __slots__ = ("session_id", "epoch", "_lost")

    def __init__(self, session_id: str, epoch: int) -> None:
        self.session_id = session_id
        self.epoch = epoch
        self._lost = False

    @property
    def held(self) -> bool:
        """False once the store knows this lease was lost or released."""
        return not self._lost

    def _mark_lost(self) -> None:
        self._lost = True

    def __repr__(self) -> str:
        return f"TurnLease(session_id={self.session_id!r}, epoch={self.epoch}, held={self.held})"


@runtime_checkable
class EventStore(Protocol):
    """Durable storage for session event logs.

    ``append`` and ``compact`` are compare-and-swap: they write only when
    ``expected_revision`` equals the stored revision (``0`` for a session that does not
    exist yet) and return the new revision; otherwise they raise
    :class:`~agentkit.errors.StoreConflictError` and write nothing. Every change advances
    the revision (an append by the number of events, a compaction by one), so a stale
    writer never matches. When a method returns, its change is durable.

    Session retention (:class:`~agentkit.Retention`) uses the port as it is: after
    committing a ``compaction`` event it calls ``archive(session_id, <that event's id>,
    covered)`` and then ``compact(session_id, <the same id>, remove=len(covered),
    summary=())`` (the compaction event is already in the log). A restart repeats both,
    so ``archive`` with the same events must be a no-op and ``compact`` must accept an
    archive that already holds exactly the events it removes. Stored events keep their
    ``seq`` in the log and in archives: ``Session.history()`` orders and de-duplicates by
    it, following the chain of archives from the first compaction event of the active
    log. ``load`` returns only the active log.

    Optional: ``copy_prefix(session_id, new_session_id, *, count, first_event_id,
    last_event_id, events=()) -> int`` starts a new session with the first ``count``
    events of ``session_id``'s active log followed by ``events``, in one write, returning
    its revision (``count + len(events)``); StoreConflictError, nothing written, when
    ``new_session_id`` exists or the log no longer begins with those events.
    ``Session.fork`` uses it when a store has it (``FileEventStore`` and
    ``PostgresEventStore`` do, without re-sending the copied events), else one ``append``.
    """

    def load(self, session_id: str) -> StoredSession | None:
        """The stored session, or None when there is none."""
        ...

    def append(
        self, session_id: str, events: Sequence[Event], *, expected_revision: int, lease: TurnLease | None = None
    ) -> int:
        """Append events atomically; return the new revision. With ``lease`` (a held
        :meth:`turn_lock`), refuse with :class:`~agentkit.errors.TurnLockLostError` and
        write nothing when the lease is no longer held (fencing)."""
        ...

    def head(self, session_id: str) -> int | None:
        """The session's current revision, or None when it does not exist: a cheap check
        (no events are read) a Session makes before a read to know whether it is current."""
        ...

    def turn_lock(
        self, session_id: str, *, timeout: float | None = None, cancel: CancelToken | None = None
    ) -> AbstractContextManager[TurnLease]:
        """Hold session ``session_id``'s turn lock for the block: one turn of a
        conversation at a time across threads, processes and hosts. Released when the
        block ends or its holder dies. Waits at most ``timeout`` seconds (None: no
        bound), then raises :class:`~agentkit.errors.StoreUnavailableError`;
        ``cancel`` ends the wait with :class:`~agentkit.errors.CancelledError`."""
        ...

    def archive(self, session_id: str, archive_id: str, events: Sequence[Event]) -> None:
        """Keep a copy of ``events`` under ``archive_id`` (the active log is unchanged).
        The same event ids again is a no-op; different events under a used id are refused."""
        ...

    def compact(
        self,
        session_id: str,
        archive_id: str,
        *,
        expected_revision: int,
        remove: int,
        summary: Sequence[Event] = (),
    ) -> int:
        """Remove the first ``remove`` events from the active log, keeping them under
        ``archive_id``, and put ``summary`` (e.g. a ContextReplacedEvent) in their place,
        all or nothing; compare-and-swap like ``append``. Returns the new revision."""
        ...

    def load_archive(self, session_id: str, archive_id: str) -> tuple[Event, ...] | None:
        """Events archived under ``archive_id``, or None."""
        ...

    def list_sessions(self) -> list[str]:
        """Ids of all stored sessions, sorted."""
        ...

    def delete(self, session_id: str) -> bool:
        """Remove a session and its archives; True when something was removed."""
        ...
