"""SessionPool: one live Session per session id per process, shared by concurrent
requests of a web app (Flask, Django, FastAPI) or any other server.

A web request should not open its own Session: two requests of one conversation would
hold two objects over one log, and one of them would meet a
:class:`~agentkit.errors.StoreConflictError`. The pool opens a session on first use,
hands the same object to every request of that id, and closes it when it has been idle
for ``idle_timeout`` seconds or when more than ``max_open`` are open (least recently used
first; a session in use is never closed under a caller).

Several processes (gunicorn or uvicorn workers) may each hold a pool over one store: a
session that finds another process appended first catches up and decides its command
again on the new state (as every store-backed :class:`~agentkit.Session` does), so pool
callers never see ``StoreConflictError`` for that case, and a stale decision (approving a
request another worker denied) gets its documented error. :meth:`~agentkit.Session.ask`
and :meth:`~agentkit.Session.generate` take the store's turn lock, so turns of one
conversation run one at a time across processes.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import ConfigurationError, SessionClosedError
from ..stores.base import EventStore, validate_session_id
from ._session import Session

__all__ = ["SessionPool"]

SessionFactory = Callable[[str], "dict[str, Any]"]


class _Entry:
    __slots__ = ("session", "leases", "last_used", "opening")

    def __init__(self) -> None:
        self.session: Session[Any, Any] | None = None
        self.leases = 0
        self.last_used = time.monotonic()
        self.opening = threading.Lock()


class SessionPool:
    """Open sessions of one store, one per session id (see the module docstring).

    ``factory(session_id)`` returns the :class:`~agentkit.Session` keyword arguments for
    that id (``model``, ``tools``, ``system``...); they are added to ``session_kwargs``,
    the arguments every session gets. ``max_open`` bounds how many sessions stay open;
    ``idle_timeout`` (seconds, or None) closes a session nobody used for that long.

    Use ``with pool.session(session_id) as s:`` around a request's work: the session is
    not closed while the block runs. :meth:`get` returns the session without that
    guarantee (a session evicted meanwhile raises ``SessionClosedError``; get it again).
    """

    def __init__(
        self,
        store: EventStore,
        *,
        factory: SessionFactory | None = None,
        max_open: int = 1000,
        idle_timeout: float | None = 600.0,
        **session_kwargs: Any,
    ) -> None:
        if not isinstance(max_open, int) or isinstance(max_open, bool) or max_open < 1:
            raise ConfigurationError(f"SessionPool max_open must be an int >= 1, got {max_open!r}")
        if idle_timeout is not None and (
            not isinstance(idle_timeout, (int, float)) or isinstance(idle_timeout, bool) or not idle_timeout > 0
        ):
            raise ConfigurationError(
                f"SessionPool idle_timeout must be a number of seconds > 0 (or None: never), got {idle_timeout!r}"
            )
        if factory is not None and not callable(factory):
            raise ConfigurationError(
                "SessionPool factory must be a callable factory(session_id) -> dict of Session kwargs"
            )
        for name in ("store", "session_id", "events"):
            if name in session_kwargs:
                raise ConfigurationError(f"SessionPool does not take {name}=: the pool sets it for each session")
        self.store = store
        self._factory = factory
        self._max_open = max_open
        self._idle_timeout = idle_timeout
        self._kwargs = session_kwargs
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._closed = False
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None
        if idle_timeout is not None:
            self._reaper = threading.Thread(target=self._reap, name="agentkit-pool-reaper", daemon=True)
            self._reaper.start()

    # -- use ---------------------------------------------------------------------------

    def get(self, session_id: str) -> Session[Any, Any]:
        """The open session ``session_id`` (opened from the store, or started there,
        on first use)."""
        with self._lease(session_id) as session:
            return session

    @contextmanager
    def session(self, session_id: str) -> Iterator[Session[Any, Any]]:
        """``with pool.session(id) as s:`` -- the session, kept open for the block."""
        with self._lease(session_id) as session:
            yield session

    @property
    def open_ids(self) -> list[str]:
        """The ids of the open sessions, least recently used first."""
        with self._lock:
            return [sid for sid, e in self._entries.items() if e.session is not None]

    @contextmanager
    def _lease(self, session_id: str) -> Iterator[Session[Any, Any]]:
        validate_session_id(session_id)
        with self._lock:
            if self._closed:
                raise SessionClosedError("the SessionPool is closed; create a new one")
            entry = self._entries.get(session_id)
            if entry is None:
                entry = self._entries[session_id] = _Entry()
            self._entries.move_to_end(session_id)
            entry.leases += 1
            entry.last_used = time.monotonic()
        try:
            session = self._open(session_id, entry)
        except BaseException:
            self._release(session_id, entry, forget=True)
            raise
        try:
            yield session
        finally:
            self._release(session_id, entry)
            self._evict_over_limit()

    def _open(self, session_id: str, entry: _Entry) -> Session[Any, Any]:
        with entry.opening:  # one open per id; other ids open at the same time
            if entry.session is not None and not entry.session.closed:
                return entry.session  # (one its user closed is opened again)
            kwargs = dict(self._kwargs)
            if self._factory is not None:
                extra = self._factory(session_id)
                if not isinstance(extra, dict):
                    raise ConfigurationError(
                        f"SessionPool factory({session_id!r}) must return a dict of Session keyword "
                        f"arguments, not {type(extra).__name__}"
                    )
                kwargs.update(extra)
            session = Session.open(session_id, store=self.store, **kwargs)
            entry.session = session
            return session

    def _release(self, session_id: str, entry: _Entry, *, forget: bool = False) -> None:
        with self._lock:
            entry.leases -= 1
            entry.last_used = time.monotonic()
            if forget and entry.leases == 0 and self._entries.get(session_id) is entry:
                if entry.session is None or entry.session.closed:
                    del self._entries[session_id]

    # -- closing -----------------------------------------------------------------------

    def _evict_over_limit(self) -> None:
        self._close_where(lambda entries: len(entries) > self._max_open, idle_for=None)

    def _reap(self) -> None:
        assert self._idle_timeout is not None
        period = min(self._idle_timeout / 2, 30.0)
        while not self._stop.wait(period):
            self._close_where(lambda entries: True, idle_for=self._idle_timeout)

    def _close_where(self, more: Callable[[OrderedDict[str, _Entry]], bool], *, idle_for: float | None) -> None:
        victims: list[Session[Any, Any]] = []
        now = time.monotonic()
        with self._lock:
            for sid, entry in list(self._entries.items()):  # least recently used first
                if not more(self._entries):
                    break
                if idle_for is not None and now - entry.last_used < idle_for:
                    continue  # used lately (a long lease ends later than it started)
                session = entry.session
                if entry.leases or (session is not None and session._gate.queue):
                    continue  # in use: never closed under a caller
                del self._entries[sid]
                if session is not None:
                    victims.append(session)
        for session in victims:
            session.close()

    def close(self) -> None:
        """Close every open session (running generations are cancelled) and refuse
        further use. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            entries, self._entries = list(self._entries.values()), OrderedDict()
        self._stop.set()
        for entry in entries:
            if entry.session is not None:
                entry.session.close()

    def __enter__(self) -> SessionPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<SessionPool {len(self.open_ids)} open, max_open={self._max_open}, store={self.store!r}>"
