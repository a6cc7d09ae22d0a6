"""Bounded concurrent runs (private): ``max_concurrent_runs``, ``active_runs`` and a
close that drains.

A :class:`RunLimiter` hands out slots. A run takes one for as long as it runs
(:meth:`RunLimiter.slot`, a context manager: the slot is given back however the run ends,
by returning, raising or being cancelled); over the cap it waits, first come first
served, until a slot is free, its own :class:`~agentkit.CancelToken` is cancelled, or the
limiter's ``queue_timeout`` passes (:class:`~agentkit.errors.RunLimitTimeout`). Without a
cap it only counts.

:meth:`RunLimiter.close` drains: from then on new runs and runs still waiting for a slot
are refused (the owner's closed error), and the running ones are waited for up to a
timeout; those still running then are cancelled through the token their slot gave them,
and their number is returned.

An :class:`~agentkit.Agent` has one (shared by its ``with_options`` copies) and so has a
:class:`~agentkit.Session` (its generations: one runs, the rest queue at its gate).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..cancel import CancelToken
from ..errors import ConfigurationError, RunLimitTimeout

__all__ = ["RunLimiter", "check_limits"]


def check_limits(owner: str, max_concurrent_runs: object, queue_timeout: object) -> None:
    """Refuse a bad ``max_concurrent_runs`` or ``queue_timeout``, saying what to pass."""
    if max_concurrent_runs is not None and (
        isinstance(max_concurrent_runs, bool) or not isinstance(max_concurrent_runs, int) or max_concurrent_runs < 1
    ):
        raise ConfigurationError(
            f"{owner}(max_concurrent_runs=...) must be an int >= 1, or None for no cap; got {max_concurrent_runs!r}"
        )
    if queue_timeout is not None and (
        isinstance(queue_timeout, bool) or not isinstance(queue_timeout, (int, float)) or not queue_timeout > 0
    ):
        raise ConfigurationError(
            f"{owner}(queue_timeout=...) must be a number of seconds > 0, or None to wait for a slot "
            f"as long as it takes; got {queue_timeout!r}"
        )


class RunLimiter:
    """Slots for at most ``limit`` runs at once (None: no cap); see the module docstring.

    ``owner`` names what is limited in messages (``"Agent"``, ``"Session"``);
    ``closed_error(message)`` builds the error a refused run raises.
    """

    def __init__(self, owner: str, limit: int | None, queue_timeout: float | None,
                 closed_error: Callable[[str], Exception]) -> None:
        check_limits(owner, limit, queue_timeout)
        self._owner = owner
        self._limit = limit
        self._queue_timeout = queue_timeout
        self._closed_error = closed_error
        self._cond = threading.Condition(threading.Lock())
        self._running: dict[CancelToken, None] = {}  # each running run's token, in start order
        self._waiting: deque[object] = deque()  # tickets of the runs waiting for a slot
        self._closing: str | None = None

    @property
    def limit(self) -> int | None:
        """The cap (None: no cap)."""
        return self._limit

    @property
    def active(self) -> int:
        """How many runs hold a slot now."""
        with self._cond:
            return len(self._running)

    @property
    def waiting(self) -> int:
        """How many runs wait for a slot now."""
        with self._cond:
            return len(self._waiting)

    def check_open(self) -> None:
        """Raise the owner's closed error once :meth:`close` has begun."""
        with self._cond:
            self._refuse_if_closing()

    @contextmanager
    def slot(self, cancel: CancelToken | None) -> Iterator[CancelToken]:
        """Hold a slot for the block; yields the run's token (a child of ``cancel``,
        which :meth:`close` cancels when the run outlives its timeout)."""
        token = self._acquire(cancel)
        try:
            yield token
        finally:
            with self._cond:
                del self._running[token]
                self._cond.notify_all()

    def _acquire(self, cancel: CancelToken | None) -> CancelToken:
        ticket = object()
        deadline = None if self._queue_timeout is None else time.monotonic() + self._queue_timeout
        forget = cancel._on_cancel(self._wake) if cancel is not None else None
        try:
            with self._cond:
                self._waiting.append(ticket)
                try:
                    while True:
                        self._refuse_if_closing()
                        if cancel is not None:
                            cancel.raise_if_cancelled()
                        if self._waiting[0] is ticket and (self._limit is None or len(self._running) < self._limit):
                            break
                        remaining = None if deadline is None else deadline - time.monotonic()
                        if remaining is not None and remaining <= 0:
                            raise self._timeout()
                        self._cond.wait(remaining)
                finally:
                    self._waiting.remove(ticket)
                    self._cond.notify_all()  # the next waiter may go now
                token = CancelToken()
                if cancel is not None:
                    cancel.link(token)
                self._running[token] = None
                return token
        finally:
            if forget is not None:
                forget()

    def _refuse_if_closing(self) -> None:
        if self._closing is not None:
            raise self._closed_error(self._closing)

    def _timeout(self) -> RunLimitTimeout:
        return RunLimitTimeout(
            f"a run of this {self._owner} waited {self._queue_timeout:g} s (queue_timeout) for a slot and got none: "
            f"max_concurrent_runs={self._limit} runs were running all that time ({len(self._waiting)} waiting). "
            f"Retry later, or raise max_concurrent_runs or queue_timeout.",
            limit=self._limit, waited=self._queue_timeout,
        )

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def close(self, timeout: float, reason: str, *, cancel: bool = True) -> int:
        """Refuse new and waiting runs (``reason`` goes into their error), wait up to
        ``timeout`` seconds for the running ones to end, then cancel those still running
        (unless ``cancel`` is False: the owner stops them its own way); returns how many
        still ran (0: all ended in time). Idempotent: a second close drains again."""
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise ConfigurationError(f"close(timeout=...) must be a number of seconds >= 0, got {timeout!r}")
        deadline = time.monotonic() + timeout
        with self._cond:
            if self._closing is None:
                self._closing = reason
            self._cond.notify_all()  # the waiters leave with the closed error
            while self._running and (remaining := deadline - time.monotonic()) > 0:
                self._cond.wait(remaining)
            left = list(self._running)
        for token in left if cancel else ():  # outside the lock: cancel callbacks take their own
            token.cancel(f"{reason}: the run was still running after close(timeout={timeout:g})")
        return len(left)
