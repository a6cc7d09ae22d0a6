"""Argument checks shared by the event stores, run before any side effect."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigurationError
from ..events import Event


def check_events(events: Sequence[Event]) -> list[Event]:
    """``events`` as a list, or ConfigurationError when it is not a sequence of Events."""
    if isinstance(events, (str, bytes)) or not isinstance(events, Sequence):
        raise ConfigurationError(f"events must be a sequence of Event objects, not {type(events).__name__}")
    for ev in events:
        if not isinstance(ev, Event):
            raise ConfigurationError(f"events must be Event objects, not {type(ev).__name__}")
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
