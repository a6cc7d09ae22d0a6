"""Reading a file-store log: verify records, find the end of the intact prefix.

A log is a header line followed by one record line per append (after a compaction, the
first record is the ``compacted`` one that rewrote the log). A crash during an append
can leave one damaged line at the end (torn: cut short, or never fully written); that
append was never acknowledged, so it is left out. Damage anywhere else, or more than one
damaged line at the end, cannot come from a crash and raises StoreCorruptionError
naming the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import StoreCorruptionError
from ..events import Event
from ._decode import LogOrder, OutOfOrder, Unreadable, restore_event
from ._records import DamagedRecord, decode_record, holds_intact_record


@dataclass
class ScanResult:
    """What a scan of ``data`` (the log from some offset on) found."""

    events: list[Event] = field(default_factory=list)
    end: int = 0
    """Bytes of ``data`` that are intact records; anything after is a torn tail."""
    revision: int = 0
    lines: int = 0
    """Intact lines read."""
    schema_version: int = 0
    torn: bool = False


def _corrupt(path: str, line_no: int, why: str, because: str = "more data follows it") -> StoreCorruptionError:
    return StoreCorruptionError(
        f"{path} line {line_no} is damaged ({why}) and {because}, so it is not the torn "
        f"tail of an interrupted append. agentkit will not skip it. Restore the file from "
        f"a backup, or move it aside to start the session anew."
    )


def scan(
    data: bytes,
    *,
    path: str,
    revision: int,
    first_line: int,
    want_events: bool = True,
) -> ScanResult:
    """Verify the record lines in ``data``; ``revision`` and ``first_line`` (1-based)
    describe the log just before ``data`` starts."""
    out = ScanResult(revision=revision)
    order = LogOrder()
    pos = 0
    size = len(data)
    line_no = first_line
    while pos < size:
        nl = data.find(b"\n", pos)
        line_end = size if nl == -1 else nl
        line = data[pos:line_end]
        where = f"{path} line {line_no}"
        try:
            rec = decode_record(line, where=where)
            if nl == -1:  # complete JSON but no newline: the write was cut short
                raise DamagedRecord(f"{where}: no line ending")
        except DamagedRecord as exc:
            why = str(exc)[len(where) + 2 :]  # the message is "<where>: <why>"; paths may hold ": "
            rest = b"" if nl == -1 else data[nl + 1 :]
            if rest.strip(b"\0"):
                # something follows the damaged line: intact records mean corruption in
                # the middle; more damage cannot come from one interrupted append either.
                raise _corrupt(path, line_no, why) from None
            if holds_intact_record(line):
                # e.g. a flipped line ending merged an acknowledged record with the last
                raise _corrupt(path, line_no, why, "it holds a whole record run together with more") from None
            out.torn = True
            break
        # a compacted log starts with one "compacted" record: the events that replaced the
        # archived ones plus those kept, at the revision the compaction set
        first = line_no == 2
        if rec.kind not in ("events", "compacted") or (rec.kind == "compacted" and not first):
            raise _corrupt(path, line_no, f"unexpected {rec.kind!r} record")
        payload = rec.data.get("events")
        rev = rec.data.get("rev")
        follows = rec.kind == "compacted" or (isinstance(payload, list) and rev == out.revision + len(payload))
        if not isinstance(payload, list) or not isinstance(rev, int) or isinstance(rev, bool) or not follows:
            raise StoreCorruptionError(
                f"{where} has a valid checksum but revision {rev!r} does not follow revision "
                f"{out.revision} (were lines duplicated or reordered?). Restore the file from a backup."
            )
        if want_events:
            try:
                for d in payload:
                    event = restore_event(d)
                    order.check(event, f"line {line_no}")
                    out.events.append(event)
            except OutOfOrder as exc:
                raise StoreCorruptionError(
                    f"{where} has a valid checksum but {exc}, so agentkit did not write it this way. "
                    f"Nothing was changed. Restore the file from a backup."
                ) from None
            except Unreadable as exc:
                raise StoreCorruptionError(
                    f"{where} holds an event agentkit cannot read ({exc}). Nothing was changed. If a newer "
                    f"agentkit wrote it, upgrade agentkit; otherwise restore the file from a backup."
                ) from None
        out.revision = rev
        out.schema_version = max(out.schema_version, rec.version)
        out.lines += 1
        line_no += 1
        pos = line_end + 1
        out.end = pos
    return out
