"""The file store's archive files (``<session_id>/archives/<id>.json``): one checksummed
record each, written atomically and read back defensively (private)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..errors import StoreCorruptionError
from ..events import Event
from ._checks import archive_conflict
from ._decode import Unreadable, restore_events
from ._fsio import atomic_write, make_dir, os_error
from ._logfile import starts_with
from ._records import DamagedRecord, decode_record


def write_archive(
    session_dir: str, path: str, session_id: str, archive_id: str, batch: Sequence[Event], data: bytes, *, sync: bool
) -> None:
    """Under the session's write lock: keep ``data`` (the encoded ``batch``) at ``path``.
    The same event ids archived again are a no-op; other events under a used id are refused."""
    existing = read_archive(path)
    if existing is not None:
        if [e.id for e in existing] == [e.id for e in batch]:
            return
        raise archive_conflict(session_id, archive_id)
    try:
        make_dir(session_dir, sync=sync)
        make_dir(os.path.dirname(path), sync=sync)
        atomic_write(path, data, sync=sync)
    except OSError as exc:
        if starts_with(path, data):  # renamed into place; the directory fsync failed
            tail = "The archive is in place, but a power loss may still undo it: archive again"
        else:
            tail = "Nothing was archived"
        raise os_error(f"cannot write archive {path}", exc, tail=tail) from exc


def read_archive(path: str) -> tuple[Event, ...] | None:
    """The events of the archive at ``path``, or None when there is none."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise os_error(f"cannot read archive {path}", exc) from exc
    try:
        if not data.endswith(b"\n") or data.count(b"\n") != 1:
            raise DamagedRecord(f"{path} line 1: not one complete record")
        rec = decode_record(data[:-1], where=f"{path} line 1")
        if rec.kind != "archive" or not isinstance(rec.data.get("events"), list):
            raise DamagedRecord(f"{path} line 1: not an archive record")
        if not all(isinstance(d, dict) for d in rec.data["events"]):
            raise DamagedRecord(f"{path} line 1: an archived event is not a JSON object")
        return restore_events(rec.data["events"], "line 1")
    except DamagedRecord as exc:
        raise StoreCorruptionError(
            f"{exc}. Archives are written atomically, so this is damage, not a crash "
            f"remnant. Restore it from a backup."
        ) from None
    except Unreadable as exc:
        raise StoreCorruptionError(
            f"{path} line 1 holds an event agentkit cannot read ({exc}). If a newer agentkit wrote it, upgrade "
            f"agentkit; otherwise restore the file from a backup."
        ) from None
