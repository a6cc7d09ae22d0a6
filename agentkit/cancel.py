"""Cooperative cancellation shared by model calls, retries, tools and jobs."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

from .errors import CancelledError


class CancelToken:
    """A thread-safe cancellation flag.

    ``cancel(reason)`` sets it; ``cancelled`` reads it; ``raise_if_cancelled()`` raises
    :class:`~agentkit.errors.CancelledError`; ``wait(timeout)`` sleeps until cancelled
    (returns True) or the timeout passes (False). A :meth:`child` token is cancelled
    with its parent but can also be cancelled alone.
    """

    __slots__ = ("_event", "_reason", "_children", "_callbacks", "_lock", "__weakref__")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason: str | None = None
        self._children: weakref.WeakSet[CancelToken] = weakref.WeakSet()
        self._callbacks: list[Callable[[], object]] = []
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        """True once this token (or an ancestor) was cancelled."""
        return self._event.is_set()

    def is_set(self) -> bool:
        """The same as :attr:`cancelled`, so a token can stand where a ``threading.Event`` is read."""
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        """The reason given to :meth:`cancel`, if any."""
        return self._reason

    def cancel(self, reason: str | None = None) -> None:
        """Cancel this token and every child. Idempotent; the first reason wins."""
        with self._lock:
            if self._event.is_set():
                return
            self._reason = reason or "cancelled"
            self._event.set()
            children = list(self._children)
            callbacks, self._callbacks = self._callbacks, []
        # no lock is held here: a callback may take its own locks
        for callback in callbacks:
            callback()
        for child in children:
            child.cancel(reason)

    def _on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback()`` once when this token is cancelled (at once when it already
        is); returns a function that forgets it. Private: the runtime uses it to wake
        waits that must end on cancellation."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)

                def remove() -> None:
                    with self._lock:
                        if callback in self._callbacks:
                            self._callbacks.remove(callback)

                return remove
        callback()
        return lambda: None

    def raise_if_cancelled(self) -> None:
        """Raise :class:`CancelledError` when cancelled."""
        if self._event.is_set():
            raise CancelledError(self._reason)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until cancelled or ``timeout`` seconds pass; True when cancelled."""
        return self._event.wait(timeout)

    def child(self) -> CancelToken:
        """A new token cancelled whenever this one is."""
        token = CancelToken()
        with self._lock:
            if not self._event.is_set():
                self._children.add(token)
                return token
        token.cancel(self._reason)
        return token

    def link(self, child: CancelToken) -> None:
        """Make an existing token ``child`` also a child of this one (a token may have
        several parents: it is cancelled when any of them is)."""
        with self._lock:
            if not self._event.is_set():
                self._children.add(child)
                return
        child.cancel(self._reason)

    def __repr__(self) -> str:
        state = f"cancelled: {self._reason}" if self.cancelled else "active"
        return f"<CancelToken {state}>"
