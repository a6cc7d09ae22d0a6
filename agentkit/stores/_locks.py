"""Inter-process (portalocker) plus in-process (threading) locks with a deadline.

OS file locks do not reliably exclude threads of one process (``fcntl`` record locks,
and ``flock`` where it is emulated by them, belong to the whole process), so every lock
file also has one process-wide ``threading.Lock``. That registry is the one piece of
module state here: it mirrors a resource that is itself process-wide. Locks are never
stolen; a lock held past the timeout raises StoreLockTimeout naming the lock file.
"""

from __future__ import annotations

import errno
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, BinaryIO

import portalocker

from ..errors import StoreError, StoreLockTimeout
from ._fsio import os_error

if TYPE_CHECKING:
    from ..cancel import CancelToken


class _ThreadLock:
    __slots__ = ("lock", "__weakref__")

    def __init__(self) -> None:
        self.lock = threading.Lock()


_registry: weakref.WeakValueDictionary[str, _ThreadLock] = weakref.WeakValueDictionary()
_registry_guard = threading.Lock()


def _thread_lock(path: str) -> _ThreadLock:
    with _registry_guard:
        tl = _registry.get(path)
        if tl is None:
            tl = _registry[path] = _ThreadLock()
        return tl


def _timeout_error(path: str, timeout: float, what: str) -> StoreLockTimeout:
    return StoreLockTimeout(
        f"could not lock {path} within {timeout:g}s: {what} holds it. agentkit never steals "
        f"a lock; the operating system releases it when the holding process exits. Wait for "
        f"the other writer to finish, stop it, or raise lock_timeout."
    )


def _is_contention(exc: Exception) -> bool:
    """True when a lock attempt failed because someone else holds the lock (portalocker
    4 raises AlreadyLocked; older versions a LockException wrapping EAGAIN/EACCES)."""
    if isinstance(exc, portalocker.AlreadyLocked):
        return True
    for inner in (exc.__cause__, *exc.args):
        if isinstance(inner, OSError) and inner.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return True
    return False


_POLL = 0.05
"""The longest pause between two tries of a contended lock (a cancel is seen within it)."""


@contextmanager
def locked(
    path: str, *, timeout: float | None, shared: bool = False, create: bool = True, cancel: CancelToken | None = None
) -> Iterator[BinaryIO]:
    """Hold the lock file ``path`` (exclusive, or shared for readers) for the block; the
    block gets the open lock file.

    ``create=False`` opens an existing lock file read-only (for readers on a read-only
    file system); a missing one then means there is nothing to lock. ``timeout=None``
    waits without bound; ``cancel`` ends the wait with CancelledError."""
    deadline = None if timeout is None else time.monotonic() + timeout
    tl = _thread_lock(path)
    if not wait_for_lock(tl.lock, timeout, cancel):
        raise _timeout_error(path, timeout or 0.0, "another thread of this process")
    try:
        try:  # a file object: portalocker before 4 does not take a bare descriptor
            fh = open(path, "ab" if create else "rb", buffering=0)
        except OSError as exc:
            raise os_error(f"cannot open lock file {path}", exc, tail="Nothing was done") from exc
        try:
            mode = portalocker.LockFlags.SHARED if shared else portalocker.LockFlags.EXCLUSIVE
            delay = 0.001
            while True:
                try:
                    portalocker.lock(fh, mode | portalocker.LockFlags.NON_BLOCKING)
                    break
                except portalocker.LockException as exc:
                    if not _is_contention(exc):
                        raise StoreError(
                            f"cannot lock {path}: {exc}. The file system may not support locks "
                            f"(NFS, some FUSE mounts): put the store on a local file system"
                        ) from exc
                    _still_waiting(path, timeout, deadline, cancel, "another process")
                    left = _slice(deadline, cancel)
                    time.sleep(delay if left < 0 else min(delay, left))
                    delay = min(delay * 2, _POLL)
            try:
                yield fh
            finally:
                portalocker.unlock(fh)
        finally:
            fh.close()
    finally:
        tl.lock.release()


def wait_for_lock(lock: threading.Lock, timeout: float | None, cancel: CancelToken | None) -> bool:
    """Acquire ``lock`` within ``timeout`` seconds (None: no bound); False when the time
    ran out. ``cancel`` ends the wait with CancelledError."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not lock.acquire(timeout=_slice(deadline, cancel)):
        if cancel is not None:
            cancel.raise_if_cancelled()
        if deadline is not None and time.monotonic() >= deadline:
            return False
    return True


def _slice(deadline: float | None, cancel: CancelToken | None) -> float:
    """How long the next wait may take: what is left of the timeout, in short slices
    when a cancel token must be watched (0 when the time is up)."""
    left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
    if cancel is None:
        return -1 if left is None else left  # (-1: threading's "no bound")
    return _POLL if left is None else min(left, _POLL)


def _still_waiting(path: str, timeout: float | None, deadline: float | None, cancel: CancelToken | None,
                   what: str) -> None:
    """Raise when the wait must end: the cancel token was cancelled, or time is up."""
    if cancel is not None:
        cancel.raise_if_cancelled()
    if deadline is not None and time.monotonic() >= deadline:
        assert timeout is not None
        raise _timeout_error(path, timeout, what) from None
