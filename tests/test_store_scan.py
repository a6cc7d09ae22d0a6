"""Reading a file-store log (agentkit/stores/_scan.py): the intact prefix, the torn tail
left out, and every other kind of damage refused with the file and line named."""

from __future__ import annotations

import json
import zlib

import pytest
from _store_child import user

from agentkit import SchemaVersionError, StoreCorruptionError
from agentkit.stores._records import encode_events
from agentkit.stores._scan import ScanResult, scan


def rec(n: int, *texts_: str, rev: int | None = None, kind: str = "events") -> bytes:
    """The record line of an append of ``texts_`` bringing the log to ``rev`` (n)."""
    return encode_events([user(t) for t in texts_], n if rev is None else rev, kind=kind)


def forged(obj: dict) -> bytes:
    """A checksum-valid record line for any object."""
    body = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()[1:]
    return b'{"crc":"%08x",' % zlib.crc32(body) + body + b"\n"


def run(data: bytes, **kw) -> ScanResult:
    args = {"path": "/logs/s.jsonl", "revision": 0, "first_line": 2, **kw}
    return scan(data, **args)


def text_of(result: ScanResult) -> list[str]:
    return [e.content[0].text for e in result.events]


def test_intact_records_are_read_in_order():
    data = rec(1, "a") + rec(3, "b", "c") + rec(4, "d")
    out = run(data)
    assert text_of(out) == ["a", "b", "c", "d"]
    assert (out.end, out.revision, out.lines, out.schema_version, out.torn) == (len(data), 4, 3, 1, False)


def fields(result: ScanResult) -> tuple:
    return result.events, result.end, result.revision, result.lines, result.schema_version, result.torn


def test_nothing_to_scan():
    assert fields(run(b"")) == ([], 0, 0, 0, 0, False)
    assert fields(run(b"", revision=7)) == ([], 0, 7, 0, 0, False)


def test_a_torn_first_line_leaves_nothing():
    assert fields(run(rec(1, "a")[:12])) == ([], 0, 0, 0, 0, True)
    assert fields(run(rec(4, "a")[:-1], revision=3)) == ([], 0, 3, 0, 0, True)


def test_a_scan_continues_from_the_revision_and_line_it_is_given():
    data = rec(6, "f") + rec(7, "g")
    out = run(data, revision=5, first_line=9)
    assert (out.revision, out.lines, out.end) == (7, 2, len(data))
    with pytest.raises(StoreCorruptionError, match=r"^/logs/s.jsonl line 9 has a valid checksum but revision 6 "
                       r"does not follow revision 4"):
        run(data, revision=4, first_line=9)


def test_want_events_false_verifies_without_building_events():
    data = rec(1, "a") + rec(2, "b")
    out = run(data, want_events=False)
    assert out.events == [] and out.revision == 2 and out.end == len(data)


@pytest.mark.parametrize("cut", [1, 20, -30, -2])
def test_a_torn_last_line_is_left_out(cut):
    good = rec(1, "a") + rec(2, "b")
    torn = rec(3, "c")[:cut]
    out = run(good + torn)
    assert out.torn and out.end == len(good) and out.revision == 2 and out.lines == 2
    assert text_of(out) == ["a", "b"]


def test_a_whole_last_record_without_its_line_ending_is_a_torn_tail():
    good = rec(1, "a")
    out = run(good + rec(2, "b")[:-1])
    assert out.torn and out.end == len(good) and out.revision == 1


def test_zero_bytes_after_a_torn_tail_are_still_a_torn_tail():
    """A crash can leave a file extended with zeros after the last write."""
    good = rec(1, "a")
    out = run(good + rec(2, "b")[:15] + b"\n" + b"\0" * 64)
    assert out.torn and out.end == len(good)
    out = run(good + b"\0" * 10)
    assert out.torn and out.end == len(good)


def test_damage_followed_by_more_data_is_corruption_naming_the_line():
    data = rec(1, "a") + rec(2, "b")[:-10] + b"\n" + rec(3, "c")
    with pytest.raises(StoreCorruptionError, match=r"^/logs/s.jsonl line 5 is damaged \(not a complete JSON "
                       r"record\) and more data follows it.*Restore the file from a backup"):
        run(data, first_line=4)
    with pytest.raises(StoreCorruptionError, match="line 3 is damaged"):
        run(rec(1, "a") + b"garbage\n" + b"more garbage")
    with pytest.raises(StoreCorruptionError, match="line 3 is damaged"):
        run(rec(1, "a") + b"garbage\nx")  # one byte after it is more data too


def test_the_reason_is_named_even_when_the_path_holds_a_colon():
    with pytest.raises(StoreCorruptionError, match=r"^/logs/a: b/s.jsonl line 2 is damaged \(checksum mismatch\) and"):
        run(rec(1, "a").replace(b'"rev":1', b'"rev":2') + rec(2, "b"), path="/logs/a: b/s.jsonl")
    with pytest.raises(StoreCorruptionError, match=r"line 2 is damaged \(not a complete JSON record\) and it holds"):
        run(rec(1, "a")[:-1] + rec(2, "b")[:9], path="/logs/a: b/s.jsonl")


def test_a_damaged_last_line_holding_a_whole_record_is_corruption():
    data = rec(1, "a") + rec(2, "b")[:-1] + rec(3, "c")[:30]
    with pytest.raises(StoreCorruptionError, match=r"line 3 is damaged \(not a complete JSON record\) and it holds "
                       r"a whole record run together with more"):
        run(data)
    # a whole record and one more byte, no line ending at all
    with pytest.raises(StoreCorruptionError, match="line 3 is damaged .* and it holds a whole record"):
        run(rec(1, "a") + rec(2, "b")[:-1] + b"x")


def test_a_line_of_several_torn_records_at_the_end_is_one_torn_tail():
    good = rec(1, "a")
    tail = b"".join(rec(i, f"t{i}")[: 25 + i] for i in range(2, 40))
    out = run(good + tail)
    assert out.torn and out.end == len(good) and out.revision == 1


@pytest.mark.parametrize("kind", ["archive", "header", "later"])
def test_records_of_another_kind_are_corruption(kind):
    data = rec(1, "a") + forged({"kind": kind, "v": 1, "rev": 2, "events": []})
    with pytest.raises(StoreCorruptionError, match=f"line 3 is damaged \\(unexpected '{kind}' record\\)"):
        run(data)


def test_a_compacted_record_may_only_be_the_first_record():
    compacted = rec(0, "summary", rev=9, kind="compacted")
    out = run(compacted + rec(10, "next"))
    assert text_of(out) == ["summary", "next"] and out.revision == 10
    with pytest.raises(StoreCorruptionError, match=r"line 3 is damaged \(unexpected 'compacted' record\)"):
        run(rec(1, "a") + rec(0, "summary", rev=2, kind="compacted"))
    with pytest.raises(StoreCorruptionError, match="unexpected 'compacted' record"):
        run(compacted, first_line=3)


@pytest.mark.parametrize(
    "obj",
    [
        {"kind": "events", "v": 1, "rev": 3, "events": []},  # a gap
        {"kind": "events", "v": 1, "rev": 1, "events": [{}]},  # a repeat
        {"kind": "events", "v": 1, "rev": True, "events": []},
        {"kind": "events", "v": 1, "rev": "2", "events": [{}]},
        {"kind": "events", "v": 1, "events": [{}]},
        {"kind": "events", "v": 1, "rev": 2, "events": {"0": {}}},
        {"kind": "events", "v": 1, "rev": 2},
        {"kind": "compacted", "v": 1, "rev": True, "events": []},
        {"kind": "compacted", "v": 1, "rev": 5, "events": None},
    ],
)
def test_a_revision_that_does_not_follow_is_corruption(obj):
    first = rec(0, "summary", rev=1, kind="compacted") if obj["kind"] == "compacted" else b""
    data = rec(1, "a") + forged(obj) if not first else forged(obj)
    with pytest.raises(StoreCorruptionError, match="has a valid checksum but revision .* does not follow"):
        run(data)


@pytest.mark.parametrize("event", [5, "text", None, [], {"type": "from-the-future", "id": "x", "timestamp": 0}, {}])
def test_an_event_agentkit_cannot_read_is_corruption_not_skipped(event):
    data = rec(1, "a") + forged({"kind": "events", "v": 1, "rev": 2, "events": [event]})
    with pytest.raises(StoreCorruptionError, match=r"^/logs/s.jsonl line 3 holds an event agentkit cannot read"):
        run(data)
    # verifying only (an append checking the tail) does not read events
    assert run(data, want_events=False).revision == 2


def test_the_newest_schema_version_seen_is_reported_and_newer_ones_refused():
    assert run(rec(1, "a")).schema_version == 1
    newer = forged({"kind": "events", "v": 2, "rev": 2, "events": []})
    with pytest.raises(SchemaVersionError, match="line 3 has schema version 2"):
        run(rec(1, "a") + newer)
