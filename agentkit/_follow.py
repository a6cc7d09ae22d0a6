"""Following other processes' commits (private): listeners of a store-backed session hear
what any process commits to it.

One shared daemon thread per process (started on the first follow, ended when nothing is
followed) visits every followed event log -- a store-backed log with at least one
listener -- every :data:`INTERVAL` seconds: it asks the store for the session's head (a
cheap check, no events read) and, when the head moved past the log's revision, calls the
log's ``refresh()``, which loads the new events and offers them to the listeners, each
once and in store order (a log's own commits and its refreshes are ordered by its lock).
The head check is made without the log's lock (only a refresh takes it, as any other
reader's would). Logs are held weakly: a session dropped without ``close()`` is forgotten
with it. A forked child follows nothing of its parent's (the thread does not survive a
fork); its own subscriptions start its own thread. A store without ``head()`` is asked
with ``load()`` (slow, but right).

PostgreSQL's LISTEN/NOTIFY would wake the thread sooner, but one listening connection
per followed session does not scale to thousands of sessions; polling ``head()`` (one
indexed query) is what every store offers.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import TYPE_CHECKING

from .errors import SessionError, StoreUnavailableError

if TYPE_CHECKING:
    from ._eventlog import EventLog

__all__ = ["INTERVAL", "follow", "unfollow"]

INTERVAL = 0.25
"""Seconds between two looks at a followed session's head."""

log = logging.getLogger("agentkit.session")


class _Follower:
    """The process's follower thread and the logs it follows."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # the thread does not survive a fork

    def _reset(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._logs: weakref.WeakSet[EventLog] = weakref.WeakSet()
        self._thread: threading.Thread | None = None
        self._warned: weakref.WeakSet[EventLog] = weakref.WeakSet()

    def follow(self, event_log: EventLog) -> None:
        with self._cond:
            self._logs.add(event_log)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="agentkit-follower", daemon=True)
                self._thread.start()

    def unfollow(self, event_log: EventLog) -> None:
        with self._cond:
            self._logs.discard(event_log)

    def following(self) -> int:
        """How many logs are followed (for tests)."""
        with self._cond:
            return len(self._logs)

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            with self._cond:
                if self._thread is not me:
                    return  # replaced (after a fork)
                if not self._logs:
                    self._thread = None  # the next follow() starts another
                    return
            self._visit_all()  # its locals go: no log is held while sleeping
            with self._cond:
                self._cond.wait(INTERVAL)

    def _visit_all(self) -> None:
        with self._cond:
            logs = list(self._logs)
        for event_log in logs:
            if event_log.closed or event_log.failed is not None or not event_log.subs:
                self.unfollow(event_log)
            else:
                self._visit(event_log)

    def _visit(self, event_log: EventLog) -> None:
        try:
            head = current_head(event_log)
            if head is not None and head != event_log.revision:
                event_log.refresh()
        except SessionError:
            self.unfollow(event_log)  # closed or failed meanwhile
        except StoreUnavailableError:
            pass  # the server is away: look again next time
        except Exception as exc:  # noqa: BLE001 - one bad session must not stop the others
            if event_log not in self._warned:
                self._warned.add(event_log)
                log.warning("session %r: could not load what other processes committed (%s: %s); "
                            "trying again", event_log.session_id, type(exc).__name__, exc)


def current_head(event_log: EventLog) -> int | None:
    """The stored revision of ``event_log``'s session (None when it is not stored), asked
    of the store without the log's lock: ``store.head()``, or a load where a store has none."""
    store, sid = event_log.store, event_log.session_id
    if store is None or sid is None:
        return None
    head = getattr(store, "head", None)
    if callable(head):
        value: int | None = head(sid)
        return value
    stored = store.load(sid)  # a store without head(): the slow way
    return None if stored is None else stored.revision


_FOLLOWER = _Follower()


def follow(event_log: EventLog) -> None:
    """Deliver what other processes commit to ``event_log``'s session to its listeners."""
    _FOLLOWER.follow(event_log)


def unfollow(event_log: EventLog) -> None:
    """Stop following ``event_log`` (its last listener left, or it closed)."""
    _FOLLOWER.unfollow(event_log)
