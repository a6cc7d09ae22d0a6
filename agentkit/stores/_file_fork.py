"""A file-store session's prefix copied into a new session (private):
:meth:`FileEventStore.copy_prefix <agentkit.stores.file.FileEventStore.copy_prefix>`, what
``Session.fork`` writes with. The source's records that lie wholly inside the prefix are
copied byte for byte (checked, not re-encoded: a record holds no session id, and its
revision counts from the start of the log as it does in the new one); only the events of
the record the prefix ends in, and the events that follow the prefix, are encoded into
one new record. The new log is written in one atomic write, like a session's first append."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, StoreConflictError
from ..events import Event
from ._checks import check_events, conflict
from ._fsio import os_error, read_range
from ._logfile import read_header
from ._records import DamagedRecord, decode_record, encode_record
from .base import validate_session_id

if TYPE_CHECKING:
    from .file import FileEventStore

__all__ = ["copy_prefix"]


def copy_prefix(
    self: FileEventStore, session_id: str, new_session_id: str, *, count: int, first_event_id: str,
    last_event_id: str, events: Sequence[Event] = (),
) -> int:
    """Start session ``new_session_id`` with the first ``count`` events of session
    ``session_id``'s active log (the first is ``first_event_id``, the last
    ``last_event_id``) followed by ``events``, in one atomic write; the source's records
    inside the prefix are copied as they are. Returns the new session's revision
    (``count + len(events)``, as if one append had written them all).

    Raises :class:`~agentkit.errors.StoreConflictError` (nothing written) when
    ``new_session_id`` exists, or when the source's active log no longer begins with
    those ``count`` events (it was compacted since: load it and decide again)."""
    validate_session_id(session_id)
    validate_session_id(new_session_id)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ConfigurationError(f"count must be an int >= 1 (how many events to copy), got {count!r}")
    if new_session_id == session_id:
        raise ConfigurationError(f"copy_prefix needs a new session id, not the source's own {session_id!r}")
    extra = [e.to_dict() for e in check_events(events)]
    records, tail, found = _prefix(self, session_id, count)
    if len(found) != count or found[0] != first_event_id or found[-1] != last_event_id:
        raise StoreConflictError(
            f"session {session_id!r} no longer begins with the {count} events ending at {last_event_id!r} "
            f"(found {len(found)}): it was compacted or changed meanwhile. Nothing was written. Reload it and "
            f"fork again.", expected_revision=count, actual_revision=len(found),
        )
    revision = count + len(extra)
    body = b"".join(records)
    if tail or extra:
        body += _record(revision, [*tail, *extra])
    with self._write_lock(new_session_id):
        exists = os.path.exists(self._log_path(new_session_id))
        if not exists:
            return self._create_log(new_session_id, revision, body, len(records) + bool(tail or extra))
    raise conflict(new_session_id, 0, self.head(new_session_id) or 0)


def _record(revision: int, dicts: list[dict[str, Any]]) -> bytes:
    return encode_record("events", {"rev": revision, "events": dicts})


def _prefix(self: FileEventStore, session_id: str, count: int) -> tuple[list[bytes], list[dict[str, Any]], list[str]]:
    """Under the source's read lock: (the record lines wholly inside its first ``count``
    events, the events after them as stored dicts, the ids of all ``count`` or fewer)."""
    path = self._log_path(session_id)
    with self._read_lock(session_id):
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return [], [], []
        except OSError as exc:
            raise os_error(f"cannot read {path}", exc, tail="Nothing was written") from exc
        try:
            header = read_header(fd, path, session_id)
            data = read_range(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)
    records: list[bytes] = []
    tail: list[dict[str, Any]] = []
    ids: list[str] = []
    pos, line_no = len(header), 2
    while len(ids) < count:
        nl = data.find(b"\n", pos)
        if nl == -1:
            break
        try:
            rec = decode_record(data[pos:nl], where=f"{path} line {line_no}")
        except DamagedRecord:
            break  # a torn tail: never acknowledged, not part of the log
        payload = rec.data.get("events")
        if not isinstance(payload, list):
            break
        whole = rec.kind == "events" and not tail and len(ids) + len(payload) <= count
        taken = payload if whole else payload[: count - len(ids)]
        ids.extend(str(d.get("id")) if isinstance(d, dict) else "" for d in taken)
        if whole:  # its revision counts from the start of the log, as it will in the copy
            records.append(data[pos : nl + 1])
        else:  # (a compacted log's first record has the compaction's revision: re-encoded)
            tail.extend(taken)
        pos, line_no = nl + 1, line_no + 1
    return records, tail, ids
