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

import portalocker

from ..errors import StoreError, StoreLockTimeout
from ._fsio import os_error


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


@contextmanager
def locked(path: str, *, timeout: float, shared: bool = False, create: bool = True) -> Iterator[None]:
    """Hold the lock file ``path`` (exclusive, or shared for readers) for the block.

    ``create=False`` opens an existing lock file read-only (for readers on a read-only
    file system); a missing one then means there is nothing to lock."""
    deadline = time.monotonic() + timeout
    tl = _thread_lock(path)
    if not tl.lock.acquire(timeout=max(timeout, 0.0)):
        raise _timeout_error(path, timeout, "another thread of this process")
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
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise _timeout_error(path, timeout, "another process") from None
                    time.sleep(min(delay, remaining))
                    delay = min(delay * 2, 0.05)
            try:
                yield
            finally:
                portalocker.unlock(fh)
        finally:
            fh.close()
    finally:
        tl.lock.release()
