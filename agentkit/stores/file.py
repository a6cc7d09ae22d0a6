"""FileEventStore: durable, crash-safe event logs in a directory, one host.

Layout under ``root_dir``::

    <session_id>/events.jsonl          header line, then one checksummed record per append
    <session_id>/archives/<id>.json    events removed from the active log by compaction
    .locks/<session_id>.lock           the session's lock file (kept after delete)
    .locks/<session_id>.turn.lock      the turn lock (held by the process running a turn; its epoch)

Appends take the session's exclusive lock (``portalocker`` plus a process-wide thread
lock), check the revision, write one line and fsync it before returning. A session's
first append writes its log, header and first record, as one whole file, so a failure
(a full disk) leaves no session behind. Readers take a
shared lock. Whole-file writes (a new log, an archive, a compacted log) go through a temp
file, fsync and an atomic rename. A crash mid-append leaves at most one damaged line at the end; load
leaves it out (it was never acknowledged) and the next append truncates it first.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import ConfigurationError
from ..events import Event
from ._archives import read_archive, write_archive
from ._checks import (
    check_count,
    check_events,
    check_lease,
    check_revision,
    check_turn_timeout,
    compact_too_far,
    conflict,
)
from ._file_fork import copy_prefix
from ._fsio import atomic_write, fsync_dir, make_dir, make_dirs, os_error, sync_file, write_all
from ._locks import locked
from ._logfile import catch_up, new_header, scan_fd, stamp_or_none, starts_with
from ._records import encode_archive, encode_events
from ._turns import held_turn, read_epoch
from ._views import View, ViewCache, stamp_of
from .base import StoredSession, TurnLease, validate_session_id

if TYPE_CHECKING:
    from ..cancel import CancelToken

log = logging.getLogger("agentkit.stores")

_LOG = "events.jsonl"
_ARCHIVES = "archives"
_LOCKS = ".locks"
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class FileEventStore:
    """Event logs as append-only, checksummed JSON-lines files under ``root_dir``.

    ``fsync=False`` skips fsync (faster; a power loss may then lose acknowledged events,
    a process crash still does not). ``lock_timeout`` bounds how long an operation waits
    for another writer's lock before raising :class:`~agentkit.errors.StoreLockTimeout`.
    File locks coordinate processes on one host; one writer per session id at a time is
    enforced by compare-and-swap revisions. See docs/durability.md.
    """

    def __init__(self, root_dir: str | os.PathLike[str], *, fsync: bool = True, lock_timeout: float = 10.0) -> None:
        if not isinstance(root_dir, (str, os.PathLike)) or not os.fspath(root_dir):
            raise ConfigurationError(f"root_dir must be a directory path, got {root_dir!r}")
        if not isinstance(fsync, bool):
            raise ConfigurationError(f"fsync must be True or False, got {fsync!r}")
        if (
            not isinstance(lock_timeout, (int, float))
            or isinstance(lock_timeout, bool)
            or not lock_timeout >= 0
            or lock_timeout == float("inf")
        ):
            raise ConfigurationError(f"lock_timeout must be a finite number of seconds >= 0, got {lock_timeout!r}")
        root = os.path.realpath(os.fspath(root_dir))
        if os.path.exists(root) and not os.path.isdir(root):
            raise ConfigurationError(f"root_dir {root} exists and is not a directory")
        self.root_dir = root
        """The absolute path of the store directory."""
        self.fsync = fsync
        self.lock_timeout = float(lock_timeout)
        self._views = ViewCache()

    def __repr__(self) -> str:
        return f"FileEventStore({self.root_dir!r}, fsync={self.fsync}, lock_timeout={self.lock_timeout:g})"

    # -- paths and locks ---------------------------------------------------------------

    def _session_dir(self, session_id: str) -> str:
        return os.path.join(self.root_dir, session_id)

    def _log_path(self, session_id: str) -> str:
        return os.path.join(self.root_dir, session_id, _LOG)

    def _lock_path(self, session_id: str) -> str:
        return os.path.join(self.root_dir, _LOCKS, session_id + ".lock")

    def _ensure_root(self) -> None:
        locks = os.path.join(self.root_dir, _LOCKS)
        if os.path.isdir(locks):
            return
        try:  # the root's own entry must survive a power loss too: fsync each new parent
            make_dirs(self.root_dir, sync=self.fsync)
            make_dir(locks, sync=False)  # lock files hold no data
        except OSError as exc:
            raise os_error(f"cannot create the store directory {exc.filename or self.root_dir}", exc) from exc

    def check_writable(self, session_id: str) -> None:
        """Raise :class:`~agentkit.errors.StoreError` naming the path when this process
        cannot write session ``session_id`` here now (a read-only mount, missing
        permissions, a file where a directory belongs). Creates the store directory when
        it is missing. ``Session.open`` and ``Session(store=...)`` call it, so such a
        store is refused when the session is opened rather than at its first push."""
        validate_session_id(session_id)
        self._ensure_root()
        sdir = self._session_dir(session_id)
        for path in (self.root_dir, os.path.join(self.root_dir, _LOCKS), sdir):
            if path == sdir and not os.path.lexists(sdir):
                break  # created at the first append, in the root just checked
            probe = os.path.join(path, f".tmp-probe-{uuid.uuid4().hex}")
            try:
                os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC, 0o644))
                os.unlink(probe)
            except OSError as exc:
                raise os_error(f"cannot write session {session_id!r}: cannot create files in {path}", exc) from exc
        for path in (self._log_path(session_id), self._lock_path(session_id)):
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_APPEND | _O_CLOEXEC))
            except FileNotFoundError:
                pass  # no log yet: the directory check above covers a new session
            except OSError as exc:
                raise os_error(f"cannot write session {session_id!r}: cannot open {path} for writing", exc) from exc

    def _turn_path(self, session_id: str) -> str:
        return os.path.join(self.root_dir, _LOCKS, session_id + ".turn.lock")

    @contextmanager
    def turn_lock(
        self, session_id: str, *, timeout: float | None = None, cancel: CancelToken | None = None
    ) -> Iterator[TurnLease]:
        """Hold session ``session_id``'s turn lock (``.locks/<id>.turn.lock``) for the
        block, so one turn of it runs at a time across threads and processes on this host;
        the operating system releases it when the holding process dies. Yields the lease:
        its epoch (kept in the lock file) grows with every grant, and an append made with
        it is refused once it is no longer held. Waits at most ``timeout`` seconds (None:
        no bound), then raises :class:`~agentkit.errors.StoreUnavailableError`
        (``written=False``); ``cancel`` ends the wait with
        :class:`~agentkit.errors.CancelledError`."""
        validate_session_id(session_id)
        wait = check_turn_timeout(timeout)
        self._ensure_root()
        with held_turn(self._turn_path(session_id), session_id, timeout=wait, cancel=cancel) as lease:
            yield lease

    @contextmanager
    def _write_lock(self, session_id: str) -> Iterator[None]:
        self._ensure_root()
        with locked(self._lock_path(session_id), timeout=self.lock_timeout):
            yield

    @contextmanager
    def _read_lock(self, session_id: str) -> Iterator[None]:
        path = self._lock_path(session_id)
        create: bool | None = True
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | _O_CLOEXEC, 0o644))
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise os_error(f"cannot create lock file {path}", exc) from exc
            # A read-only store: no writer can change it. Lock an existing lock file
            # read-only when there is one, else read without a lock.
            create = False if os.path.exists(path) else None
        if create is None:
            yield
            return
        with locked(path, timeout=self.lock_timeout, shared=True, create=create):
            yield

    # -- reading -----------------------------------------------------------------------

    def head(self, session_id: str) -> int | None:
        """The session's current revision, or None when it has no log; no events are
        decoded. One ``stat`` when the log is as this object last verified it; otherwise
        only what was appended since is read (the whole log after another process
        compacted it)."""
        validate_session_id(session_id)
        path = self._log_path(session_id)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise os_error(f"cannot stat {path}", exc) from exc
        view = self._views.get(session_id)
        if view is not None and view.stamp == stamp_of(st):
            return view.revision
        with self._read_lock(session_id):
            try:
                fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
            except FileNotFoundError:
                return None  # deleted meanwhile
            except OSError as exc:
                raise os_error(f"cannot read {path}", exc) from exc
            try:
                st = os.fstat(fd)  # the read lock keeps writers out: this is what is read
                view, torn = catch_up(fd, session_id, path, self._views.get(session_id))
            except OSError as exc:
                raise os_error(f"cannot read {path}", exc) from exc
            finally:
                os.close(fd)
            self._views.put(session_id, view if torn else replace(view, stamp=stamp_of(st)))
            return view.revision

    def load(self, session_id: str) -> StoredSession | None:
        """The stored session (a torn tail from a crash left out), or None."""
        validate_session_id(session_id)
        path = self._log_path(session_id)
        if not os.path.exists(path):
            return None
        with self._read_lock(session_id):
            try:
                fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
            except FileNotFoundError:
                return None  # deleted meanwhile
            except OSError as exc:
                raise os_error(f"cannot read {path}", exc) from exc
            try:
                view, events, version, torn = scan_fd(fd, session_id, path, want_events=True)
            finally:
                os.close(fd)
            if torn:
                log.warning("session %r: left out an incomplete record at the end of %s (an "
                            "interrupted write); the next append removes it", session_id, path)
            self._views.put(session_id, view)
        return StoredSession(
            session_id=session_id, events=tuple(events), revision=view.revision, schema_version=version
        )

    # -- appending ---------------------------------------------------------------------

    def _create_log(self, session_id: str, revision: int, body: bytes, records: int) -> int:
        """Under the write lock: start the log of a new session with its first records
        (``body``: ``records`` lines bringing it to ``revision``), in one atomic write, so a
        failure (a full disk) leaves no session behind."""
        path = self._log_path(session_id)
        sdir = self._session_dir(session_id)
        header = new_header(session_id)
        data = header + body
        created = False
        try:
            created = make_dir(sdir, sync=self.fsync)
            atomic_write(path, data, sync=self.fsync)
            st = os.stat(path)
        except OSError as exc:
            if starts_with(path, data):  # renamed into place; the directory fsync failed
                tail = f"The log is in place, but a power loss may still undo it: reload session {session_id!r}"
            else:
                tail = "Nothing was written"
                if created:
                    try:  # no empty session directory left behind
                        os.rmdir(sdir)
                    except OSError:
                        pass
            raise os_error(f"cannot create the log of session {session_id!r} at {path}", exc, tail=tail) from exc
        self._views.put(session_id, View(st.st_dev, st.st_ino, header, len(data), revision, 1 + records))
        return revision

    def append(
        self, session_id: str, events: Sequence[Event], *, expected_revision: int, lease: TurnLease | None = None
    ) -> int:
        """Compare-and-swap append of ``events`` as one record; durable when it returns.
        With ``lease`` (from :meth:`turn_lock`), refused with
        :class:`~agentkit.errors.TurnLockLostError` unless it is still the held lease.

        Returns the new revision (the number of events in the log)."""
        validate_session_id(session_id)
        expected = check_revision(expected_revision)
        batch = check_events(events)
        line = encode_events(batch, expected + len(batch))
        path = self._log_path(session_id)
        with self._write_lock(session_id):
            if lease is not None:
                check_lease(session_id, lease, read_epoch(self._turn_path(session_id)))
            try:
                fd = os.open(path, os.O_RDWR | os.O_APPEND | _O_CLOEXEC)
            except FileNotFoundError:
                if expected != 0:
                    raise conflict(session_id, expected, 0) from None
                return self._create_log(session_id, len(batch), line if batch else b"", 1 if batch else 0)
            except OSError as exc:
                raise os_error(f"cannot open {path} for appending", exc, tail="Nothing was written") from exc
            try:
                return self._append_locked(fd, session_id, path, batch, line, expected)
            finally:
                os.close(fd)

    def _append_locked(
        self, fd: int, session_id: str, path: str, batch: list[Event], line: bytes, expected: int
    ) -> int:
        try:
            view, torn = catch_up(fd, session_id, path, self._views.get(session_id))
        except OSError as exc:
            self._views.drop(session_id)
            raise os_error(f"cannot read {path}", exc, tail="Nothing was written") from exc
        self._views.put(session_id, view)
        if view.revision != expected:
            raise conflict(session_id, expected, view.revision)
        if not batch and not torn:
            return view.revision
        try:
            if torn:  # never glue a new record onto the remains of an interrupted one
                log.warning("session %r: removing an incomplete record (an interrupted write) "
                            "from the end of %s before appending", session_id, path)
                os.ftruncate(fd, view.offset)
            if batch:
                write_all(fd, line)
            if self.fsync:
                sync_file(fd)
        except OSError as exc:
            self._views.drop(session_id)
            # take back the record, whole or partial, and make that durable; only then
            # is "nothing was appended" true (a complete record left behind because an
            # fsync failed and the truncation failed too would load as valid)
            try:
                os.ftruncate(fd, view.offset)
                if self.fsync:
                    sync_file(fd)
                tail = f"Nothing was appended: session {session_id!r} stays at revision {view.revision}"
            except OSError:
                tail = (
                    f"The record could not be taken back, so the log of session {session_id!r} may or "
                    f"may not hold it: reload the session to see what is durable"
                )
            raise os_error(f"cannot append to {path}", exc, tail=tail) from exc
        if not batch:
            return view.revision
        after = View(view.dev, view.ino, view.header, view.offset + len(line), expected + len(batch), view.lines + 1,
                     stamp_or_none(fd))
        self._views.put(session_id, after)
        return expected + len(batch)

    copy_prefix = copy_prefix  # a new session from a prefix of one, its records copied as they are (Session.fork)

    # -- archives ----------------------------------------------------------------------

    def _archive_path(self, session_id: str, archive_id: str) -> str:
        return os.path.join(self._session_dir(session_id), _ARCHIVES, archive_id + ".json")

    def archive(self, session_id: str, archive_id: str, events: Sequence[Event]) -> None:
        """Durably keep ``events`` under ``archive_id`` (written atomically). Archiving the
        same event ids again is a no-op; different events under a used id are refused."""
        validate_session_id(session_id)
        validate_session_id(archive_id)
        batch = check_events(events)
        data = encode_archive(session_id, archive_id, batch)
        with self._write_lock(session_id):
            self._archive_locked(session_id, archive_id, batch, data)

    def _archive_locked(self, session_id: str, archive_id: str, batch: Sequence[Event], data: bytes) -> None:
        path = self._archive_path(session_id, archive_id)
        write_archive(self._session_dir(session_id), path, session_id, archive_id, batch, data, sync=self.fsync)

    def load_archive(self, session_id: str, archive_id: str) -> tuple[Event, ...] | None:
        """The events archived under ``archive_id``, or None."""
        validate_session_id(session_id)
        validate_session_id(archive_id)
        path = self._archive_path(session_id, archive_id)
        if not os.path.exists(path):
            return None
        with self._read_lock(session_id):
            return read_archive(path)

    # -- compaction --------------------------------------------------------------------

    def compact(
        self,
        session_id: str,
        archive_id: str,
        *,
        expected_revision: int,
        remove: int,
        summary: Sequence[Event] = (),
    ) -> int:
        """Move the first ``remove`` events of the active log into archive ``archive_id``
        and put ``summary`` in their place; compare-and-swap like :meth:`append`.

        The archive is written (atomically, fsynced) first, then the log is rewritten
        through a temp file, fsync and an atomic rename: a crash leaves the old log or the
        new one, never a mix, and repeating an interrupted call finishes it. Returns the
        new revision, ``expected_revision + 1``."""
        validate_session_id(session_id)
        validate_session_id(archive_id)
        expected = check_revision(expected_revision)
        count = check_count(remove)
        replacement = check_events(summary)
        encode_events(replacement, 0)  # refuse unserialisable events before any side effect
        path = self._log_path(session_id)
        with self._write_lock(session_id):
            try:
                fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
            except FileNotFoundError:
                if expected:
                    raise conflict(session_id, expected, 0) from None
                raise compact_too_far(session_id, count, 0) from None
            except OSError as exc:
                raise os_error(f"cannot read {path}", exc, tail="Nothing was compacted") from exc
            try:
                view, events, _version, _torn = scan_fd(fd, session_id, path, want_events=True)
            except OSError as exc:
                raise os_error(f"cannot read {path}", exc, tail="Nothing was compacted") from exc
            finally:
                os.close(fd)
            self._views.put(session_id, view)
            if view.revision != expected:
                raise conflict(session_id, expected, view.revision)
            if count > len(events):
                raise compact_too_far(session_id, count, len(events))
            removed, kept = events[:count], events[count:]
            self._archive_locked(session_id, archive_id, removed, encode_archive(session_id, archive_id, removed))
            revision = expected + 1
            header = new_header(session_id, compacted_into=archive_id)
            data = header + encode_events([*replacement, *kept], revision, kind="compacted")
            try:
                atomic_write(path, data, sync=self.fsync)
                st = os.stat(path)
            except OSError as exc:
                self._views.drop(session_id)
                if starts_with(path, header):  # renamed into place; the directory fsync failed
                    tail = (
                        f"The compacted log (revision {revision}) is in place, but a power loss may "
                        f"still undo it: reload the session before writing again"
                    )
                else:
                    tail = (
                        f"The log was not compacted and stays at revision {expected} (archive "
                        f"{archive_id!r} holds a copy of the events; repeat the call to finish)"
                    )
                raise os_error(f"cannot rewrite {path}", exc, tail=tail) from exc
            self._views.put(session_id, View(st.st_dev, st.st_ino, header, len(data), revision, 2))
            return revision

    # -- listing and deleting ----------------------------------------------------------

    def list_sessions(self) -> list[str]:
        """Ids of all sessions with a log, sorted."""
        try:
            names = os.listdir(self.root_dir)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise os_error(f"cannot list {self.root_dir}", exc) from exc
        out = []
        for name in names:
            try:
                validate_session_id(name)
            except ConfigurationError:
                continue
            if os.path.isfile(os.path.join(self.root_dir, name, _LOG)):
                out.append(name)
        return sorted(out)

    def delete(self, session_id: str) -> bool:
        """Remove a session's log and archives; True when something was removed.

        The directory is first renamed aside atomically, so a crash never leaves half a
        session behind."""
        validate_session_id(session_id)
        sdir = self._session_dir(session_id)
        if not os.path.exists(sdir):
            return False
        with self._write_lock(session_id):
            self._views.drop(session_id)
            trash = os.path.join(self.root_dir, f".deleted-{session_id}-{uuid.uuid4().hex}")
            try:
                os.rename(sdir, trash)
            except FileNotFoundError:
                return False
            except OSError as exc:
                raise os_error(f"cannot delete session {session_id!r} at {sdir}", exc) from exc
            if self.fsync:
                fsync_dir(self.root_dir)
        shutil.rmtree(trash, ignore_errors=True)
        return True

