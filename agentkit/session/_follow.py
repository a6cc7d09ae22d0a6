"""Following other processes' commits (private): listeners of a store-backed session hear
what any process commits to it.

A followed event log is a store-backed log with at least one listener. How it is followed
depends on its store:

- A store with ``watch_all()`` (PostgreSQL: LISTEN/NOTIFY) gets one listening thread per
  store object, started when the first of its sessions is followed and ended when none
  is (or the store closes), on one listening connection however many sessions are
  followed. When the store announces a commit to a followed session past the log's
  revision, the thread calls the log's ``refresh()``; when it starts listening, and
  after re-opening a lost connection (``("*", None)``: announcements may have been
  missed), it checks the head of every followed session of that store.
- Any other store (file, memory, third-party) is polled: one shared daemon thread per
  process visits every such log every :data:`INTERVAL` seconds, asks the store for the
  session's head (a cheap check, no events read; a store without ``head()`` is asked
  with ``load()``, slow but right) and, when the head moved past the log's revision,
  calls ``refresh()``. The same thread looks once at the head of a session newly
  followed by a listening thread (what was announced before it was followed), and
  ends, every :data:`INTERVAL`, the listening threads whose sessions were all dropped.

``refresh()`` loads the new events and offers them to the listeners, each once and in
store order (a log's own commits and its refreshes are ordered by its lock). Head checks
and waits for announcements are made without the log's lock (only a refresh takes it, as
any other reader's would). Logs are held weakly: a session dropped without ``close()``
is forgotten with it. A forked child follows nothing of its parent's (threads do not
survive a fork); its own subscriptions start its own threads.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..cancel import CancelToken
from ..errors import SessionError, StoreUnavailableError

if TYPE_CHECKING:
    from ._eventlog import EventLog

__all__ = ["INTERVAL", "LISTEN_CHECK", "follow", "unfollow"]

INTERVAL = 0.25
"""Seconds between two looks at a polled session's head."""

LISTEN_CHECK = 0.5
"""Seconds within which a listening thread notices that it is to end (``watch_all``'s
``poll_interval``)."""

log = logging.getLogger("agentkit.session")


class _Watch:
    """The listening thread of one store object and the logs it follows, by session id."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.cancel = CancelToken()
        self.logs: dict[str, weakref.WeakSet[EventLog]] = {}

    def add(self, event_log: EventLog) -> None:
        self.logs.setdefault(event_log.session_id or "", weakref.WeakSet()).add(event_log)

    def discard(self, event_log: EventLog) -> None:
        logs = self.logs.get(event_log.session_id or "")
        if logs is not None:
            logs.discard(event_log)

    def empty(self) -> bool:
        """True when no log is followed any more (closed, unsubscribed or dropped)."""
        for sid in [sid for sid, group in self.logs.items() if not group]:
            del self.logs[sid]
        return not self.logs


class _Follower:
    """The process's follower threads and the logs they follow."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # the threads do not survive a fork

    def _reset(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._logs: weakref.WeakSet[EventLog] = weakref.WeakSet()  # the polled ones
        self._watches: dict[int, _Watch] = {}  # by id(store); a watch holds its store
        self._fresh: weakref.WeakSet[EventLog] = weakref.WeakSet()  # newly listened for: look once
        self._thread: threading.Thread | None = None
        self._warned: weakref.WeakSet[EventLog] = weakref.WeakSet()

    def follow(self, event_log: EventLog) -> None:
        store = event_log.store
        with self._cond:
            if callable(getattr(store, "watch_all", None)):
                watch = self._watches.get(id(store))
                if watch is None:
                    watch = self._watches[id(store)] = _Watch(store)
                    threading.Thread(target=self._listen, args=(watch,), name=f"agentkit-follower-listen {store!r}",
                                     daemon=True).start()
                watch.add(event_log)
                self._fresh.add(event_log)  # what was announced before it was followed: one head check
            else:
                self._logs.add(event_log)
            self._cond.notify_all()  # a first look now (and INTERVAL read afresh)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="agentkit-follower", daemon=True)
                self._thread.start()

    def unfollow(self, event_log: EventLog) -> None:
        with self._cond:
            self._logs.discard(event_log)
            watch = self._watches.get(id(event_log.store))
            if watch is not None:
                watch.discard(event_log)
                self._end_if_empty(watch)

    def _end_if_empty(self, watch: _Watch) -> None:
        """(Under the lock.) End ``watch``'s thread when it follows nothing any more."""
        if watch.empty() and self._watches.get(id(watch.store)) is watch:
            del self._watches[id(watch.store)]
            watch.cancel.cancel("nothing followed")

    def following(self) -> int:
        """How many logs are followed (for tests)."""
        with self._cond:
            return len(self._logs) + sum(len(group) for w in self._watches.values() for group in w.logs.values())

    # -- polling -----------------------------------------------------------------------

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            with self._cond:
                if self._thread is not me:
                    return  # replaced (after a fork)
                self._sweep()
                if not self._logs and not self._watches:
                    self._thread = None  # the next follow() starts another
                    return
                # weakly: a session dropped while another's store is slow to answer is
                # not kept alive by this loop (nor is its listening thread)
                refs = [weakref.ref(g) for g in (*self._logs, *self._fresh)]
                self._fresh.clear()
            for ref in refs:
                event_log = ref()
                if event_log is not None:
                    self._visit_all((event_log,))
                del event_log
                with self._cond:
                    self._sweep()
            del refs
            with self._cond:
                self._cond.wait(INTERVAL)

    def _sweep(self) -> None:
        """(Under the lock.) End the listening threads whose sessions were all dropped
        without close()."""
        for watch in list(self._watches.values()):
            self._end_if_empty(watch)

    def _visit_all(self, logs: Iterable[EventLog], announced: int | None = None) -> None:
        """Refresh each of ``logs`` that another process committed to: the ones behind
        the ``announced`` revision, or (None) whose stored head is not their revision."""
        for event_log in logs:
            if event_log.closed or event_log.failed is not None or not event_log.subs:
                self.unfollow(event_log)
            else:
                self._visit(event_log, announced)

    def _visit(self, event_log: EventLog, announced: int | None) -> None:
        try:
            if announced is None:
                head = current_head(event_log)
                behind = head is not None and head != event_log.revision
            else:
                behind = announced > event_log.revision
            if behind:
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

    # -- listening ---------------------------------------------------------------------

    def _listen(self, watch: _Watch) -> None:
        """One store's listening thread: refresh the followed sessions it announces."""
        try:
            for session_id, revision in watch.store.watch_all(watch.cancel, poll_interval=LISTEN_CHECK):
                with self._cond:
                    if session_id == "*":  # (again) listening: what was missed is seen by a head check
                        logs = [g for group in watch.logs.values() for g in group]
                    else:
                        logs = list(watch.logs.get(session_id, ()))
                if session_id == "*":
                    self._visit_all(logs)
                elif revision is not None:  # (None: deleted)
                    self._visit_all(logs, revision)
                del logs  # no log is held while waiting
        except Exception as exc:  # noqa: BLE001 - poll instead of following nothing
            with self._cond:
                if self._watches.get(id(watch.store)) is not watch:
                    return
                del self._watches[id(watch.store)]
                orphans = [g for group in watch.logs.values() for g in group]
                self._logs.update(orphans)
            log.warning("%r: cannot listen for other processes' commits (%s: %s); polling its %d followed "
                        "session(s) instead", watch.store, type(exc).__name__, exc, len(orphans))
        finally:
            with self._cond:
                if self._watches.get(id(watch.store)) is watch:  # the store closed
                    del self._watches[id(watch.store)]


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
