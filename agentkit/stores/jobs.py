"""Persistence of background-job snapshots, with compare-and-swap per job.

A :class:`JobStore` keeps the latest :class:`~agentkit.tools.context.JobState` of each
job under a revision number (1 for the first write). ``put`` succeeds only when the
caller names the current revision (0 for a new job); a stale writer gets
:class:`~agentkit.errors.StoreConflictError` and nothing is written.

:class:`FileJobStore` keeps every snapshot in one JSON file, rewritten through
write-temp + fsync + atomic rename under a ``portalocker`` lock, so a crash leaves either
the old or the new file, never a torn one.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import portalocker

from .errors import ConfigurationError, StoreConflictError, StoreCorruptionError, StoreLockTimeout
from .tools.context import JobState

__all__ = ["FileJobStore", "InMemoryJobStore", "JobStore", "StoredJob"]

_FORMAT = 1


@dataclass(frozen=True, kw_only=True)
class StoredJob:
    """A persisted job snapshot and its revision."""

    state: JobState
    revision: int


@runtime_checkable
class JobStore(Protocol):
    """Where a job runner persists job snapshots."""

    def load(self) -> list[StoredJob]:
        """Every stored job, oldest first."""
        ...

    def put(self, state: JobState, *, expected_revision: int) -> int:
        """Store ``state`` if the job's current revision is ``expected_revision`` (0 for
        a new job); return the new revision or raise StoreConflictError."""
        ...

    def delete(self, execution_id: str) -> None:
        """Forget a job (retention). Unknown ids are ignored."""
        ...


def _conflict(state: JobState, expected: int, actual: int) -> StoreConflictError:
    return StoreConflictError(
        f"job {state.execution_id!r} is at revision {actual}, not {expected}: another writer "
        f"changed it; reload the store before writing",
        expected_revision=expected,
        actual_revision=actual,
    )


class InMemoryJobStore:
    """A process-local :class:`JobStore` (lost when the process ends)."""

    def __init__(self) -> None:
        self._jobs: dict[str, tuple[dict[str, Any], int]] = {}
        self._lock = threading.Lock()

    def load(self) -> list[StoredJob]:
        """Every stored job."""
        with self._lock:
            return [StoredJob(state=JobState.from_dict(d), revision=r) for d, r in self._jobs.values()]

    def put(self, state: JobState, *, expected_revision: int) -> int:
        """Store ``state`` if the job is at ``expected_revision``; the new revision."""
        with self._lock:
            actual = self._jobs.get(state.execution_id, (None, 0))[1]
            if actual != expected_revision:
                raise _conflict(state, expected_revision, actual)
            self._jobs[state.execution_id] = (state.to_dict(), actual + 1)
            return actual + 1

    def delete(self, execution_id: str) -> None:
        """Forget a job (unknown ids are ignored)."""
        with self._lock:
            self._jobs.pop(execution_id, None)


class FileJobStore:
    """A :class:`JobStore` in one JSON file (``path``), safe across processes.

    One live execution context per file: a context opened over the file treats every job
    recorded as running as left behind by a host that died. Give each process that runs
    jobs (each web-server worker, say) its own file.

    Every write takes an exclusive ``portalocker`` lock on ``path + ".lock"`` (waiting at
    most ``lock_timeout`` seconds; a lock is never stolen), re-reads the file, checks
    the revision, and replaces the file atomically (temp file, fsync, rename, fsync of
    the directory).
    """

    def __init__(self, path: str | os.PathLike[str], *, lock_timeout: float = 10.0) -> None:
        self.path = os.path.abspath(os.fspath(path))
        parent = os.path.dirname(self.path)
        if not os.path.isdir(parent):
            raise ConfigurationError(f"the directory of job store file {self.path!r} does not exist")
        if lock_timeout <= 0:
            raise ConfigurationError("lock_timeout must be positive")
        self._lock_path = self.path + ".lock"
        self._lock_timeout = lock_timeout
        self._thread_lock = threading.Lock()

    def _locked(self) -> portalocker.Lock:
        return portalocker.Lock(
            self._lock_path, mode="a", timeout=self._lock_timeout,
            flags=portalocker.LOCK_EX | portalocker.LOCK_NB,
        )

    def _read(self) -> dict[str, Any]:
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise StoreCorruptionError(f"job store file {self.path!r} is not valid JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise StoreCorruptionError(
                f"job store file {self.path!r} has an unknown format; expected format {_FORMAT}"
            )
        return data.get("jobs", {})

    def _write(self, jobs: dict[str, Any]) -> None:
        parent = os.path.dirname(self.path)
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=".jobs-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"format": _FORMAT, "jobs": jobs}, f, ensure_ascii=False)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        dir_fd = os.open(parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _transaction(self) -> Any:
        store = self

        class _Tx:
            def __enter__(self) -> dict[str, Any]:
                store._thread_lock.acquire()
                try:
                    self._lock = store._locked()
                    self._lock.acquire()
                except portalocker.exceptions.LockException as exc:
                    store._thread_lock.release()
                    raise StoreLockTimeout(
                        f"job store lock {store._lock_path!r} stayed held for more than "
                        f"{store._lock_timeout:g}s; if no writer is running, remove it"
                    ) from exc
                except BaseException:
                    store._thread_lock.release()
                    raise
                return store._read()

            def __exit__(self, *exc: object) -> None:
                try:
                    self._lock.release()
                finally:
                    store._thread_lock.release()

        return _Tx()

    def load(self) -> list[StoredJob]:
        """Every stored job, oldest first (read under the lock)."""
        with self._transaction() as jobs:
            try:
                out = [
                    StoredJob(state=JobState.from_dict(rec["state"]), revision=int(rec["revision"]))
                    for rec in jobs.values()
                ]
            except (KeyError, TypeError, ValueError, AttributeError, ConfigurationError) as exc:
                raise StoreCorruptionError(
                    f"job store file {self.path!r} holds a malformed job record "
                    f"({type(exc).__name__}: {exc}); restore it from a backup or remove it"
                ) from None
        out.sort(key=lambda s: s.state.started_at)
        return out

    def put(self, state: JobState, *, expected_revision: int) -> int:
        """Compare-and-swap ``state`` under the lock and replace the file atomically."""
        with self._transaction() as jobs:
            actual = int(jobs.get(state.execution_id, {}).get("revision", 0))
            if actual != expected_revision:
                raise _conflict(state, expected_revision, actual)
            jobs[state.execution_id] = {"revision": actual + 1, "state": state.to_dict()}
            self._write(jobs)
            return actual + 1

    def delete(self, execution_id: str) -> None:
        """Forget a job (unknown ids are ignored)."""
        with self._transaction() as jobs:
            if jobs.pop(execution_id, None) is not None:
                self._write(jobs)

    def __repr__(self) -> str:
        return f"<FileJobStore {self.path!r}>"
