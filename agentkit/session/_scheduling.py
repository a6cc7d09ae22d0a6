"""Keyed, debounced generations: run the next inference once things are quiet.

A host calls ``session.schedule_generate("jobs")`` each time something happens (a job
finished, a file changed). Calls with the same key inside the quiet period reset the
timer and share one :class:`concurrent.futures.Future`; when the period passes without
another call, one ``generate()`` runs (on the timer's thread, queued behind any running
generation). A same-key call made after that generation has started gets a new schedule
and a new future -- the running inference may already have read its snapshot, so the
event that prompted the call would otherwise never be seen -- and that generation runs
after the current one.

``cancel(key)`` cancels a debouncing schedule (its future is cancelled) and aborts
queued or running ones through their cancel token (their futures fail with
:class:`~agentkit.errors.CancelledError`). Schedules are process-local: they are not
stored and do not survive a restart.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ..cancel import CancelToken
from ..errors import ConfigurationError

__all__ = ["GenerationScheduler"]

_PRIMITIVES = (str, int, float, bool, bytes, type(None))


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Options agree when primitives are equal and everything else is the same object."""
    if a.keys() != b.keys():
        return False
    for k, va in a.items():
        vb = b[k]
        if va is vb:
            continue
        if isinstance(va, _PRIMITIVES) and type(va) is type(vb) and va == vb:
            continue
        return False
    return True


class _Entry:
    __slots__ = ("future", "timer", "kwargs", "token")

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.future: Future[Any] = Future()
        self.timer: threading.Timer | None = None
        self.kwargs = kwargs
        self.token = CancelToken()


class GenerationScheduler:
    """Debounced, keyed calls of ``run(**kwargs)`` (a Session's ``generate``)."""

    def __init__(self, run: Callable[..., Any]) -> None:
        self._run = run
        self._lock = threading.Lock()
        self._waiting: dict[str, _Entry] = {}
        """Per key, the schedule still in its quiet period."""
        self._started: dict[str, list[_Entry]] = {}
        """Per key, schedules whose generation is queued or running."""
        self._closed: str | None = None

    def schedule(self, key: str, debounce: float = 0.05, **kwargs: Any) -> Future[Any]:
        """Schedule ``run(**kwargs)`` after ``debounce`` quiet seconds; see the module
        docstring. Raises ConfigurationError for a bad key or debounce, or when options
        differ from those of the waiting schedule with the same key."""
        if not isinstance(key, str) or not key:
            raise ConfigurationError("schedule_generate needs a non-empty string key")
        if isinstance(debounce, bool) or not isinstance(debounce, (int, float)) or debounce < 0:
            raise ConfigurationError(f"debounce must be a number of seconds >= 0, got {debounce!r}")
        if "cancel" in kwargs and kwargs["cancel"] is not None and not isinstance(kwargs["cancel"], CancelToken):
            raise ConfigurationError("cancel must be a CancelToken")
        with self._lock:
            if self._closed is not None:
                raise ConfigurationError(f"cannot schedule a generation: {self._closed}")
            entry = self._waiting.get(key)
            if entry is not None and entry.future.cancelled():  # the caller cancelled it
                entry.timer.cancel()  # type: ignore[union-attr]
                entry = None
            if entry is not None:
                if not _same(entry.kwargs, kwargs):
                    raise ConfigurationError(
                        f"a generation with key {key!r} is already scheduled with different "
                        f"options; use another key or wait until it starts"
                    )
            else:
                entry = _Entry(kwargs)
                self._waiting[key] = entry
            self._arm(key, entry, debounce)
            return entry.future

    def _arm(self, key: str, entry: _Entry, debounce: float) -> None:
        if entry.timer is not None:
            entry.timer.cancel()
        timer = threading.Timer(debounce, self._fire, args=(key, entry))
        timer.daemon = True
        timer.name = f"agentkit-schedule-{key}"
        entry.timer = timer
        timer.start()

    def _fire(self, key: str, entry: _Entry) -> None:
        with self._lock:
            if self._waiting.get(key) is not entry or threading.current_thread() is not entry.timer:
                return  # reset or cancelled meanwhile
            del self._waiting[key]
            self._started.setdefault(key, []).append(entry)
        try:
            if not entry.future.set_running_or_notify_cancel():
                return
            kwargs = dict(entry.kwargs)
            user_token = kwargs.pop("cancel", None)
            if user_token is not None:
                user_token.link(entry.token)
            try:
                result = self._run(cancel=entry.token, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - delivered through the future
                entry.future.set_exception(exc)
            else:
                entry.future.set_result(result)
        finally:
            self._forget(key, entry)

    def _forget(self, key: str, entry: _Entry) -> None:
        with self._lock:
            started = self._started.get(key, [])
            if entry in started:
                started.remove(entry)
                if not started:
                    del self._started[key]

    def _take(self, key: str | None) -> list[_Entry]:
        """Remove and return the schedules of ``key`` (all keys for None); hold the lock."""
        keys = list({*self._waiting, *self._started}) if key is None else [key]
        out: list[_Entry] = []
        for k in keys:
            waiting = self._waiting.pop(k, None)
            out += self._started.pop(k, [])
            if waiting is not None:
                out.append(waiting)
        return out

    def cancel(self, key: str, reason: str = "scheduled generation cancelled") -> bool:
        """Cancel the schedules with ``key`` (waiting, queued or running); True when
        there was one."""
        with self._lock:
            entries = self._take(key)
        for entry in entries:
            self._cancel_entry(entry, reason)
        return bool(entries)

    @staticmethod
    def _cancel_entry(entry: _Entry, reason: str) -> None:
        if entry.timer is not None:
            entry.timer.cancel()
        entry.token.cancel(reason)
        # a future that has not started running is cancelled; a running one cannot be, and
        # fails with CancelledError through its token
        entry.future.cancel()

    def pending(self) -> list[str]:
        """Keys of schedules that have not finished."""
        with self._lock:
            return sorted({*self._waiting, *self._started})

    def close(self, reason: str = "the session was closed") -> None:
        """Cancel every schedule and refuse new ones."""
        with self._lock:
            self._closed = reason
            entries = self._take(None)
        for entry in entries:
            self._cancel_entry(entry, reason)

    def cancel_all(self, reason: str) -> None:
        """Cancel every schedule (new ones may still be made)."""
        with self._lock:
            entries = self._take(None)
        for entry in entries:
            self._cancel_entry(entry, reason)
