"""The file store's log files read and started: the header line's checks, a whole scan
and an incremental catch-up of a log open as a file descriptor, a new log's header, and
the small file probes the store's error messages rely on (private)."""

from __future__ import annotations

import os
import time
import uuid

from ..errors import StoreCorruptionError
from ..events import Event
from ._fsio import read_range
from ._records import DamagedRecord, decode_record, encode_record
from ._scan import scan
from ._views import View, stamp_of
from .base import SCHEMA_VERSION

_HEADER_MAX = 4096


def read_header(fd: int, path: str, session_id: str) -> bytes:
    """The log's first line, checked: a header record of session ``session_id``."""
    head = read_range(fd, _HEADER_MAX, 0)
    nl = head.find(b"\n")
    if nl == -1:
        raise StoreCorruptionError(
            f"{path} line 1 (the log header) is damaged: no complete header line. The log is "
            f"created atomically, so this is not a crash remnant. Restore it from a backup."
        )
    header = head[: nl + 1]
    try:
        rec = decode_record(header[:-1], where=f"{path} line 1")
    except DamagedRecord as exc:
        raise StoreCorruptionError(
            f"{exc} (the log header). The log is created atomically, so this is not a crash "
            f"remnant. Restore it from a backup."
        ) from None
    if rec.kind != "header":
        raise StoreCorruptionError(
            f"{path} line 1 is not a log header (kind {rec.kind!r}). Restore the file from a backup."
        )
    owner = rec.data.get("session_id")
    if owner != session_id:
        raise StoreCorruptionError(
            f"{path} holds the log of session {owner!r}, not {session_id!r}: the directory was "
            f"renamed, or a case-insensitive file system maps both ids to one directory. "
            f"Nothing was changed. Rename the directory back, or use session ids that differ "
            f"in more than letter case."
        )
    return header


def scan_fd(fd: int, session_id: str, path: str, *, want_events: bool) -> tuple[View, list[Event], int, bool]:
    """Read the whole log; return a fresh view, its events, schema version, torn."""
    st = os.fstat(fd)
    header = read_header(fd, path, session_id)
    data = read_range(fd, st.st_size, 0)
    res = scan(data[len(header) :], path=path, revision=0, first_line=2, want_events=want_events)
    view = View(st.st_dev, st.st_ino, header, len(header) + res.end, res.revision, 1 + res.lines,
                () if res.torn else stamp_of(st))
    return view, res.events, max(res.schema_version, SCHEMA_VERSION if res.lines == 0 else 0), res.torn


def catch_up(fd: int, session_id: str, path: str, view: View | None) -> tuple[View, bool]:
    """Under the session's lock: the log's current view and whether it has a torn tail,
    reading only what was appended since ``view`` (what the store object last verified)."""
    st = os.fstat(fd)
    if view is not None and (view.dev, view.ino) == (st.st_dev, st.st_ino) and st.st_size >= view.offset:
        if read_range(fd, len(view.header), 0) == view.header:
            if st.st_size == view.offset:
                return view, False
            data = read_range(fd, st.st_size - view.offset, view.offset)
            res = scan(data, path=path, revision=view.revision, first_line=view.lines + 1, want_events=False)
            end, lines = view.offset + res.end, view.lines + res.lines
            return View(view.dev, view.ino, view.header, end, res.revision, lines), res.torn
    new, _events, _version, torn = scan_fd(fd, session_id, path, want_events=False)
    return new, torn


def new_header(session_id: str, **extra: str) -> bytes:
    """A new log's first line; its unique ``log_id`` tells a rewritten or recreated
    log from the one a cached view describes, even if the inode number is reused."""
    return encode_record(
        "header", {"log_id": uuid.uuid4().hex, "session_id": session_id, "created": time.time(), **extra}
    )


def stamp_or_none(fd: int) -> tuple[int, ...]:
    """The stamp of the file open as ``fd`` (() when it cannot be had: head() reads then)."""
    try:
        return stamp_of(os.fstat(fd))
    except OSError:
        return ()


def starts_with(path: str, prefix: bytes) -> bool:
    """True when the file at ``path`` begins with ``prefix`` (False if unreadable)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(prefix)) == prefix
    except OSError:
        return False
