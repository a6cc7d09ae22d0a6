"""The EventStore port: durable, compare-and-swap storage of a session's event log."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..errors import ConfigurationError
from ..events import Event

__all__ = ["SCHEMA_VERSION", "EventStore", "StoredSession", "validate_session_id"]

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


@runtime_checkable
class EventStore(Protocol):
    """Durable storage for session event logs.

    ``append`` and ``compact`` are compare-and-swap: they write only when
    ``expected_revision`` equals the stored revision (``0`` for a session that does not
    exist yet) and return the new revision; otherwise they raise
    :class:`~agentkit.errors.StoreConflictError` and write nothing. Every change advances
    the revision (an append by the number of events, a compaction by one), so a stale
    writer never matches. When a method returns, its change is durable.
    """

    def load(self, session_id: str) -> StoredSession | None:
        """The stored session, or None when there is none."""
        ...

    def append(self, session_id: str, events: Sequence[Event], *, expected_revision: int) -> int:
        """Append events atomically; return the new revision."""
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
