"""The file store's record format (agentkit/stores/_records.py): exact bytes, checksums
verified before anything else is believed, and what counts as a whole record."""

from __future__ import annotations

import json
import zlib

import pytest
from _store_child import texts, user

from agentkit import ConfigurationError, FileEventStore, SchemaVersionError, StoreCorruptionError
from agentkit.events import RuntimeEvent, UserMessageEvent
from agentkit.messages import TextPart
from agentkit.stores._records import (
    DamagedRecord,
    Record,
    decode_record,
    encode_archive,
    encode_events,
    encode_record,
    holds_intact_record,
    stored_copies,
)


def record(obj: dict) -> bytes:
    """A checksum-valid record line (without its newline) for any object, built here
    independently of the encoder."""
    body = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()[1:]
    return b'{"crc":"%08x",' % zlib.crc32(body) + body


def test_a_record_is_exactly_these_bytes():
    body = b'"events":[],"kind":"events","rev":7,"v":1}'
    expected = b'{"crc":"%08x",' % zlib.crc32(body) + body + b"\n"
    assert encode_record("events", {"rev": 7, "events": []}) == expected
    assert encode_events([], 7) == expected
    compacted = record({"events": [], "kind": "compacted", "rev": 7, "v": 1}) + b"\n"
    assert encode_events([], 7, kind="compacted") == compacted


def test_records_are_ascii_with_escaped_text_and_round_trip(tmp_path):
    text = "héllo ✓ 😀 \u2028 \"quoted\" \\ \n end"
    line = encode_events([user(text)], 1)
    assert line.isascii() and line.count(b"\n") == 1 and line.endswith(b"\n")
    rec = decode_record(line[:-1], where="x")
    assert rec.data["events"][0]["content"][0]["text"] == text
    store = FileEventStore(tmp_path)
    event = UserMessageEvent(content=(TextPart(text=text),))
    store.append("s", [event, RuntimeEvent(runtime_type="ünïcode", data={"ключ": "値 ✓"})], expected_revision=0)
    loaded = FileEventStore(tmp_path).load("s").events
    assert loaded[0] == event
    assert loaded[1].runtime_type == "ünïcode" and loaded[1].data == {"ключ": "値 ✓"}
    assert (tmp_path / "s" / "events.jsonl").read_bytes().isascii()


def test_decode_returns_the_verified_record():
    line = encode_record("events", {"rev": 3, "events": [], "extra": "x"})[:-1]
    rec = decode_record(line, where="f line 2")
    assert rec == Record(kind="events", version=1, data=json.loads(line))
    assert rec.data["rev"] == 3 and rec.data["extra"] == "x"


def test_archive_records_name_their_session_and_archive():
    rec = decode_record(encode_archive("s1", "a1", [user("old")])[:-1], where="x")
    assert rec.kind == "archive" and rec.data["session_id"] == "s1" and rec.data["archive_id"] == "a1"
    assert [e["content"][0]["text"] for e in rec.data["events"]] == ["old"]


def _flip_hex(line: bytes) -> bytes:
    digits = line[8:16]
    return line[:8] + digits.upper() + line[16:]


@pytest.mark.parametrize(
    "make, why",
    [
        (lambda good: good[:-5], "not a complete JSON record"),
        (lambda good: b"\xff" + good, "not a complete JSON record"),
        (lambda good: b"[1, 2]", "not a JSON object"),
        (lambda good: b'"text"', "not a JSON object"),
        (lambda good: b'{"kind":"events","v":1,"crc":"00000000"}', "no checksum"),
        (lambda good: b'{"crc":"00000000"}', "no checksum"),
        (lambda good: b'{"crc":"0000000000","v":1}', "no checksum"),
        (lambda good: good[:8] + b"zzzzzzzz" + good[16:], "unreadable checksum"),
        (lambda good: good[:8] + b" 1a2b3c4" + good[16:], "unreadable checksum"),
        (lambda good: good.replace(b'"rev":1', b'"rev":2'), "checksum mismatch"),
    ],
)
def test_damaged_lines_are_reported_with_where_and_why(make, why):
    good = encode_events([user("x")], 1)[:-1]
    with pytest.raises(DamagedRecord, match=f"^the log line 9: {why}$"):
        decode_record(make(good), where="the log line 9")


def test_an_upper_case_checksum_is_not_what_was_written():
    good = encode_events([user("x")], 1)[:-1]
    if good[8:16].upper() == good[8:16]:  # all digits: make the check meaningful
        good = encode_events([user("y")], 1)[:-1]
    assert good[8:16].upper() != good[8:16]
    with pytest.raises(DamagedRecord, match="unreadable checksum"):
        decode_record(_flip_hex(good), where="w")


def test_the_checksum_is_verified_before_the_schema_version():
    """A flipped bit in "v" ("1" -> "3") is damage, not a record from a newer agentkit."""
    good = encode_events([user("x")], 1)[:-1]
    flipped = good.replace(b'"v":1}', b'"v":3}')
    assert flipped != good
    with pytest.raises(DamagedRecord, match="checksum mismatch"):
        decode_record(flipped, where="w")
    with pytest.raises(SchemaVersionError, match="w has schema version 2.*up to 1.*upgrade agentkit"):
        decode_record(record({"events": [], "kind": "events", "rev": 1, "v": 2}), where="w")


@pytest.mark.parametrize("version", [0, -1, "1", True, None, 1.0])
def test_a_checksum_valid_record_with_an_invalid_version_is_corruption(version):
    obj = {"events": [], "kind": "events", "rev": 1}
    if version is not None:
        obj["v"] = version
    with pytest.raises(StoreCorruptionError, match=r"^w has a valid checksum but invalid schema version"):
        decode_record(record(obj), where="w")


@pytest.mark.parametrize("kind", [None, 5, ["events"]])
def test_a_checksum_valid_record_without_a_kind_is_corruption(kind):
    obj = {"events": [], "rev": 1, "v": 1}
    if kind is not None:
        obj["kind"] = kind
    with pytest.raises(StoreCorruptionError, match="valid checksum but no kind"):
        decode_record(record(obj), where="w")


def test_a_flipped_version_in_the_last_record_is_left_out_like_a_torn_tail(tmp_path):
    store = FileEventStore(tmp_path)
    rev = 0
    for i in range(3):
        rev = store.append("s", [user(f"e{i + 1}")], expected_revision=rev)
    path = tmp_path / "s" / "events.jsonl"
    intact = path.read_bytes()
    last = intact.rstrip(b"\n").rsplit(b"\n", 1)[1]
    at = intact.rindex(b'"v":1}')
    assert at > len(intact) - len(last)
    damaged = bytearray(intact)
    damaged[at + 4] ^= 0x02  # "1" -> "3"
    path.write_bytes(bytes(damaged))
    loaded = FileEventStore(tmp_path).load("s")
    assert loaded.revision == 2 and texts(loaded) == ["e1", "e2"]
    # the same flip in an earlier record is corruption, not a version
    damaged = bytearray(intact)
    damaged[intact.index(b'"v":1}', intact.index(b"\n") + 1) + 4] ^= 0x02
    path.write_bytes(bytes(damaged))
    with pytest.raises(StoreCorruptionError, match="line 2 is damaged"):
        FileEventStore(tmp_path).load("s")


def test_holds_intact_record_finds_a_whole_record_before_or_after_another():
    a = encode_events([user("a")], 1)[:-1]
    b = encode_events([user("b")], 2)[:-1]
    assert holds_intact_record(a + b)  # a line ending lost between two records
    assert holds_intact_record(a + b[:20])  # a whole record, then a torn one
    assert holds_intact_record(b[:20] + a)  # garbage, then a whole record
    assert holds_intact_record(b"x" + a)
    assert holds_intact_record(a + b"x")
    assert holds_intact_record(a[:-1]) is False  # a torn append: a prefix of one record
    damaged = a.replace(b'"rev":1', b'"rev":7')  # whole JSON, but not the bytes that were written
    assert not holds_intact_record(damaged + b[:20]) and not holds_intact_record(b[:20] + damaged)
    assert not holds_intact_record(a)  # nothing else on the line: nothing run together
    assert not holds_intact_record(b"")
    newer = record({"events": [], "kind": "events", "rev": 1, "v": 5})
    assert holds_intact_record(newer + b[:10])
    odd = record({"events": [], "kind": 5, "rev": 1, "v": 1})
    assert holds_intact_record(b[:10] + odd)


def test_a_checksum_that_matches_bytes_that_are_not_a_record_is_not_a_record():
    body = b'"not":json}'
    fake = b'{"crc":"%08x",' % zlib.crc32(body) + body
    with pytest.raises(DamagedRecord, match="not a complete JSON record"):
        decode_record(fake, where="w")
    b = encode_events([user("b")], 2)[:-1]
    assert not holds_intact_record(fake + b[:20]) and not holds_intact_record(b[:20] + fake + b"x")


def test_a_line_of_several_torn_records_holds_none_and_is_judged_quickly():
    torn = [encode_events([user(f"t{i}")], i + 1)[: 30 + i] for i in range(50)]
    line = b"".join(torn)
    assert line.count(b'{"crc":"') == 50
    assert not holds_intact_record(line)
    assert not holds_intact_record(b'{"crc":"' * 200)
    assert holds_intact_record(line + encode_events([user("whole")], 9)[:-1])
    assert holds_intact_record(b'{"crc":"' * 3 + encode_events([user("whole")], 9)[:-1])


def test_stored_copies_are_independent_json_copies():
    data = {"k": [1, 2]}
    original = RuntimeEvent(runtime_type="r", data=data)
    copy = stored_copies([original])
    assert copy == [original] and copy[0] is not original
    data["k"].append(3)
    assert copy[0].data == {"k": [1, 2]}
    with pytest.raises(ConfigurationError, match="not JSON-serialisable.*plain JSON values"):
        stored_copies([unserialisable(object())])


def unserialisable(bad: object) -> RuntimeEvent:
    """An event whose data was changed after it was checked (the caller kept a reference)."""
    ev = RuntimeEvent(runtime_type="r", data={"x": []})
    ev.data["x"].append(bad)
    return ev


@pytest.mark.parametrize("bad", [object(), {1, 2}, b"bytes"])
def test_unserialisable_events_are_refused_before_anything_is_written(bad):
    ev = unserialisable(bad)
    for call in (lambda: encode_events([ev], 1), lambda: encode_archive("s", "a", [ev])):
        with pytest.raises(ConfigurationError, match="cannot store these events: they are not JSON-serialisable"):
            call()


def test_an_acknowledged_last_record_whose_line_ending_flipped_is_not_dropped(tmp_path):
    """Its bytes are a whole record plus one: a torn append is never that, so it is
    corruption to report, not a tail to leave out (and truncate on the next append)."""
    store = FileEventStore(tmp_path)
    store.append("s", [user("e1")], expected_revision=0)
    store.append("s", [user("e2")], expected_revision=1)
    path = tmp_path / "s" / "events.jsonl"
    intact = path.read_bytes()
    for bit in range(8):
        damaged = intact[:-1] + bytes([intact[-1] ^ (1 << bit)])
        path.write_bytes(damaged)
        with pytest.raises(StoreCorruptionError, match="line 3 is damaged"):
            FileEventStore(tmp_path).load("s")
        with pytest.raises(StoreCorruptionError):
            FileEventStore(tmp_path).append("s", [user("x")], expected_revision=2)
        assert path.read_bytes() == damaged
