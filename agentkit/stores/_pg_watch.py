"""Following a PostgreSQL store's commits: a LISTEN connection of its own, re-opened
when lost, and one session's events read after each announcement (private)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from ..cancel import CancelToken
from ..errors import ConfigurationError, StoreUnavailableError
from ..events import Event
from ._pg import Pg, channel_name, psycopg


def check_watch(cancel: object, poll_interval: object) -> None:
    """Refuse a bad ``cancel`` or ``poll_interval`` before any connection is opened."""
    if cancel is not None and not isinstance(cancel, CancelToken):
        raise ConfigurationError(f"cancel must be a CancelToken or None, not {type(cancel).__name__}")
    if not isinstance(poll_interval, (int, float)) or not 0 < poll_interval < 3600:
        raise ConfigurationError(f"poll_interval must be a positive number of seconds, got {poll_interval!r}")


def ending_with(closing: CancelToken, cancel: CancelToken | None) -> CancelToken:
    """A token cancelled when the store closes (``closing``) or ``cancel`` is: what ends a
    watch's retried reads, which would otherwise go on against a closed store's pool."""
    stop = closing.child()
    if cancel is not None:
        cancel.link(stop)
    return stop


def pause(cancel: CancelToken | None, poll_interval: float) -> bool:
    """Wait before trying the server again; True when ``cancel`` was cancelled meanwhile."""
    delay = min(1.0, poll_interval * 2)
    if cancel is None:
        time.sleep(delay)
        return False
    return cancel.wait(delay)


def notes(pg: Pg, closing: CancelToken, cancel: CancelToken | None, poll_interval: float) -> Iterator[str | None]:
    """None once listening on the schema's channel (again, after a lost connection
    was re-opened), then each announcement ("<session id> <revision>" or
    "<session id> deleted"), until ``closing`` (the store) or ``cancel`` is cancelled."""
    conninfo, kwargs = pg.connect_args()
    kwargs = {**pg.socket_options(), **kwargs}
    listen = psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(channel_name(pg.schema)))

    def going_on() -> bool:
        return not closing.cancelled and (cancel is None or not cancel.cancelled)

    while going_on():
        try:
            with psycopg.connect(conninfo, **kwargs) as conn:
                with pg.bounded(conn):
                    conn.execute(listen)
                yield None
                while going_on():
                    for note in conn.notifies(timeout=poll_interval):
                        yield note.payload
                    # the timeout: look at cancel again
        except psycopg.OperationalError:
            if pause(cancel, poll_interval):
                return


def follow_session(
    announcements: Iterator[str | None],
    load_after: Callable[[str, int], tuple[int, tuple[Event, ...]] | None],
    session_id: str,
    last: int,
    cancel: CancelToken | None,
    poll_interval: float,
    closing: CancelToken,
) -> Iterator[Event]:
    """The events committed to ``session_id`` after revision ``last``, read with
    ``load_after`` at each of its ``announcements`` (and each time listening began). A read
    retried while the server is unreachable ends when ``cancel`` is cancelled or the store
    closes (``closing``): a closed store's reads fail for good."""
    stop = ending_with(closing, cancel)
    prefix = session_id + " "
    seen = last > 0  # a revision above 0 names a session that exists
    for note in announcements:
        if note is not None and not note.startswith(prefix):
            continue  # another session's commit
        while True:  # listening (again) or notified: read what arrived; after LISTEN, so no gap
            try:
                found = load_after(session_id, last)
                break
            except StoreUnavailableError:
                if pause(stop, poll_interval):
                    return
        if found is None:
            if seen:
                return  # deleted
            continue
        seen = True
        revision, events = found
        if revision < last:
            return  # deleted and started again: a different session
        last = revision
        yield from events
