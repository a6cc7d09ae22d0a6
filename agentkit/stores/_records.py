"""The on-disk record format of the file store: one checksummed JSON object per line.

A record line is a JSON object whose first member is its checksum::

    {"crc":"1c291ca3","events":[...],"kind":"events","rev":12,"v":1}\\n

The crc32 (8 lowercase hex digits) covers every byte after ``{"crc":"xxxxxxxx",`` up to
and including the closing brace, so the version, the kind and the payload are all
protected. Every record carries its schema version ``v``; a checksum-valid record with a
version newer than :data:`~agentkit.stores.base.SCHEMA_VERSION` is refused with
SchemaVersionError instead of being misread. The checksum is verified first, so a
damaged ``v`` is damage, not a version.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._json import dumps, loads
from ..errors import ConfigurationError, SchemaVersionError, StoreCorruptionError
from ..events import Event, event_from_dict
from .base import SCHEMA_VERSION

_PREFIX = b'{"crc":"'
_BODY_START = len(_PREFIX) + 8 + 2  # after '{"crc":"xxxxxxxx",'


class DamagedRecord(Exception):
    """A line is not an intact record (torn by a crash, or corrupted). Internal."""


@dataclass(frozen=True)
class Record:
    """A decoded, checksum-verified record."""

    kind: str
    version: int
    data: dict[str, Any]


def _canonical(obj: dict[str, Any]) -> bytes:
    return dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def encode_record(kind: str, data: dict[str, Any]) -> bytes:
    """One record line (ending in a newline) for ``data`` with kind ``kind``."""
    body = _canonical({**data, "kind": kind, "v": SCHEMA_VERSION})
    rest = body[1:]  # drop the opening brace; the crc member takes its place
    return b'{"crc":"%08x",' % zlib.crc32(rest) + rest + b"\n"


def _not_serialisable(exc: Exception) -> ConfigurationError:
    return ConfigurationError(
        f"cannot store these events: they are not JSON-serialisable ({exc}). "
        f"Event data must be plain JSON values."
    )


def _encode_with_events(kind: str, data: dict[str, Any], events: Sequence[Event]) -> bytes:
    try:
        return encode_record(kind, {**data, "events": [e.to_dict() for e in events]})
    except (TypeError, ValueError) as exc:
        raise _not_serialisable(exc) from None


def stored_copies(events: Sequence[Event]) -> list[Event]:
    """What a store keeps of ``events``: copies through JSON, as the file store reads
    them back, so the in-memory store refuses what the file store refuses
    (ConfigurationError) and later changes to the caller's objects never reach it."""
    try:
        text = dumps([e.to_dict() for e in events], ensure_ascii=True)
    except (TypeError, ValueError) as exc:
        raise _not_serialisable(exc) from None
    return [event_from_dict(d) for d in loads(text)]


def encode_events(events: Sequence[Event], revision: int, *, kind: str = "events") -> bytes:
    """The record line of one append: ``events`` bringing the log to ``revision``
    (``kind="compacted"``: the first record of a log rewritten by a compaction).

    Raises ConfigurationError (before anything is written) when an event is not JSON
    serialisable."""
    return _encode_with_events(kind, {"rev": revision}, events)


def encode_archive(session_id: str, archive_id: str, events: Sequence[Event]) -> bytes:
    """The one record of an archive file; ConfigurationError when not serialisable."""
    return _encode_with_events("archive", {"session_id": session_id, "archive_id": archive_id}, events)


def decode_record(line: bytes, *, where: str) -> Record:
    """Decode and verify one line (without its newline).

    Raises DamagedRecord when the line is torn or corrupt (its checksum is checked
    first), SchemaVersionError when a checksum-valid record was written by a newer
    agentkit, StoreCorruptionError when a checksum-valid record has no valid version or
    kind. ``where`` names the file and line for messages."""
    try:
        obj = loads(line)
    except (ValueError, UnicodeDecodeError):
        raise DamagedRecord(f"{where}: not a complete JSON record") from None
    if not isinstance(obj, dict):
        raise DamagedRecord(f"{where}: not a JSON object")
    if not line.startswith(_PREFIX) or len(line) <= _BODY_START or line[_BODY_START - 2 : _BODY_START] != b'",':
        raise DamagedRecord(f"{where}: no checksum")
    digits = line[len(_PREFIX) : _BODY_START - 2]
    if digits.strip(b"0123456789abcdef"):  # exactly as written: int() would also take "AB"
        raise DamagedRecord(f"{where}: unreadable checksum")
    stored = int(digits, 16)
    if zlib.crc32(line[_BODY_START:]) != stored:
        raise DamagedRecord(f"{where}: checksum mismatch")
    # only a checksum-valid record can say it is from a newer agentkit: a flipped bit in
    # "v" is damage (left out like a torn tail when it is the last line), not a reason to upgrade
    version = obj.get("v")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where} has schema version {version}, but this agentkit reads schema versions "
            f"up to {SCHEMA_VERSION}. It was written by a newer agentkit: upgrade agentkit to "
            f"read it (nothing was changed)."
        )
    # a crash cannot produce a checksum-valid record: these are not torn tails to leave out
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _not_ours(where, f"invalid schema version {version!r}")
    kind = obj.get("kind")
    if not isinstance(kind, str):
        raise _not_ours(where, "no kind")
    return Record(kind=kind, version=version, data=obj)


def _not_ours(where: str, why: str) -> StoreCorruptionError:
    return StoreCorruptionError(
        f"{where} has a valid checksum but {why}, so agentkit did not write it this way and it is not "
        f"the torn tail of an interrupted append. Nothing was changed. Restore the file from a backup."
    )


def holds_intact_record(line: bytes) -> bool:
    """True when a damaged line still contains a whole, checksum-valid record with more
    on the line: a record that lost its line ending (run into the next one, or into a
    damaged byte), or one after other bytes. A torn append never does: it is a cut-short
    prefix of a single record, so such a line is damage to acknowledged data, not a crash
    remnant. Each record prefix is followed once to every closing brace after it, with a
    running checksum (no recursive parsing: the caller's stack depth does not matter),
    so this always ends."""
    start = line.find(_PREFIX)
    while start != -1:
        digits = line[start + len(_PREFIX) : start + _BODY_START - 2]
        if line[start + _BODY_START - 2 : start + _BODY_START] == b'",' and not digits.strip(b"0123456789abcdef"):
            stored, crc, pos = int(digits, 16), 0, start + _BODY_START
            brace = line.find(b"}", pos)
            while brace != -1:
                crc, pos = zlib.crc32(line[pos : brace + 1], crc), brace + 1
                if crc == stored and (start, pos) != (0, len(line)) and _is_record(line[start:pos]):
                    return True
                brace = line.find(b"}", pos)
        start = line.find(_PREFIX, start + 1)
    return False


def _is_record(part: bytes) -> bool:
    try:
        decode_record(part, where="")
    except DamagedRecord:
        return False
    except (SchemaVersionError, StoreCorruptionError):  # checksum-valid: a whole record
        return True
    return True
