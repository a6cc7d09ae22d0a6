"""FileEventStore on real files: record format, torn tails, corruption, schema versions,
locks held by another process, read-only and full file systems, incremental appends."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from _env import MOUNT, reason
from _store_child import child_cmd, child_env, mount_works, remount, texts, tmpfs, user

from agentkit import (
    ConfigurationError,
    FileEventStore,
    SchemaVersionError,
    Session,
    StoreConflictError,
    StoreCorruptionError,
    StoreError,
    StoreLockTimeout,
    Usage,
)
from agentkit.events import AssistantMessageEvent, ToolResultEvent
from agentkit.messages import TextPart, ToolOutput
from agentkit.stores._records import encode_record


def fill(store: FileEventStore, sid: str, n: int, start: int = 0) -> int:
    rev = start
    for i in range(start, start + n):
        rev = store.append(sid, [user(f"e{i + 1}")], expected_revision=rev)
    return rev


def log_path(root: Path, sid: str = "s") -> Path:
    return root / sid / "events.jsonl"


def flip(path: Path, pos: int, mask: int) -> bytes:
    """Flip bits of the byte at ``pos`` (negative counts from the end); return the file."""
    data = bytearray(path.read_bytes())
    data[pos] ^= mask
    path.write_bytes(bytes(data))
    return bytes(data)


def line_starts(data: bytes) -> list[int]:
    starts = [0]
    for i, b in enumerate(data):
        if b == 0x0A and i + 1 < len(data):
            starts.append(i + 1)
    return starts


# -- format --------------------------------------------------------------------------


def test_every_record_is_a_checksummed_versioned_json_line(tmp_path):
    store = FileEventStore(tmp_path)
    fill(store, "s", 3)
    lines = log_path(tmp_path).read_bytes().splitlines()
    assert len(lines) == 4  # header + one line per append
    header = json.loads(lines[0])
    assert header["kind"] == "header" and header["session_id"] == "s" and header["v"] == 1
    for n, raw in enumerate(lines[1:], start=1):
        rec = json.loads(raw)
        assert rec["v"] == 1 and rec["kind"] == "events" and rec["rev"] == n
        body = raw[len(b'{"crc":"xxxxxxxx",') :]
        assert int(rec["crc"], 16) == zlib.crc32(body)
    assert not [p for p in (tmp_path / "s").iterdir() if p.name.startswith(".tmp")]


def test_constructor_refuses_bad_arguments(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigurationError, match="not a directory"):
        FileEventStore(tmp_path / "file")
    for kwargs in ({"lock_timeout": -1}, {"lock_timeout": "10"}, {"lock_timeout": float("nan")}, {"fsync": "yes"}):
        with pytest.raises(ConfigurationError):
            FileEventStore(tmp_path / "new", **kwargs)
    with pytest.raises(ConfigurationError):
        FileEventStore("")
    assert not (tmp_path / "new").exists()


def test_fsync_off_round_trips(tmp_path):
    store = FileEventStore(tmp_path, fsync=False)
    fill(store, "s", 5)
    assert texts(FileEventStore(tmp_path).load("s")) == [f"e{i}" for i in range(1, 6)]


def test_listing_ignores_locks_temp_and_foreign_entries(tmp_path):
    store = FileEventStore(tmp_path)
    fill(store, "s", 1)
    (tmp_path / "not-a-session").mkdir()  # no log inside
    (tmp_path / ".tmp-junk").write_text("x")
    (tmp_path / "stray.txt").write_text("x")
    assert store.list_sessions() == ["s"]


# -- torn tails ----------------------------------------------------------------------


def test_every_torn_tail_is_left_out_and_the_next_append_does_not_glue_onto_it(tmp_path):
    store = FileEventStore(tmp_path)
    fill(store, "s", 3)
    path = log_path(tmp_path)
    intact = path.read_bytes()
    last_start = line_starts(intact)[-1]
    cuts = sorted(set(range(last_start + 1, len(intact), 5)) | {last_start + 1, len(intact) - 1})
    for cut in cuts:
        path.write_bytes(intact[:cut])
        fresh = FileEventStore(tmp_path)
        loaded = fresh.load("s")
        assert loaded.revision == 2 and texts(loaded) == ["e1", "e2"], cut
        assert fresh.append("s", [user("after")], expected_revision=2) == 3
        reloaded = FileEventStore(tmp_path).load("s")
        assert texts(reloaded) == ["e1", "e2", "after"], cut
        assert path.read_bytes().count(b"\n") == 4  # header + 3 records, nothing glued


def test_zero_filled_tail_after_power_loss_is_left_out(tmp_path):
    store = FileEventStore(tmp_path)
    fill(store, "s", 2)
    with open(log_path(tmp_path), "ab") as fh:
        fh.write(b"\0" * 300)
    assert texts(FileEventStore(tmp_path).load("s")) == ["e1", "e2"]
    assert store.append("s", [user("e3")], expected_revision=2) == 3
    assert texts(FileEventStore(tmp_path).load("s")) == ["e1", "e2", "e3"]


def test_complete_json_without_newline_is_a_torn_write(tmp_path):
    store = FileEventStore(tmp_path)
    fill(store, "s", 2)
    path = log_path(tmp_path)
    path.write_bytes(path.read_bytes()[:-1])  # drop only the final newline
    assert FileEventStore(tmp_path).load("s").revision == 1


def test_a_conflicting_append_after_a_torn_tail_writes_nothing(tmp_path):
    store = FileEventStore(tmp_path)
    fill(store, "s", 2)
    path = log_path(tmp_path)
    torn = path.read_bytes()[:-10]
    path.write_bytes(torn)
    with pytest.raises(StoreConflictError):
        FileEventStore(tmp_path).append("s", [user("x")], expected_revision=2)
    assert path.read_bytes() == torn


# -- corruption ----------------------------------------------------------------------


def test_a_corrupt_record_in_the_middle_raises_naming_file_and_line(tmp_path):
    store = FileEventStore(tmp_path)
    fill(store, "s", 4)
    path = log_path(tmp_path)
    data = bytearray(path.read_bytes())
    third_record = line_starts(bytes(data))[3]  # line 4 of the file
    pos = data.index(b'"text":"e3"', third_record) + 9
    data[pos] ^= 0x01
    path.write_bytes(bytes(data))
    for s in (FileEventStore(tmp_path), store):
        with pytest.raises(StoreCorruptionError, match=rf"{path} line 4 is damaged \(checksum mismatch\)"):
            s.load("s")
    with pytest.raises(StoreCorruptionError, match="line 4"):
        FileEventStore(tmp_path).append("s", [user("x")], expected_revision=4)
    assert path.read_bytes() == bytes(data)  # refused appends write nothing


def test_a_damaged_last_record_is_indistinguishable_from_a_torn_write(tmp_path):
    # documented limit: damage confined to the final record looks like an interrupted
    # append, so that record is left out (and truncated by the next append)
    fill(FileEventStore(tmp_path), "s", 3)
    flip(log_path(tmp_path), -20, 0x04)
    assert FileEventStore(tmp_path).load("s").revision == 2


def test_a_damaged_header_is_corruption(tmp_path):
    fill(FileEventStore(tmp_path), "s", 1)
    flip(log_path(tmp_path), 30, 0x02)
    with pytest.raises(StoreCorruptionError, match="line 1"):
        FileEventStore(tmp_path).load("s")


def test_duplicated_records_with_valid_checksums_are_corruption(tmp_path):
    store = FileEventStore(tmp_path)
    fill(store, "s", 2)
    path = log_path(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([lines[0], lines[1], lines[1], lines[2]]))
    with pytest.raises(StoreCorruptionError, match="does not follow revision"):
        FileEventStore(tmp_path).load("s")


def _record(obj: dict) -> bytes:
    body = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()[1:]
    return b'{"crc":"%08x",' % zlib.crc32(body) + body + b"\n"


def test_a_record_from_a_newer_schema_is_refused_not_misread(tmp_path):
    store = FileEventStore(tmp_path)
    fill(store, "s", 2)
    path = log_path(tmp_path)
    before = path.read_bytes()
    newer = _record({"kind": "events", "v": 2, "rev": 3, "events": [], "new_field": "?"})
    path.write_bytes(before + newer)
    for call in (
        lambda: FileEventStore(tmp_path).load("s"),
        lambda: FileEventStore(tmp_path).append("s", [user("x")], expected_revision=2),
    ):
        with pytest.raises(SchemaVersionError, match="schema version 2.*upgrade agentkit"):
            call()
    assert path.read_bytes() == before + newer


def test_archives_are_checksummed_and_damage_raises(tmp_path):
    store = FileEventStore(tmp_path)
    store.archive("s", "a1", [user("old1"), user("old2")])
    path = tmp_path / "s" / "archives" / "a1.json"
    assert json.loads(path.read_bytes())["v"] == 1
    flip(path, len(path.read_bytes()) // 2, 0x10)
    with pytest.raises(StoreCorruptionError, match="a1.json"):
        store.load_archive("s", "a1")
    path.write_bytes(_record({"kind": "archive", "v": 7, "events": []}))
    with pytest.raises(SchemaVersionError):
        store.load_archive("s", "a1")
    # a checksum-valid archive whose event list holds a non-object is damage, not a crash
    path.write_bytes(_record({"kind": "archive", "v": 1, "events": ["not an event"]}))
    with pytest.raises(StoreCorruptionError, match="not a JSON object"):
        store.load_archive("s", "a1")


# -- commit cost ---------------------------------------------------------------------


def test_append_reads_only_what_other_writers_added(tmp_path, monkeypatch):
    a, b = FileEventStore(tmp_path), FileEventStore(tmp_path)
    rev = fill(a, "s", 300)
    assert b.load("s").revision == rev
    header = log_path(tmp_path).read_bytes().split(b"\n", 1)[0]
    read: list[int] = []
    real_pread = os.pread

    def counting_pread(fd, n, offset):
        data = real_pread(fd, n, offset)
        read.append(len(data))
        return data

    monkeypatch.setattr(os, "pread", counting_pread)
    rev = a.append("s", [user("a-301")], expected_revision=rev)
    assert sum(read) <= len(header) + 1  # only the header check, no history
    read.clear()
    before = log_path(tmp_path).stat().st_size
    rev = a.append("s", [user("a-302")], expected_revision=rev)
    added = log_path(tmp_path).stat().st_size - before
    read.clear()
    # b last saw revision 300: it reads exactly the two records a added since
    rev = b.append("s", [user("b-303")], expected_revision=rev)
    assert rev == 303
    assert sum(read) <= len(header) + 1 + 2 * added + 64
    monkeypatch.undo()
    assert texts(FileEventStore(tmp_path).load("s"))[-3:] == ["a-301", "a-302", "b-303"]


def test_cached_view_is_not_fooled_by_delete_and_recreate(tmp_path):
    a, b = FileEventStore(tmp_path), FileEventStore(tmp_path)
    fill(a, "s", 5)
    assert b.delete("s")
    fill(b, "s", 1)
    with pytest.raises(StoreConflictError) as info:
        a.append("s", [user("x")], expected_revision=5)
    assert info.value.actual_revision == 1
    assert a.append("s", [user("e2")], expected_revision=1) == 2
    assert texts(b.load("s")) == ["e1", "e2"]


# -- locks ---------------------------------------------------------------------------


def _start_lock_holder(root: Path, sid: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        child_cmd("hold-lock", root, sid),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_lock_held_by_another_process_times_out_naming_the_lock_and_is_never_stolen(tmp_path):
    FileEventStore(tmp_path).append("s", [user("e1")], expected_revision=0)
    holder = _start_lock_holder(tmp_path, "s")
    try:
        store = FileEventStore(tmp_path, lock_timeout=0.3)
        lock_file = str(tmp_path / ".locks" / "s.lock")
        t0 = time.monotonic()
        with pytest.raises(StoreLockTimeout, match=rf"{lock_file}.*another process") as info:
            store.append("s", [user("e2")], expected_revision=1)
        assert time.monotonic() - t0 >= 0.3
        assert isinstance(info.value, TimeoutError)
        with pytest.raises(StoreLockTimeout):
            store.load("s")
        holder.stdin.close()  # the holder releases its lock and exits
        assert holder.stdout.readline().strip() == "released"
        assert holder.wait(30) == 0
        assert store.append("s", [user("e2")], expected_revision=1) == 2
    finally:
        holder.kill()
        holder.wait(30)


def test_a_lock_of_a_killed_process_is_released_by_the_os(tmp_path):
    holder = _start_lock_holder(tmp_path, "s")
    holder.kill()
    holder.wait(30)
    assert FileEventStore(tmp_path, lock_timeout=5).append("s", [user("e1")], expected_revision=0) == 1


def test_a_lock_held_by_another_thread_times_out_too(tmp_path):
    holder = FileEventStore(tmp_path)
    held, release = threading.Event(), threading.Event()

    def hold():
        with holder._write_lock("s"):
            held.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(30)
        with pytest.raises(StoreLockTimeout, match="another thread of this process"):
            FileEventStore(tmp_path, lock_timeout=0.2).append("s", [user("x")], expected_revision=0)
    finally:
        release.set()
        t.join(30)
    assert FileEventStore(tmp_path).append("s", [user("x")], expected_revision=0) == 1


# -- read-only and full file systems -------------------------------------------------


def test_a_read_only_store_refuses_appends_clearly_and_keeps_everything(tmp_path):
    root = tmp_path / "ro"
    if mount_works():
        with tmpfs(root, "1m"):
            store = FileEventStore(root)
            fill(store, "s", 3)
            fill(store, "nolock", 2)
            os.unlink(root / ".locks" / "nolock.lock")
            remount(root, read_only=True)
            try:
                assert texts(FileEventStore(root).load("nolock")) == ["e1", "e2"]
                with pytest.raises(StoreError, match="read-only"):
                    store.append("s", [user("e4")], expected_revision=3)
                with pytest.raises(StoreError, match="read-only"):
                    store.append("new", [user("x")], expected_revision=0)
                assert texts(FileEventStore(root).load("s")) == ["e1", "e2", "e3"]
                assert store.load("missing") is None
            finally:
                remount(root, read_only=False)
            assert store.append("s", [user("e4")], expected_revision=3) == 4
    elif os.geteuid() != 0:  # permission bits bind an ordinary user
        store = FileEventStore(root)
        fill(store, "s", 3)
        for p in (log_path(root), root / ".locks" / "s.lock"):
            p.chmod(0o444)
        try:
            with pytest.raises(StoreError, match="permission denied"):
                store.append("s", [user("e4")], expected_revision=3)
            assert texts(FileEventStore(root).load("s")) == ["e1", "e2", "e3"]
        finally:
            for p in (log_path(root), root / ".locks" / "s.lock"):
                p.chmod(0o644)
    else:
        pytest.skip(reason("root without mount permission: no real way to make a directory read-only here; "
                           "run the tests as root where mounting a tmpfs is allowed (CI does)"))


@pytest.mark.skipif(not mount_works(), reason=MOUNT)
def test_a_full_disk_fails_the_append_clearly_and_loses_nothing(tmp_path):
    root = tmp_path / "small"
    with tmpfs(root, "256k"):
        filler = root / "filler"
        filler.write_bytes(b"x" * 64 * 1024)
        store = FileEventStore(root)
        acked, size = 0, 0
        with pytest.raises(StoreError, match="disk is full") as info:
            while True:
                acked = store.append("s", [user(f"e{acked + 1}", 3000)], expected_revision=acked)
                size = log_path(root).stat().st_size
        assert f"stays at revision {acked}" in str(info.value)
        assert acked > 10
        # a partial record was taken back: the log ends with the last acknowledged one
        assert log_path(root).stat().st_size == size
        loaded = FileEventStore(root).load("s")
        assert loaded.revision == acked
        assert texts(loaded) == [f"e{i}" for i in range(1, acked + 1)]
        filler.unlink()  # free space, and the same session object carries on
        assert store.append("s", [user("after", 3000)], expected_revision=acked) == acked + 1
        assert texts(FileEventStore(root).load("s"))[-2:] == [f"e{acked}", "after"]


def test_a_file_size_limit_fails_the_append_clearly_and_loses_nothing(tmp_path):
    limit = 64 * 1024
    proc = subprocess.run(
        child_cmd("fsize-limited", tmp_path, "s", limit),
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    acks = [int(line.split()[1]) for line in lines if line.startswith("ack ")]
    error = [line for line in lines if line.startswith("error ")]
    assert len(error) == 1 and "file size limit" in error[0]
    assert acks == list(range(1, len(acks) + 1)) and len(acks) >= 5
    assert int(error[0].split()[1]) == acks[-1]
    store = FileEventStore(tmp_path)
    loaded = store.load("s")
    assert loaded.revision == acks[-1]
    assert texts(loaded) == [f"e{i}" for i in acks]
    assert store.append("s", [user("after")], expected_revision=acks[-1]) == acks[-1] + 1
    assert texts(FileEventStore(tmp_path).load("s"))[-1] == "after"


# -- compaction ----------------------------------------------------------------------


def test_a_compacted_log_is_one_header_and_one_record_written_atomically(tmp_path):
    store = FileEventStore(tmp_path)
    fill(store, "s", 5)
    old_inode = log_path(tmp_path).stat().st_ino
    assert store.compact("s", "c1", expected_revision=5, remove=3, summary=[user("sum")]) == 6
    lines = log_path(tmp_path).read_bytes().splitlines()
    assert len(lines) == 2
    header, record = json.loads(lines[0]), json.loads(lines[1])
    assert header["kind"] == "header" and header["compacted_into"] == "c1"
    assert record["kind"] == "compacted" and record["rev"] == 6 and len(record["events"]) == 3
    assert log_path(tmp_path).stat().st_ino != old_inode  # renamed into place, not rewritten
    assert not [p for p in (tmp_path / "s").rglob(".tmp-*")]
    assert texts(store.load_archive("s", "c1")) == ["e1", "e2", "e3"]
    # appends continue the compacted log, and a fresh reader sees it all
    assert store.append("s", [user("e6")], expected_revision=6) == 7
    assert texts(FileEventStore(tmp_path).load("s")) == ["sum", "e4", "e5", "e6"]


def test_other_store_objects_notice_a_compaction_despite_their_cached_views(tmp_path):
    a, b = FileEventStore(tmp_path), FileEventStore(tmp_path)
    fill(a, "s", 4)
    assert b.load("s").revision == 4  # b caches its view of the old log
    assert a.compact("s", "c1", expected_revision=4, remove=2) == 5
    with pytest.raises(StoreConflictError) as info:
        b.append("s", [user("x")], expected_revision=4)
    assert info.value.actual_revision == 5
    assert b.append("s", [user("e5")], expected_revision=5) == 6
    assert a.append("s", [user("e6")], expected_revision=6) == 7
    assert texts(FileEventStore(tmp_path).load("s")) == ["e3", "e4", "e5", "e6"]


def test_compaction_drops_a_torn_tail(tmp_path):
    store = FileEventStore(tmp_path)
    fill(store, "s", 3)
    path = log_path(tmp_path)
    path.write_bytes(path.read_bytes()[:-7])
    assert FileEventStore(tmp_path).compact("s", "c1", expected_revision=2, remove=1) == 3
    assert texts(FileEventStore(tmp_path).load("s")) == ["e2"]
    assert path.read_bytes().count(b"\n") == 2


def test_a_compacted_record_anywhere_but_first_is_corruption(tmp_path):
    store = FileEventStore(tmp_path)
    fill(store, "s", 2)
    path = log_path(tmp_path)
    path.write_bytes(path.read_bytes() + _record({"kind": "compacted", "v": 1, "rev": 9, "events": []}) * 2)
    with pytest.raises(StoreCorruptionError, match="line 4 .*unexpected 'compacted' record"):
        FileEventStore(tmp_path).load("s")


def test_a_log_under_another_session_id_is_refused_not_mixed_in(tmp_path):
    # what a renamed directory, or "Alice" and "alice" on a case-insensitive file
    # system (macOS by default), look like: one log reached under two ids
    store = FileEventStore(tmp_path)
    fill(store, "alice", 2)
    (tmp_path / "alice").rename(tmp_path / "Alice")
    before = log_path(tmp_path, "Alice").read_bytes()
    for call in (
        lambda: FileEventStore(tmp_path).load("Alice"),
        lambda: FileEventStore(tmp_path).append("Alice", [user("x")], expected_revision=2),
        lambda: FileEventStore(tmp_path).compact("Alice", "c1", expected_revision=2, remove=1),
    ):
        with pytest.raises(StoreCorruptionError, match="holds the log of session 'alice', not 'Alice'"):
            call()
    assert log_path(tmp_path, "Alice").read_bytes() == before


def test_no_file_descriptor_outlives_a_call_even_a_failing_one(tmp_path):
    def open_fds() -> set[str]:
        return set(os.listdir("/proc/self/fd"))

    store = FileEventStore(tmp_path)
    fill(store, "s", 2)
    before = open_fds()
    for _ in range(20):
        rev = store.load("s").revision
        rev = store.append("s", [user("x")], expected_revision=rev)
        with pytest.raises(StoreConflictError):
            store.append("s", [user("stale")], expected_revision=rev - 1)
        rev = store.compact("s", f"c{rev}", expected_revision=rev, remove=1)
        with pytest.raises(ConfigurationError):
            store.compact("s", "c-too-far", expected_revision=rev, remove=99)
        store.archive("s", "copy", [])
        assert store.load_archive("s", "copy") == ()
        assert store.list_sessions() == ["s"]
    fill(store, "bad", 3)
    flip(log_path(tmp_path, "bad"), line_starts(log_path(tmp_path, "bad").read_bytes())[1] + 30, 0x01)
    for _ in range(20):
        with pytest.raises(StoreCorruptionError):
            FileEventStore(tmp_path).append("bad", [user("x")], expected_revision=3)
    assert store.delete("s")
    assert open_fds() == before


@pytest.mark.skipif(not mount_works(), reason=MOUNT)
def test_a_compaction_on_a_full_disk_changes_nothing_and_can_be_repeated(tmp_path):
    root = tmp_path / "small"
    with tmpfs(root, "256k"):
        store = FileEventStore(root)
        rev = 0
        for i in range(30):  # ~90 KiB of log
            rev = store.append("s", [user(f"e{i + 1}", 3000)], expected_revision=rev)
        before = log_path(root).read_bytes()
        filler = root / "filler"
        with open(filler, "wb") as fh:  # leave room for the small archive, not the new log
            free = os.statvfs(root).f_bavail * os.statvfs(root).f_frsize
            fh.write(b"x" * (free - 16 * 1024))
        with pytest.raises(StoreError, match="disk is full") as info:
            store.compact("s", "c1", expected_revision=rev, remove=2, summary=[user("sum")])
        assert f"was not compacted and stays at revision {rev}" in str(info.value)
        assert log_path(root).read_bytes() == before
        assert FileEventStore(root).load("s").revision == rev
        assert not list((root / "s").glob(".tmp-*"))
        assert texts(store.load_archive("s", "c1")) == ["e1", "e2"]  # written first; the log failed
        filler.unlink()
        assert store.compact("s", "c1", expected_revision=rev, remove=2, summary=[user("sum")]) == rev + 1
        assert texts(FileEventStore(root).load("s"))[:2] == ["sum", "e3"]
        assert texts(store.load_archive("s", "c1")) == ["e1", "e2"]


def test_a_store_object_keeps_a_bounded_number_of_log_views(tmp_path):
    from agentkit.stores._views import MAX_VIEWS

    store = FileEventStore(tmp_path, fsync=False)
    store._views._max = 8  # the bound, scaled down from MAX_VIEWS for the test
    assert MAX_VIEWS >= 1024
    for n in range(20):
        fill(store, f"s{n}", 2)
    assert len(store._views) == 8
    for n in range(20):  # sessions whose view was dropped rescan once and carry on
        assert store.append(f"s{n}", [user("e3")], expected_revision=2) == 3
        with pytest.raises(StoreConflictError):
            store.append(f"s{n}", [user("stale")], expected_revision=2)
    assert all(FileEventStore(tmp_path).load(f"s{n}").revision == 3 for n in range(20))


def test_a_flipped_line_ending_before_the_last_record_is_corruption_not_a_torn_tail(tmp_path):
    # merged with the last record, an acknowledged record would otherwise be left out as
    # a "torn tail", and the next append would truncate both
    store = FileEventStore(tmp_path)
    fill(store, "s", 4)
    path = log_path(tmp_path)
    intact = path.read_bytes()
    newline = line_starts(intact)[-1] - 1
    for bit in range(8):
        data = bytearray(intact)
        data[newline] ^= 1 << bit
        path.write_bytes(bytes(data))
        with pytest.raises(StoreCorruptionError, match="line 4 is damaged .*whole record run together"):
            FileEventStore(tmp_path).load("s")
        with pytest.raises(StoreCorruptionError):
            FileEventStore(tmp_path).append("s", [user("x")], expected_revision=3)
        assert path.read_bytes() == bytes(data)
    # the same bytes cut short (a real torn tail) are still left out
    path.write_bytes(intact[: newline + 40])
    assert FileEventStore(tmp_path).load("s").revision == 3


def test_every_single_bit_flip_before_the_last_record_is_detected(tmp_path):
    """Exhaustive: each bit of each byte before the last record (the checksum's hex
    digits included: an upper-case digit is not what was written)."""
    store = FileEventStore(tmp_path)
    fill(store, "s", 3)
    path = log_path(tmp_path)
    intact = path.read_bytes()
    undetected = []
    for pos in range(line_starts(intact)[-1]):
        for bit in range(8):
            data = bytearray(intact)
            data[pos] ^= 1 << bit
            path.write_bytes(bytes(data))
            try:
                FileEventStore(tmp_path).load("s")
                undetected.append((pos, bit))
            except (StoreCorruptionError, SchemaVersionError):
                pass
    assert undetected == []



def test_a_deep_record_written_by_an_older_version_loads_and_the_log_stays_writable(tmp_path):
    # agentkit 0.1.0 accepted any nesting its encoder managed; json.loads needs more stack
    store = FileEventStore(tmp_path)
    fill(store, "s", 1)
    levels = 990
    event = (
        '{"data":{"d":' + "[" * levels + "]" * levels + '},"id":"deep","runtime_type":"t",'
        '"seq":2,"timestamp":0,"type":"runtime"}'
    )
    rest = ('"events":[' + event + '],"kind":"events","rev":2,"v":1}').encode()
    with open(log_path(tmp_path), "ab") as fh:
        fh.write(b'{"crc":"%08x",' % zlib.crc32(rest) + rest + b"\n")
    if sys.version_info < (3, 12):  # what reading it with json.loads did there (3.12+ copes)
        with pytest.raises(RecursionError):
            json.loads(log_path(tmp_path).read_bytes().splitlines()[-1])
    for reader in (store, FileEventStore(tmp_path)):
        loaded = reader.load("s")
        assert loaded.revision == 2 and loaded.events[1].id == "deep"
        value, depth = loaded.events[1].data["d"], 0
        while isinstance(value, list):
            value, depth = (value[0] if value else None), depth + 1
        assert depth == levels
    assert FileEventStore(tmp_path).append("s", [user("after")], expected_revision=2) == 3
    assert texts(FileEventStore(tmp_path).load("s").events[2:]) == ["after"]


@pytest.mark.skipif(not mount_works(), reason=MOUNT)
def test_a_full_disk_at_a_sessions_first_append_leaves_no_session_behind(tmp_path):
    root = tmp_path / "small"
    with tmpfs(root, "256k"):
        store = FileEventStore(root)
        fill(store, "other", 1)
        filler = root / "filler"
        filler.write_bytes(b"x" * (256 - 48) * 1024)  # room for a header, not for the record
        with pytest.raises(StoreError, match="disk is full"):
            store.append("s", [user("big", 100_000)], expected_revision=0)
        for reader in (store, FileEventStore(root)):
            assert reader.list_sessions() == ["other"]
            assert reader.load("s") is None
        assert not (root / "s").exists()
        filler.unlink()
        assert store.append("s", [user("big", 100_000)], expected_revision=0) == 1
        assert texts(FileEventStore(root).load("s")) == ["big"]
        assert FileEventStore(root).list_sessions() == ["other", "s"]


# -- hostile records: a valid checksum, contents no agentkit writes -------------------


def _hostile_log(tmp_path: Path, *events: dict) -> Path:
    """A log of two real events followed by one record (written by the store's own
    record writer, so its checksum is valid) holding ``events`` as given."""
    store = FileEventStore(tmp_path)
    store.append("s", [user("e1").with_seq(1), user("e2").with_seq(2)], expected_revision=0)
    path = log_path(tmp_path)
    with open(path, "ab") as fh:
        fh.write(encode_events_record(list(events), 2 + len(events)))
    return path


def encode_events_record(events: list[dict], revision: int) -> bytes:
    return encode_record("events", {"rev": revision, "events": events})


def _user_dict(seq: int = 3, **changes: object) -> dict:
    data = user("hostile").with_seq(seq).to_dict()
    data.update(changes)
    return data


def _assistant_dict(**changes: object) -> dict:
    data = AssistantMessageEvent(content=(TextPart(text="a"),), usage=Usage(input_tokens=1)).with_seq(3).to_dict()
    data.update(changes)
    return data


def _result_dict(**changes: object) -> dict:
    data = ToolResultEvent(tool_call_id="c1", tool_name="t", output=ToolOutput.text("ok")).with_seq(3).to_dict()
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("event", "why"),
    [
        (_user_dict(content="hello"), "content must be a list of content parts, not str"),
        (_user_dict(content=["hello"]), "a content part must be a JSON object, not str"),
        (_user_dict(content=[{"kind": "text", "text": 5}]), r"\$\.content\[0\]\.text is int 5, not a string"),
        (_user_dict(content=[{"kind": "image", "data": 7, "media_type": "image/png"}]), "TypeError"),
        (_user_dict(seq="3"), r"\$\.seq is str '3', not an integer"),
        (_user_dict(seq=True), r"\$\.seq is bool True, not an integer"),
        (_user_dict(seq=-4), r"\$\.seq is -4, below 0"),
        (_user_dict(id=17), r"\$\.id is int 17, not a string"),
        (_user_dict(id=""), r"\$\.id is empty"),
        (_user_dict(timestamp="noon"), r"\$\.timestamp is str 'noon', not a number"),
        (_user_dict(generation_id=["g"]), r"\$\.generation_id is list \['g'\], not a string or null"),
        (_assistant_dict(usage="lots"), "AttributeError"),
        (_assistant_dict(finish_reason=3), r"\$\.finish_reason is int 3, not a string or null"),
        (_assistant_dict(request_seq="2"), r"\$\.request_seq is str '2', not an integer or null"),
        (_result_dict(tool_name=None), r"\$\.tool_name is NoneType None, not a string"),
        (_result_dict(output={"kind": "text", "value": {"a": 1}}), r"\$\.output\.value is dict .*not the text"),
        (_result_dict(output={"kind": "content", "value": "x"}), "content must be a list"),
        (_result_dict(output={"kind": "sideways", "value": "x"}), r"\$\.output\.kind is str 'sideways', not one of"),
        ({"type": "runtime", "id": "r", "timestamp": 0, "seq": 3, "runtime_type": "t", "data": [1]}, "must be a dict"),
        ({"type": "context-replaced", "id": "c", "timestamp": 0, "seq": 3, "messages": "all"}, "TypeError"),
        ({"type": "context-replaced", "id": "c", "timestamp": 0, "seq": 3,
          "messages": [{"role": "user", "content": [{"kind": "text", "text": "x"}]}], "reason": 9},
         r"\$\.reason is int 9, not a string"),
        ({"type": "user-message", "id": "u", "timestamp": 0}, "missing field 'content'"),
        (["not", "an", "object"], "an event is a JSON list, not an object"),
    ],
)
def test_a_checksum_valid_record_with_wrong_field_types_is_corruption_naming_file_and_line(tmp_path, event, why):
    path = _hostile_log(tmp_path, event)
    before = path.read_bytes()
    for call in (
        lambda: FileEventStore(tmp_path).load("s"),
        lambda: Session.open("s", store=FileEventStore(tmp_path)),
    ):
        with pytest.raises(StoreCorruptionError) as caught:
            call()
        message = str(caught.value)
        assert message.startswith(f"{path} line 3 holds an event agentkit cannot read"), message
        assert re.search(why, message), message
    assert path.read_bytes() == before  # nothing was changed


def test_a_repeated_event_id_is_corruption_naming_both_lines(tmp_path):
    first = FileEventStore(tmp_path)
    first.append("s", [user("e1").with_seq(1)], expected_revision=0)
    repeated = first.load("s").events[0].to_dict() | {"seq": 2}
    with open(log_path(tmp_path), "ab") as fh:
        fh.write(encode_events_record([repeated], 2))
    for call in (lambda: FileEventStore(tmp_path).load("s"), lambda: Session.open("s", store=FileEventStore(tmp_path))):
        with pytest.raises(StoreCorruptionError, match=re.escape(
            f"{log_path(tmp_path)} line 3 has a valid checksum but event id {repeated['id']!r} appears twice "
            f"(first at line 2)"
        )):
            call()


def test_a_repeated_event_id_within_one_record_is_corruption(tmp_path):
    twice = _user_dict(seq=3)
    path = _hostile_log(tmp_path, twice, twice | {"seq": 4})
    where = re.escape(str(path))
    with pytest.raises(StoreCorruptionError, match=rf"{where} line 3 .* appears twice \(first at line 3\)"):
        FileEventStore(tmp_path).load("s")


def test_a_seq_going_backwards_is_corruption_naming_the_line(tmp_path):
    path = _hostile_log(tmp_path, _user_dict(seq=2))  # the log already holds seq 1 and 2
    with pytest.raises(StoreCorruptionError, match=re.escape(
        f"{path} line 3 has a valid checksum but event "
    )) as caught:
        Session.open("s", store=FileEventStore(tmp_path))
    assert "has seq 2 after seq 2 (at line 2); seq numbers only go up" in str(caught.value)


def test_events_never_committed_by_a_session_keep_seq_0_and_load(tmp_path):
    """seq 0 (an event a store was given directly, never numbered by a Session) is not
    an order: such logs, and a compacted log whose summary was never numbered, load."""
    store = FileEventStore(tmp_path)
    fill(store, "s", 3)
    store.append("s", [user("numbered").with_seq(9), user("plain")], expected_revision=3)
    store.compact("s", "c1", expected_revision=5, remove=2, summary=[user("sum")])
    assert texts(FileEventStore(tmp_path).load("s")) == ["sum", "e3", "numbered", "plain"]


def test_an_archive_with_wrong_field_types_or_a_repeated_id_is_corruption_naming_its_line(tmp_path):
    store = FileEventStore(tmp_path)
    store.archive("s", "a1", [user("old1")])
    path = tmp_path / "s" / "archives" / "a1.json"
    good = store.load_archive("s", "a1")[0].to_dict()
    for events, why in (
        ([good | {"content": "old"}], "content must be a list of content parts"),
        ([good, good], f"event 2: event id {good['id']!r} appears twice"),
    ):
        path.write_bytes(encode_record("archive", {"session_id": "s", "archive_id": "a1", "events": events}))
        with pytest.raises(StoreCorruptionError, match=rf"^{re.escape(str(path))} line 1 .*{re.escape(why)}"):
            FileEventStore(tmp_path).load_archive("s", "a1")
