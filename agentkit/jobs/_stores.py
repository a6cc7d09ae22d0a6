"""Job stores: where a job runner persists background-job snapshots.

Both implement the :class:`~agentkit.jobs.JobStore` port (compare-and-swap per
job). :class:`InMemoryJobStore` lives as long as the process; :class:`FileJobStore`
keeps every snapshot in one JSON file, rewritten with the event store's helpers
(write-temp + fsync + atomic rename + directory fsync, under the same inter-process and
in-thread lock), so a crash leaves either the old or the new file, never a torn one.
A crash in the middle of a write can leave its temp file behind; the next
:class:`FileJobStore` opened over the same file removes such leftovers.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import threading
import time
from typing import Any

from ..errors import ConfigurationError, StoreConflictError, StoreCorruptionError, StoreError
from ..stores._checks import check_revision
from ..stores._fsio import atomic_write, os_error
from ..stores._locks import locked
from ._base import JobState, StoredJob

__all__ = ["FileJobStore", "InMemoryJobStore"]

_FORMAT = 1
_LEGACY_TMP = re.compile(r"\.jobs-[A-Za-z0-9_]{8}\.tmp")
"""The temp files agentkit 0.1.0 wrote (``tempfile.mkstemp(prefix=".jobs-", suffix=".tmp")``)."""
_LEGACY_STALE_SECONDS = 600.0
"""A 0.1.0-style temp file is only removed once it is this old: it names no store file,
so a writer of another store in the same directory might still be using it."""


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
        check_revision(expected_revision)
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

    Every write takes an exclusive lock on ``path + ".lock"`` (waiting at most
    ``lock_timeout`` seconds; a lock is never stolen), re-reads the file, checks the
    revision, and replaces the file atomically (temp file, fsync, rename, fsync of the
    directory). Opening the store removes temp files a crashed writer of this file left
    (``.<name>.<32 hex digits>.jobs-tmp``, removed under the lock, when no write can be
    using them) and 0.1.0-style ``.jobs-XXXXXXXX.tmp`` files older than ten minutes; nothing
    else in the directory is touched.
    """

    def __init__(self, path: str | os.PathLike[str], *, lock_timeout: float = 10.0) -> None:
        self.path = os.path.abspath(os.fspath(path))
        parent = os.path.dirname(self.path)
        if not os.path.isdir(parent):
            raise ConfigurationError(f"the directory of job store file {self.path!r} does not exist")
        if not isinstance(lock_timeout, (int, float)) or not lock_timeout > 0:
            raise ConfigurationError(f"lock_timeout must be a positive number of seconds, got {lock_timeout!r}")
        self._lock_path = self.path + ".lock"
        self._lock_timeout = float(lock_timeout)
        # named after this store file (a long name shortened, with a hash to tell apart
        # files that share a prefix), so the sweep only ever matches this store's temps
        name = os.path.basename(self.path)
        if len(name) > 64:
            name = name[:48] + "-" + hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:15]
        self._tmp_prefix = "." + name + "."
        self._tmp_suffix = ".jobs-tmp"
        self._own_tmp = re.compile(re.escape(self._tmp_prefix) + r"[0-9a-f]{32}" + re.escape(self._tmp_suffix))
        self._sweep()

    def _sweep(self) -> None:
        """Remove temp files crashed writers left (see the class docstring). Best effort:
        a file that cannot be removed now is left for the next open."""
        directory = os.path.dirname(self.path)
        try:
            with locked(self._lock_path, timeout=self._lock_timeout):
                names = os.listdir(directory)
                now = time.time()
                for name in names:
                    own = self._own_tmp.fullmatch(name) is not None
                    if not own and _LEGACY_TMP.fullmatch(name) is None:
                        continue
                    full = os.path.join(directory, name)
                    try:
                        st = os.lstat(full)
                        if not stat.S_ISREG(st.st_mode):
                            continue  # never follow or remove a symlink, directory, fifo...
                        if not own and now - st.st_mtime < _LEGACY_STALE_SECONDS:
                            continue
                        os.unlink(full)
                    except OSError:
                        continue
        except (StoreError, OSError):
            return  # a busy lock or an unreadable directory: the next open sweeps

    def _read(self) -> dict[str, Any]:
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise os_error(f"cannot read job store file {self.path}", exc) from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise StoreCorruptionError(f"job store file {self.path!r} is not valid JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise StoreCorruptionError(
                f"job store file {self.path!r} has an unknown format; expected format {_FORMAT}"
            )
        jobs = data.get("jobs", {})
        if not isinstance(jobs, dict):
            raise StoreCorruptionError(f"job store file {self.path!r}: \"jobs\" is not an object")
        return jobs

    def _write(self, jobs: dict[str, Any]) -> None:
        data = json.dumps({"format": _FORMAT, "jobs": jobs}, ensure_ascii=False).encode("utf-8")
        try:
            atomic_write(self.path, data, sync=True, tmp_prefix=self._tmp_prefix, tmp_suffix=self._tmp_suffix)
        except OSError as exc:
            raise os_error(f"cannot write job store file {self.path}", exc, tail="Nothing was written") from exc

    def load(self) -> list[StoredJob]:
        """Every stored job, oldest first (read under the lock)."""
        with locked(self._lock_path, timeout=self._lock_timeout):
            jobs = self._read()
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
        check_revision(expected_revision)
        with locked(self._lock_path, timeout=self._lock_timeout):
            jobs = self._read()
            actual = int(jobs.get(state.execution_id, {}).get("revision", 0))
            if actual != expected_revision:
                raise _conflict(state, expected_revision, actual)
            jobs[state.execution_id] = {"revision": actual + 1, "state": state.to_dict()}
            self._write(jobs)
            return actual + 1

    def delete(self, execution_id: str) -> None:
        """Forget a job (unknown ids are ignored)."""
        with locked(self._lock_path, timeout=self._lock_timeout):
            jobs = self._read()
            if jobs.pop(execution_id, None) is not None:
                self._write(jobs)

    def __repr__(self) -> str:
        return f"<FileJobStore {self.path!r}>"
