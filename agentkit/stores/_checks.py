"""Argument checks shared by the event stores, run before any side effect."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigurationError, StoreConflictError, StoreUnavailableError, TurnLockLostError
from ..events import Event, _storable_problem
from ._decode import LogOrder, OutOfOrder
from .base import TurnLease


def check_events(events: Sequence[Event]) -> list[Event]:
    """``events`` as a list, or ConfigurationError when it is not a sequence of Events,
    an event is not strict JSON (it would not come back from the store unchanged), or
    an id is given twice or a ``seq`` goes backwards (a load would refuse the log)."""
    if isinstance(events, (str, bytes)) or not isinstance(events, Sequence):
        raise ConfigurationError(f"events must be a sequence of Event objects, not {type(events).__name__}")
    for ev in events:
        if not isinstance(ev, Event):
            raise ConfigurationError(f"events must be Event objects, not {type(ev).__name__}")
    order = LogOrder()
    for i, ev in enumerate(events):
        problem = _storable_problem(ev)
        if problem is not None:
            raise ConfigurationError(
                f"cannot store these events: they are not JSON-serialisable (event {ev.id!r}: "
                f"{problem}). Event data must be plain JSON values; nothing was written."
            )
        try:  # what loading refuses as corruption is refused here as bad input
            order.check(ev, f"event {i + 1} given")
        except OutOfOrder as exc:
            raise ConfigurationError(f"cannot store these events: {exc}. Nothing was written.") from None
    return list(events)


def check_revision(expected_revision: object) -> int:
    """``expected_revision``, or ConfigurationError when it is not an int >= 0."""
    if not isinstance(expected_revision, int) or isinstance(expected_revision, bool) or expected_revision < 0:
        raise ConfigurationError(
            f"expected_revision must be an int >= 0 (0 for a new session), got {expected_revision!r}"
        )
    return expected_revision


def archive_conflict(session_id: str, archive_id: str) -> ConfigurationError:
    """The error for a second, different archive under a used id."""
    return ConfigurationError(
        f"archive {archive_id!r} of session {session_id!r} already holds different "
        f"events; archives are never overwritten. Use a new archive id."
    )


def check_count(remove: object) -> int:
    """``remove`` (how many events a compaction archives), or ConfigurationError when it
    is not an int >= 1."""
    if not isinstance(remove, int) or isinstance(remove, bool) or remove < 1:
        raise ConfigurationError(f"remove must be an int >= 1 (the number of events to archive), got {remove!r}")
    return remove


def compact_too_far(session_id: str, remove: int, active: int) -> ConfigurationError:
    """The error for a compaction asked to remove more events than the active log holds."""
    return ConfigurationError(
        f"cannot compact session {session_id!r}: asked to remove {remove} events but its active "
        f"log holds {active}. Nothing was changed. Count only the events load() returned."
    )


def conflict(session_id: str, expected: int, actual: int) -> StoreConflictError:
    """The error for a compare-and-swap whose expected revision is stale."""
    return StoreConflictError(
        f"session {session_id!r} is at revision {actual}, not {expected}: another writer "
        f"changed it first. Nothing was written. Reload the session and retry.",
        expected_revision=expected,
        actual_revision=actual,
    )


def check_turn_timeout(timeout: object) -> float | None:
    """``timeout`` of a turn lock wait, or ConfigurationError when it is not None or a
    finite number of seconds >= 0."""
    if timeout is None:
        return None
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 <= timeout < float("inf"):
        raise ConfigurationError(f"turn_lock timeout must be None or a number of seconds >= 0, got {timeout!r}")
    return float(timeout)


def turn_timeout(session_id: str, timeout: float) -> StoreUnavailableError:
    """The error for a turn lock another turn held past the wait's timeout."""
    return StoreUnavailableError(
        f"the turn of session {session_id!r} stayed taken for {timeout:g}s: another turn of this "
        f"conversation (in this or another process) is still running. Nothing was written. "
        f"Retry once it ends, or wait longer (a larger timeout).",
        written=False,
    )


def check_lease(session_id: str, lease: TurnLease, epoch: int | None) -> None:
    """Refuse an append under ``lease`` (TurnLockLostError) unless it is the held lease
    of the turn lock whose latest epoch is ``epoch``."""
    if not isinstance(lease, TurnLease):
        raise ConfigurationError(f"lease must be a TurnLease from store.turn_lock, not {type(lease).__name__}")
    if lease.session_id != session_id:
        raise ConfigurationError(
            f"this lease is the turn lock of session {lease.session_id!r}, not {session_id!r}"
        )
    if not lease.held or lease.epoch != epoch:
        raise TurnLockLostError(
            f"the turn lock of session {session_id!r} this append was made under (epoch {lease.epoch}) "
            f"is no longer held{'' if epoch is None else f' (the latest granted is epoch {epoch})'}: "
            f"another turn may be running now. Nothing was written; stop this turn."
        )
