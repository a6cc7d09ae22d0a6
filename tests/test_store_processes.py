"""FileEventStore across real processes: concurrent writers, a stale writer, and a writer
killed with SIGKILL in a tight append loop, many times."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import time

import pytest
from _procs import stale_writer_race
from _store_child import child_cmd, child_env, texts, user

from agentkit import FileEventStore, StoreConflictError


def test_writer_processes_detect_conflicts_and_lose_or_duplicate_nothing(tmp_path):
    writers, per_writer = 4, 25
    procs = [
        subprocess.Popen(
            child_cmd("writer", tmp_path, "shared", f"w{n}", per_writer),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for n in range(writers)
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.startswith("done ")
    loaded = FileEventStore(tmp_path).load("shared")
    got = texts(loaded)
    assert loaded.revision == writers * per_writer == len(got)
    assert sorted(got) == sorted(f"w{n}-{i}" for n in range(writers) for i in range(per_writer))
    for n in range(writers):
        assert [t for t in got if t.startswith(f"w{n}-")] == [f"w{n}-{i}" for i in range(per_writer)]


def test_a_stale_writer_in_another_process_gets_a_conflict_and_writes_nothing(tmp_path):
    store = FileEventStore(tmp_path)
    store.append("s", [user("e1")], expected_revision=0)
    stale_writer_race(child_cmd("stale-writer", tmp_path, "s"),
                      lambda: store.append("s", [user("e2")], expected_revision=1), env=child_env())
    assert texts(FileEventStore(tmp_path).load("s")) == ["e1", "e2"]


def _read_lines(proc: subprocess.Popen, deadline: float, want_acks: int) -> tuple[list[int], bytes]:
    """Read ``ack`` lines until ``want_acks`` arrived (or the deadline)."""
    fd = proc.stdout.fileno()
    buf = b""
    acks: list[int] = []
    while len(acks) < want_acks and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        acks.extend(int(line.split()[1]) for line in lines if line.startswith(b"ack "))
    return acks, buf


def _kill_round(root, rng: random.Random, *, on_growth: bool, mode: str = "append-loop") -> list[int]:
    """Start an append loop (or ``mode``), let it acknowledge a few calls, SIGKILL it;
    return the acknowledged revisions. ``on_growth`` kills as soon as the log starts
    growing again (mid-write, with big records); otherwise after a random short delay."""
    log = root / "s" / "events.jsonl"
    pad = 400_000 if on_growth else rng.choice([10, 2_000, 60_000])
    proc = subprocess.Popen(
        child_cmd(mode, root, "s", pad), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env()
    )
    try:
        acks, rest = _read_lines(proc, time.monotonic() + 60, rng.randint(1, 8))
        assert acks, "the child acknowledged nothing"
        if on_growth:
            size = log.stat().st_size
            deadline = time.monotonic() + 10
            while log.stat().st_size == size and time.monotonic() < deadline:
                pass
        else:
            time.sleep(rng.random() * 0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        tail = rest + proc.stdout.read()  # acks flushed before the kill are still in the pipe
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    return acks + [int(line.split()[1]) for line in tail.split(b"\n") if line.startswith(b"ack ")]


def _die_mid_append(root, rng: random.Random) -> list[int]:
    """Run a child that acknowledges a few appends and then dies (SIGXFSZ) halfway
    through writing the next record; return the acknowledged revisions."""
    proc = subprocess.run(
        child_cmd("die-mid-append", root, "s", rng.choice([2_000, 60_000]), rng.randint(1, 3)),
        capture_output=True, env=child_env(), timeout=300,
    )
    assert proc.returncode == -signal.SIGXFSZ, proc.stderr.decode(errors="replace")
    assert not (root / "s" / "events.jsonl").read_bytes().endswith(b"\n")  # a torn tail, every time
    return [int(line.split()[1]) for line in proc.stdout.split(b"\n") if line.startswith(b"ack ")]


# 32 (and 24) child processes, each importing agentkit: the whole test's time is the
# machine's speed times the rounds (over 120 s on 2 loaded cores), so its hang guard is
# per test, not the suite's 120 s; each round's own waits stay bounded by events.
@pytest.mark.timeout(900)
def test_sigkill_in_a_tight_append_loop_keeps_exactly_an_acknowledged_prefix(tmp_path):
    """24 kills at random moments and as soon as the log grows (mid-write, with big
    records, when the timing works out); every fourth round dies halfway through a write
    by itself, so torn tails are met and repaired whatever the load on the machine."""
    seed = int(os.environ.get("AGENTKIT_KILL_SEED", "20261129"))
    rng = random.Random(seed)
    log = tmp_path / "s" / "events.jsonl"
    max_acked = 0
    torn_tails = 0
    for rounds in range(1, 33):
        if rounds % 4 == 0:
            acks = _die_mid_append(tmp_path, rng)
        else:
            acks = _kill_round(tmp_path, rng, on_growth=rounds % 2 == 1)
        max_acked = max([max_acked, *acks])
        if not log.read_bytes().endswith(b"\n"):
            torn_tails += 1
        loaded = FileEventStore(tmp_path).load("s")
        where = f"seed {seed}, round {rounds}"
        # exactly a prefix e1, e2, ... (no gap, duplicate or glued bytes) holding every
        # append the killed process acknowledged, plus at most the one in flight
        assert texts(loaded) == [f"e{i}" for i in range(1, loaded.revision + 1)], where
        assert max_acked <= loaded.revision <= max_acked + 1, where
    assert torn_tails >= 8
    print(f"\n{rounds} processes killed (seed {seed}): {max_acked} acknowledged appends kept, "
          f"{torn_tails} torn tails left out and repaired")


@pytest.mark.timeout(900)  # 24 child processes: see the test above
def test_sigkill_during_compactions_leaves_every_event_in_the_log_or_an_archive(tmp_path):
    """A loop appends and compacts (archive first, then the log is renamed into place);
    killed at random moments, a load always sees one whole log: the acknowledged
    revision, the newest summary, then a contiguous run of events; the archives hold
    every earlier event once, in order (plus, at most, a copy of the active log's first
    events from a compaction killed between its two renames, which the next run finishes)."""
    seed = int(os.environ.get("AGENTKIT_KILL_SEED", "20261129"))
    rng = random.Random(seed)
    store = FileEventStore(tmp_path)
    max_acked = 0
    for kill in range(1, 25):
        acks = _kill_round(tmp_path, rng, on_growth=kill % 3 == 0, mode="compact-loop")
        max_acked = max([max_acked, *acks])
        where = f"seed {seed}, kill {kill}"
        loaded = store.load("s")
        assert max_acked <= loaded.revision <= max_acked + 1, where
        active = texts(loaded)
        numbered = [int(t[1:]) for t in active if t.startswith("e")]
        assert numbered == list(range(numbered[0], numbered[0] + len(numbered))), where
        compactions = sorted(int(p.stem[1:]) for p in (tmp_path / "s" / "archives").glob("c*.json"))
        archived = [
            int(t[1:])
            for r in compactions
            for t in texts(store.load_archive("s", f"c{r}"))
            if t.startswith("e")
        ]
        first = numbered[0]
        assert archived[: first - 1] == list(range(1, first)), where
        assert archived[first - 1 :] == numbered[: len(archived) - first + 1], where
        if first > 1:  # compacted at least once: the newest summary leads the log
            assert active[0].startswith("sum-") and int(active[0][4:]) in compactions, where
    assert compactions, "no compaction completed"


def test_a_store_object_with_a_cached_view_stays_correct_across_killed_writers_and_repairs(tmp_path):
    """This process caches its view of the log; between its appends, writer processes
    append, get killed mid-write (leaving torn tails) and repair each other's torn tails.
    Its stale appends conflict with the true revision and write nothing; its current
    ones land exactly after the last intact record."""
    rng = random.Random(int(os.environ.get("AGENTKIT_KILL_SEED", "20261129")))
    mine = FileEventStore(tmp_path)
    path = tmp_path / "s" / "events.jsonl"
    revision = mine.append("s", [user("e1")], expected_revision=0)
    torn_seen = 0
    kill = 0
    while kill < 16:
        kill += 1
        if kill % 4 == 0:  # dies halfway through a write: a torn tail for sure
            _die_mid_append(tmp_path, rng)
        else:
            _kill_round(tmp_path, rng, on_growth=kill % 2 == 0)
        truth = FileEventStore(tmp_path).load("s").revision
        torn_seen += not path.read_bytes().endswith(b"\n")
        before = path.read_bytes()
        try:
            mine.append("s", [user("stale")], expected_revision=revision)
            raise AssertionError("a stale append was accepted")
        except StoreConflictError as exc:
            assert (exc.expected_revision, exc.actual_revision) == (revision, truth), kill
        assert path.read_bytes() == before  # a conflict never truncates a torn tail either
        revision = mine.append("s", [user(f"e{truth + 1}")], expected_revision=truth)
        loaded = FileEventStore(tmp_path).load("s")
        assert texts(loaded) == [f"e{i}" for i in range(1, revision + 1)], kill
    assert torn_seen >= 4
    print(f"\n{kill} killed writers, {torn_seen} torn tails repaired by writer processes or by this one")


pytestmark = pytest.mark.processes  # real processes and servers: tox runs them on py311
