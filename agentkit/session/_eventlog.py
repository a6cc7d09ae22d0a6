"""A session's event log: numbered commits, durable appends, projection, listeners (private).

:class:`EventLog` is the state a :class:`~agentkit.Session` is a facade over, and what
the step loop talks to (through :class:`~agentkit._loop.LoopHost`): ``commit`` numbers
events (``seq`` 1, 2, ...), appends them to the store when there is one (compare-and-swap
on the store revision) and hands them to listeners only after they are durable;
``project`` brings the incremental projection up to date; ``ledger`` folds transaction
and intent state from the same commits (:mod:`agentkit.transactions`), and a change of a
transaction's state starts the projection again, since it changes which events the model
may see (that fold, catching up with other writers and the reads are
:mod:`agentkit.session._catchup`'s :class:`~agentkit.session._catchup.FoldedLog`, its base).
One re-entrant lock orders commits and reads.

Every write is a decision (:meth:`EventLog.decide`): a function of the state this log
holds that returns the events to append, appended with compare-and-swap on the revision
it was decided at. When another process appended first (a stale revision writes
nothing), the log catches up (``refresh``) and decides *again* on the new state, which
may now refuse the command with its documented error
(:class:`~agentkit.errors.ApprovalError`, :class:`~agentkit.errors.TransactionError`) or
find it already done (no events). A refusal is only trusted on current state: when the
store's head moved, the log catches up and decides again before raising it. A plain
commit (a user message, a runtime event) is a decision whose premise always holds, so it
always succeeds after catching up. An unreachable database server
(:class:`~agentkit.errors.StoreUnavailableError`) leaves the log usable too. Any other
failed append marks the log failed: it then refuses every commit, since what is durable
is no longer known to be what this object holds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from ..approvals._policy import ApprovalState
from ..context._projection import Projector, RuntimeRenderer
from ..errors import (
    ApprovalError,
    ConfigurationError,
    InputError,
    SessionClosedError,
    SessionFailedError,
    StoreConflictError,
    StoreUnavailableError,
    TransactionError,
    TurnLockLostError,
)
from ..events import Event, _storable_problem
from ..stores.base import EventStore, TurnLease
from ..transactions._ledger import TransactionLedger
from ._catchup import FoldedLog
from ._follow import follow, unfollow
from ._subscriptions import Listener, Subscription, Unsubscribe

__all__ = ["EventLog"]

log = logging.getLogger("agentkit.session")

_T = TypeVar("_T")

DECIDE_ATTEMPTS = 100
"""How many times a decision is made again after other processes appended first, before
the :class:`~agentkit.errors.StoreConflictError` is let through (each attempt catches up
first, so only a store that other writers never stop appending to reaches it)."""


class EventLog(FoldedLog):
    """The committed events of one session (see the module docstring); what is folded from
    them and catching up with other writers are its base's (:class:`FoldedLog`)."""

    def __init__(
        self,
        *,
        session_id: str | None,
        store: EventStore | None,
        revision: int,
        render_runtime: RuntimeRenderer | None,
        listener_queue_size: int,
        listener_timeout: float,
        listener_join_seconds: float,
    ) -> None:
        self.session_id = session_id
        self.lock = threading.RLock()
        self._store = store
        self._events = []
        self._ids = set()
        self._seq = 0
        self._revision = revision
        self._render_runtime = render_runtime
        self.ledger = TransactionLedger()
        self.projector = Projector(render_runtime, hidden=self.ledger.hidden)
        self._first = {}
        self._checkpoint = None
        self._approvals = ApprovalState()
        self.subs = []
        self._closing: list[Subscription] = []
        self._listener_queue_size = listener_queue_size
        self._listener_timeout = listener_timeout
        self._join_seconds = listener_join_seconds
        self.closed = False
        self.failed = None
        self._lease: TurnLease | None = None
        self._lease_thread: int | None = None

    # -- state -------------------------------------------------------------------------

    @property
    def events(self) -> tuple[Event, ...]:
        """A snapshot of all committed events, in commit order."""
        with self.lock:
            return tuple(self._events)

    @property
    def revision(self) -> int:
        """The store revision of the last commit (0 without a store)."""
        return self._revision

    @property
    def durable(self) -> bool:
        """True when commits go to a store (execution intents are written then)."""
        return self._store is not None

    def __len__(self) -> int:
        return len(self._events)

    # -- writing -----------------------------------------------------------------------

    def load_committed(self, events: Sequence[Event], *, revision: int) -> None:
        """Take events that are already durable (restored from the store at
        ``revision``) as they are."""
        with self.lock:
            self._revision = revision
            self._events.extend(events)
            self._ids.update(e.id for e in events)
            self._seq = max((e.seq for e in events), default=0)
            self._fold(events)

    def commit(self, events: Sequence[Event]) -> list[Event]:
        """Number ``events``, make them durable, then tell listeners; returns them with
        their ``seq``. Nothing is committed when any of them is refused. A decision whose
        premise always holds (see :meth:`decide`): when another process appended first,
        the events follow what it committed."""
        batch = list(events)
        return self.decide(lambda: batch)

    def decide(self, decide: Callable[[], Sequence[Event]]) -> list[Event]:
        """Run ``decide()`` under the lock on this log's state and commit the events it
        returns (none: nothing to do), with compare-and-swap on the revision it read.
        When another process appended first, catch up and run ``decide()`` again on the
        new state; when it refuses (ApprovalError, TransactionError) and the store's
        head moved, catch up and ask it again. Returns the committed events."""
        return self.fenced(lambda: self._commit_locked(decide()))

    def decide_in_turn(self, decide: Callable[[], Sequence[Event]], *,
                       turn: TurnLease | None = None) -> list[Event]:
        """:meth:`decide`, with the appends fenced by the turn lock this log holds from
        whichever thread commits: a tool's journaled step or question, decided on a
        worker thread while the generation holds the turn, is refused once the turn was
        lost to another process. ``turn``: the lease to fence with (:attr:`turn` when
        the call started), so a call still running after its generation ended (a
        cancelled parallel call) is refused too, not committed outside its turn."""
        return self.fenced(lambda: self._commit_locked(decide(), in_turn=True, turn=turn))

    @property
    def turn(self) -> TurnLease | None:
        """The turn lock lease held now (by the thread that runs the generation), or None."""
        return self._lease

    def fenced(self, attempt: Callable[[], _T]) -> _T:
        """Run ``attempt()`` (a decision and its compare-and-swap write) under the lock
        until no other writer got there first (the module docstring's rule); the one
        loop every decision of this log goes through."""
        with self.lock:
            attempts = 1
            while True:
                self.check_usable()
                try:
                    return attempt()
                except StoreConflictError:
                    if attempts == DECIDE_ATTEMPTS:
                        raise
                    self.refresh()  # decide again on what the other writers committed
                except (ApprovalError, TransactionError, InputError):
                    if attempts == DECIDE_ATTEMPTS or not self._caught_up():
                        raise  # refused on current state
                attempts += 1

    def _commit_locked(self, events: Sequence[Event], *, in_turn: bool = False,
                       turn: TurnLease | None = None) -> list[Event]:
        if not events:
            return []
        committed = self._numbered(events)
        if self._store is not None:
            self._append(committed, in_turn=in_turn, turn=turn)
        self._events.extend(committed)
        self._ids.update(e.id for e in committed)
        self._seq = committed[-1].seq
        self._fold(committed, live=True)
        # a copy: offer() may remove a listener that fell behind or stalled, and the
        # ones after it must still hear this commit
        for sub in list(self.subs):
            sub.offer(committed)
        return committed

    def _numbered(self, events: Sequence[Event]) -> list[Event]:
        """``events`` with the next seq numbers, refused before anything is written when
        one is already committed or is not strict JSON."""
        seq = self._seq
        committed: list[Event] = []
        batch: set[str] = set()
        for ev in events:
            if ev.id in self._ids or ev.id in batch:
                raise ConfigurationError(
                    f"event {ev.id!r} is already committed in this session (or given twice); "
                    f"events are immutable records: create a new event to say something new"
                )
            batch.add(ev.id)
            problem = _storable_problem(ev)
            if problem is not None:  # refused before anything is committed
                raise ConfigurationError(
                    f"cannot commit {ev.type} event {ev.id!r}: it is not strict JSON ({problem}). "
                    f"Nothing was committed. Use plain JSON: dicts with string keys, lists, "
                    f"strings, finite numbers, true, false and null."
                )
            seq += 1
            committed.append(ev.with_seq(seq))
        return committed

    @contextmanager
    def holding(self, lease: TurnLease) -> Iterator[None]:
        """Make the appends of this thread carry ``lease`` (a held turn lock) for the
        block: the store refuses them once the lease is lost (fencing)."""
        with self.lock:
            before = self._lease, self._lease_thread
            self._lease, self._lease_thread = lease, threading.get_ident()
        try:
            yield
        finally:
            with self.lock:
                self._lease, self._lease_thread = before

    @property
    def turn_held_here(self) -> bool:
        """True on the thread that holds this session's turn lock."""
        return self._lease is not None and self._lease_thread == threading.get_ident()

    def _append(self, committed: list[Event], *, in_turn: bool = False, turn: TurnLease | None = None) -> None:
        assert self._store is not None
        held = self.turn_held_here or (in_turn and self._lease is not None)
        fenced: dict[str, Any] = {"lease": turn} if turn is not None else {"lease": self._lease} if held else {}
        try:
            self._revision = self._store.append(
                self.session_id,  # type: ignore[arg-type]
                committed,
                expected_revision=self._revision,
                **fenced,
            )
        except (StoreConflictError, ConfigurationError, TurnLockLostError):
            raise  # nothing was written (a stale revision, a lost turn lock, or refused before any side effect)
        except StoreUnavailableError:
            # the server was unreachable; whatever became of the append, this object
            # is unchanged and compare-and-swap guards the next one: refresh() loads
            # what is durable (these events too, if they were written after all)
            raise
        except BaseException as exc:
            self.failed = exc
            log.error("session %r: append to its store failed (%s: %s); the session refuses "
                      "further work until it is reopened", self.session_id, type(exc).__name__, exc)
            raise SessionFailedError(
                f"could not append to the store of session {self.session_id!r}: "
                f"{type(exc).__name__}: {exc}. Nothing after revision "
                f"{self._revision} was committed; this session object refuses further "
                f"work. Fix the cause, then Session.open it again."
            ) from exc

    @property
    def store(self) -> EventStore | None:
        """The store, or None for an in-memory session."""
        return self._store

    def prune_through(self, event_id: str, archive_id: str) -> int:
        """Archive the active log's events up to and including ``event_id`` under
        ``archive_id``, then remove them from the active log (both through the store);
        return how many were removed (0 when ``event_id`` is no longer in the log).

        The order makes a crash harmless: the archive is written first (archiving the
        same events again is a no-op), and the store's compare-and-swap ``compact``
        removes them all or none, so running it again after a restart finishes the job
        with nothing lost and nothing archived twice."""
        store = self._store
        if store is None:
            raise ConfigurationError("only a session with a store can archive events")
        sid = self.session_id
        assert sid is not None

        def attempt() -> int:
            # decided on the stored log, not this object's copy: another process may have
            # appended or pruned it already
            stored = store.load(sid)
            events = list(stored.events) if stored is not None else []
            if stored is not None and stored.revision != self._revision:
                raise StoreConflictError(
                    f"session {sid!r} is at revision {stored.revision} in the store, this object "
                    f"at {self._revision}: another process wrote it meanwhile",
                    expected_revision=self._revision,
                    actual_revision=stored.revision,
                )
            index = next((i for i, e in enumerate(events) if e.id == event_id), None)
            if index is None:
                return 0  # pruned already (by another process, or before a crash)
            covered = events[: index + 1]
            store.archive(sid, archive_id, covered)
            self._revision = store.compact(sid, archive_id, expected_revision=self._revision, remove=len(covered))
            self._replace_events(events[index + 1 :])
            return len(covered)

        return self.fenced(attempt)

    # -- listeners ---------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Unsubscribe:
        """Deliver every event committed from now on to ``listener`` (see
        :meth:`agentkit.Session.subscribe`); returns the unsubscribe function."""
        if not callable(listener):
            raise ConfigurationError("subscribe() needs a callable listener(event)")

        def remove(sub: Subscription) -> None:
            with self.lock:
                if sub in self.subs:
                    self.subs.remove(sub)
                if not self.subs:
                    unfollow(self)

        with self.lock:
            if self.closed:  # its delivery thread would wait forever for events
                raise SessionClosedError("the session is closed; subscribe to an open session")
            sub = Subscription(
                listener,
                max_queue=self._listener_queue_size,
                timeout=self._listener_timeout,
                on_remove=remove,
            )
            self.subs.append(sub)
            if self._store is not None:
                follow(self)  # what other processes commit reaches the listener too

        def unsubscribe(*, drain: bool = False, timeout: float = self._join_seconds) -> None:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
                raise ConfigurationError(f"unsubscribe(timeout=) must be a number of seconds >= 0, got {timeout!r}")
            remove(sub)
            sub.close(drain=bool(drain))  # drain=False: not called again, not even for events queued
            sub.join(time.monotonic() + timeout)  # the queue delivered (drain) or a call in flight ended

        return unsubscribe

    def close(self) -> bool:
        """Refuse further commits; False when already closed. Listeners still get what
        is queued for them: call :meth:`drain_listeners` outside other locks."""
        with self.lock:
            if self.closed:
                return False
            self.closed = True
            self._closing, self.subs = list(self.subs), []
            unfollow(self)
            return True

    def drain_listeners(self) -> None:
        """Deliver what closed listeners have queued, waiting at most
        ``listener_join_seconds`` in all."""
        subs, self._closing = self._closing, []
        for sub in subs:
            sub.close()
        # one shared bound, so stalled listeners cannot make close() take long
        deadline = time.monotonic() + self._join_seconds
        for sub in subs:
            sub.join(deadline)
