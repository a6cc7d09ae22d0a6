"""The read side of a session's event log (private): what it folds from its events and how
it catches up with other writers.

:class:`FoldedLog` is the base of :class:`~agentkit.session._eventlog.EventLog` that holds the
state folded from the committed events -- the transaction ledger, the incremental projection
(with a checkpoint and the index of where each generation's events begin), the approval
state -- and keeps it current: :meth:`~FoldedLog._fold` after each commit (a transaction
changing state re-projects from its first event, from a copy of the projection taken before
it), :meth:`~FoldedLog.refresh` to load what other processes committed (only the new tail
when the store can read it, else a full load, rebuilding when the stored log was rewritten),
and the reads the loop and the Session make (``project``, ``keep_visible``, ``is_hidden``,
``approval_state``...). Commits, decisions and fencing are in
:mod:`agentkit.session._eventlog`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ..approvals._policy import ApprovalState
from ..context._projection import Projector, RuntimeRenderer
from ..errors import SessionClosedError, SessionFailedError
from ..events import ControlEvent, Event
from ..messages import Message
from ..stores.base import EventStore
from ..transactions._ledger import TransactionLedger
from ._subscriptions import Subscription

__all__ = ["FoldedLog"]


class FoldedLog:
    """The committed events of one session and what is folded from them (see the module
    docstring); :class:`~agentkit.session._eventlog.EventLog` builds the state and commits."""

    session_id: str | None
    lock: threading.RLock
    closed: bool
    failed: BaseException | None
    subs: list[Subscription]  # listeners hear what a refresh loads too
    _store: EventStore | None
    _events: list[Event]
    _ids: set[str]
    _seq: int
    _revision: int
    _render_runtime: RuntimeRenderer | None
    ledger: TransactionLedger
    projector: Projector
    # where each generation id's events begin in the log, and a copy of the projection
    # taken before the events of any transaction still open (see _fold)
    _first: dict[str, int]
    _checkpoint: Projector | None
    _approvals: ApprovalState

    def check_usable(self) -> None:
        """Raise SessionFailedError after a failed append, SessionClosedError after close."""
        if self.failed is not None:
            raise SessionFailedError(
                f"session {self.session_id!r} refuses work: an earlier append to its store "
                f"failed ({self.failed}). Reopen it with Session.open to continue from "
                f"what is durable."
            ) from self.failed
        if self.closed:
            raise SessionClosedError("the session is closed; open a new one to continue")

    def _caught_up(self) -> bool:
        """Load what other writers committed when the store's head moved; True when
        this log changed."""
        if not self.behind():
            return False
        before = self._revision
        self.refresh()
        return self._revision != before

    def behind(self) -> bool:
        """True when the store's head is past this log's revision (another process
        committed or compacted): one cheap ``store.head`` call, no events read."""
        store, sid = self._store, self.session_id
        if store is None or sid is None:
            return False
        head = getattr(store, "head", None)
        if head is None:  # a store written before the port had head(): load to know
            return True
        return (head(sid) or 0) != self._revision

    def sync(self) -> None:
        """Catch up with the store when its head moved (what a read calls first). The
        head check is made outside the lock, so a read never waits behind a slow
        append just to learn it is current; the lock is taken only to load."""
        if self.closed or self.failed is not None or not self.behind():
            return
        with self.lock:
            if not self.closed and self.failed is None:
                self.refresh()

    def _replace_events(self, events: list[Event]) -> None:
        """Hold ``events`` (the stored active log, a tail of this one) and project them
        afresh. The transaction ledger and the approval state keep what they folded from
        the events removed (their fold does not depend on the list)."""
        self._approvals.catch_up(self._events)  # fold what is about to leave the list
        removed = len(self._events) - len(events)
        self._events = events
        self._ids = {e.id for e in events}
        self._approvals.count = max(0, self._approvals.count - removed)
        self._reset_projection()
        self.projector.extend(events)

    def _reset_projection(self) -> None:
        """A new, empty projection of this log (and the generation index rebuilt)."""
        self.projector = Projector(self._render_runtime, hidden=self.ledger.hidden)
        self._checkpoint = None
        first: dict[str, int] = {}
        for i, ev in enumerate(self._events):
            gid = ev.generation_id
            if gid is not None and gid not in first:
                first[gid] = i
        self._first = first

    def _fold(self, events: Sequence[Event], *, live: bool = False) -> None:
        """Fold ``events`` (just added to the log) into the ledger. When a transaction
        changed state, what the model may see changed: the projection is rebuilt from the
        first event of the transactions that changed, not from the start of the log."""
        start = len(self._events) - len(events)
        first = self._first
        for i, ev in enumerate(events):
            gid = ev.generation_id
            if gid is not None and gid not in first:
                first[gid] = start + i
        before = self.ledger.version
        self.ledger.apply(events, live=live)
        if self.ledger.version == before:
            return
        changed = {ev.generation_id for ev in events if isinstance(ev, ControlEvent) and ev.generation_id}
        since = min((first[g] for g in changed if g in first), default=0)
        self._reproject_from(since)

    def _reproject_from(self, since: int) -> None:
        """Make the projection right after the visibility of events from index ``since``
        on changed. A copy of the projection before the first event of any open
        transaction (the checkpoint) is reused, so accepting a transaction replays its
        own events, not the whole log. Events before a checkpoint belong to finished
        transactions (or none), whose visibility never changes again."""
        checkpoint = self._checkpoint
        if checkpoint is not None and checkpoint.count > since:
            checkpoint = self._checkpoint = None  # it showed events whose answer changed
        projector = self.projector
        if projector.count <= since:
            # nothing it applied changed: it goes on, asking the ledger as it goes; the
            # checkpoint moves up to here when no open transaction began earlier
            stale = checkpoint is None or checkpoint.count < since
            if stale and all(self._first.get(g, 0) >= since for g in self.ledger.open_generations()):
                projector.extend(self._events[projector.count:since])
                self._checkpoint = projector.copy()
            return
        if checkpoint is None:
            rebuilt = Projector(self._render_runtime, hidden=self.ledger.hidden)
            rebuilt.extend(self._events[:since])
            if all(self._first.get(g, 0) >= since for g in self.ledger.open_generations()):
                self._checkpoint = rebuilt.copy()
            self.projector = rebuilt
        else:
            self.projector = checkpoint.copy()

    def refresh(self) -> list[Event]:
        """Load what other writers committed to the store since this log's revision;
        returns the new events (also handed to listeners). When the stored log no longer
        continues this one (another process compacted it), the log and its projection are
        rebuilt from the store."""
        with self.lock:
            self.check_usable()
            if self._store is None or self.session_id is None:
                return []
            tail = self._tail()
            if tail is not None:  # only what was appended since: no full read
                revision, new = tail
                if new:
                    self._events.extend(new)
                    self._ids.update(e.id for e in new)
                    self._fold(new)
                    self._seq = new[-1].seq
                self._revision = revision
                for sub in list(self.subs):
                    sub.offer(new)
                return new
            stored = self._store.load(self.session_id)
            if stored is None or stored.revision == self._revision:
                return []
            events = list(stored.events)
            last = self._events[-1] if self._events else None
            continues = last is None or any(e.id == last.id and e.seq == last.seq for e in events)
            if continues:
                new = [e for e in events if e.seq > self._seq]
                self._events.extend(new)
                self._ids.update(e.id for e in new)
                self._fold(new)
            else:  # rewritten elsewhere: start over from what is durable
                new = [e for e in events if e.id not in self._ids]
                self._events = events
                self._ids = {e.id for e in events}
                self.ledger = TransactionLedger(events)
                self._reset_projection()
                self._approvals = ApprovalState()
            self._seq = max((e.seq for e in self._events), default=0)
            self._revision = stored.revision
            for sub in list(self.subs):
                sub.offer(new)
            return new

    def _tail(self) -> tuple[int, list[Event]] | None:
        """``(revision, events appended after this log's revision)`` when the store can
        read just those (``load_after``) and they plainly continue this log: each
        revision step one appended event, numbered on from this log's last ``seq``, none
        already held. Otherwise None: a compaction or rewrite elsewhere, or a store
        without ``load_after``, is caught up from a full :meth:`EventStore.load`."""
        load_after = getattr(self._store, "load_after", None)
        if load_after is None or not self._events or self.session_id is None:
            return None
        found = load_after(self.session_id, self._revision)
        if found is None:
            return None
        revision, events = found
        seqs = [e.seq for e in events]
        if (revision - self._revision != len(events) or seqs != list(range(self._seq + 1, self._seq + 1 + len(seqs)))
                or any(e.id in self._ids for e in events)):
            return None
        return int(revision), list(events)

    def project(self, *, for_model: bool = True) -> tuple[list[Message], dict[str, str], int]:
        """The messages (the model's view, or the plain conversation), the tool calls
        still waiting for results, and the seq of the last event they were built from."""
        with self.lock:
            p = self.projector
            p.catch_up(self._events)
            return p.model_view(job_status=for_model), p.pending_tool_calls, p.last_seq

    def keep_visible(self, event: Event) -> bool:
        """True for an event a compaction must not cover: an event of a transaction not
        yet finished. (An execution intent still without a result is covered and carried:
        see :mod:`agentkit._held`.)"""
        gid = event.generation_id
        return gid is not None and gid in self.ledger.open_generations()

    def is_hidden(self, event: Event) -> bool:
        """True when the model does not see ``event`` (a rejected or interrupted transaction's)."""
        gid = event.generation_id
        return gid is not None and self.ledger.hidden(gid)

    def projection_of(self, events: Sequence[Event]) -> list[Message]:
        """The plain conversation ``events`` project to (with this log's runtime renderer)."""
        projector = Projector(self._render_runtime, hidden=self.ledger.hidden)
        projector.extend(events)
        return projector.model_view(job_status=False)

    def approval_state(self) -> ApprovalState:
        """The approval state folded from the events so far (incrementally). Read it
        under :attr:`lock` when a decision must not race a commit."""
        with self.lock:
            self._approvals.catch_up(self._events)
            return self._approvals

    def follow_up_waiting(self) -> bool:
        """True when a follow-up message comes after the last answer."""
        with self.lock:
            self.projector.catch_up(self._events)
            return self.projector.follow_up_waiting
