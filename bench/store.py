"""FileEventStore append latency early and late in one session's log, and its size;
Session.open time for a long session with retention and without.

    python3 bench/store.py                 # default: 10,000 events, in a temp dir
    python3 bench/store.py --dir /var/tmp  # put the logs on another file system
    python3 bench/store.py --open-only     # only the Session.open comparison (100,000 events)

For fsync on and off, one session receives one event per append (a 91-character user
message, the shape of a chat turn). We time the 200 appends starting at event 10 and the
200 starting at event 10,000 and report their median and p90; between the two windows
the log is filled with fsync off (same store object, so the figures are not affected).
Also reported: bytes on disk per event, and the time to load the whole log (10,199
events by default: 9 before the early window, 200 in it, filled to 9,999, 200 late).
The late/early ratio should stay near 1: an append costs O(events appended), not
O(history).

    python3 bench/store.py --compare       # file vs PostgreSQL, side by side

``--compare`` starts a throwaway PostgreSQL server (tests/_pg.py: Debian's binaries,
fsync on, 127.0.0.1) and measures, for FileEventStore (fsync on) and PostgresEventStore:
the latency of 500 one-event appends from one process (p50, p90), and the throughput of
4 processes appending 250 one-event batches each, to their own sessions and to one shared
session with compare-and-swap (reload and retry on StoreConflictError; conflicts counted).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentkit import FileEventStore, FunctionModel, Retention, Session, StoreConflictError
from agentkit.events import AssistantMessageEvent, UserMessageEvent
from agentkit.messages import TextPart  # noqa: E402

WINDOW = 200
TEXT = "please look at the quarterly report and tell me which region grew the most, and why: "


def _event(n: int) -> UserMessageEvent:
    return UserMessageEvent(content=(TextPart(text=f"{TEXT}{n:06d}"),))


def _timed_window(store: FileEventStore, sid: str, revision: int) -> tuple[list[float], int]:
    times = []
    for _ in range(WINDOW):
        ev = _event(revision + 1)
        t0 = time.perf_counter()
        revision = store.append(sid, [ev], expected_revision=revision)
        times.append(time.perf_counter() - t0)
    return times, revision


def _p90(xs: list[float]) -> float:
    return sorted(xs)[int(len(xs) * 0.9) - 1]


def run(root: str, fsync: bool, late_at: int) -> dict[str, float]:
    store = FileEventStore(root, fsync=fsync)
    sid = "bench"
    revision = 0
    store.fsync = False
    while revision < 9:  # the early window starts at event 10
        revision = store.append(sid, [_event(revision + 1)], expected_revision=revision)
    store.fsync = fsync
    early, revision = _timed_window(store, sid, revision)
    store.fsync = False
    while revision < late_at - 1:
        revision = store.append(sid, [_event(revision + 1)], expected_revision=revision)
    store.fsync = fsync
    late, revision = _timed_window(store, sid, revision)
    size = os.path.getsize(os.path.join(root, sid, "events.jsonl"))
    t0 = time.perf_counter()
    loaded = FileEventStore(root).load(sid)
    load_s = time.perf_counter() - t0
    assert loaded is not None and loaded.revision == revision
    return {
        "early_median_ms": statistics.median(early) * 1e3,
        "early_p90_ms": _p90(early) * 1e3,
        "late_median_ms": statistics.median(late) * 1e3,
        "late_p90_ms": _p90(late) * 1e3,
        "ratio": statistics.median(late) / statistics.median(early),
        "bytes_per_event": size / revision,
        "events": revision,
        "load_ms": load_s * 1e3,
    }


OPEN_RETENTION = Retention(max_events=200, keep_last=8)
OPEN_REPEATS = 5


def _answer(n: int) -> AssistantMessageEvent:
    return AssistantMessageEvent(content=(TextPart(text=f"the north region, because {n:06d}"),))


def _summary(messages: list[object], *, reason: str, cancel: object) -> str:
    return f"{len(messages)} earlier messages about quarterly reports"


def _fill_plain(root: str, sid: str, events: int) -> None:
    """``events`` user/assistant events in one active log (batches of 1,000, fsync off)."""
    store = FileEventStore(root, fsync=False)
    revision = 0
    while revision < events:
        batch = [(_event(n) if n % 2 else _answer(n)).with_seq(n)
                 for n in range(revision + 1, min(revision + 1000, events) + 1)]
        revision = store.append(sid, batch, expected_revision=revision)


def _fill_retained(root: str, sid: str, events: int) -> None:
    """A real session with retention, turn after turn, until ``events`` were committed."""
    model = FunctionModel(lambda request: "the north region, because it sold more")
    store = FileEventStore(root, fsync=False)
    with Session(model, store=store, session_id=sid, compactor=_summary, retention=OPEN_RETENTION) as s:
        n = 0
        while s.events[-1].seq < events if s.events else True:
            n += 1
            s.push_user_message(f"{TEXT}{n:06d}")
            s.generate()


def _time_open(root: str, sid: str, retention: Retention | None) -> tuple[float, int, int]:
    """Median Session.open time (ms), active events, all events (history)."""
    times = []
    active = total = 0
    for _ in range(OPEN_REPEATS):
        store = FileEventStore(root)  # a fresh store object: nothing cached
        t0 = time.perf_counter()
        s = Session.open(sid, store=store, model=FunctionModel(lambda r: "x"), retention=retention)
        times.append(time.perf_counter() - t0)
        active = len(s.events)
        total = s.events[-1].seq
        s.close()
    return statistics.median(times) * 1e3, active, total


def run_open(parent: str | None, events: int) -> None:
    print(f"Session.open of a session of {events:,} events, median of {OPEN_REPEATS} opens "
          f"(retention: max_events={OPEN_RETENTION.max_events}, keep_last={OPEN_RETENTION.keep_last})")
    print(f"{'session':<22} {'open':>10} {'active events':>14} {'all events':>11}")
    for label, fill, retention in (("without retention", _fill_plain, None),
                                   ("with retention", _fill_retained, OPEN_RETENTION)):
        with tempfile.TemporaryDirectory(dir=parent) as root:
            fill(root, "long", events)
            ms, active, total = _time_open(root, "long", retention)
        print(f"{label:<22} {ms:>7.1f} ms {active:>14,} {total:>11,}")


# -- file vs PostgreSQL ---------------------------------------------------------------

LATENCY_APPENDS = 500
PROCS, PER_PROC = 4, 250


def _open(backend: str, target: str, schema: str = "bench") -> Any:
    if backend == "file":
        return FileEventStore(target)
    from agentkit.stores.postgres import PostgresEventStore

    return PostgresEventStore(target, schema=schema, pool_size=1)


def _worker(backend: str, target: str, sid: str, n: int) -> None:
    """One of the PROCS processes: append n events to sid with compare-and-swap."""
    store = _open(backend, target)
    current = store.load(sid)
    revision = current.revision if current else 0
    conflicts = 0
    print("ready", flush=True)
    sys.stdin.readline()  # all processes start together
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                revision = store.append(sid, [_event(i)], expected_revision=revision)
                break
            except StoreConflictError as exc:
                conflicts += 1
                revision = exc.actual_revision
    print(f"done {time.perf_counter() - t0:.6f} {conflicts}", flush=True)


def _throughput(backend: str, target: str, shared: bool) -> tuple[float, int]:
    """(events per second over all processes, conflicts) for PROCS writer processes."""
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", backend, target, "shared" if shared else f"own-{n}", str(PER_PROC)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(PROCS)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    conflicts = 0
    for p in procs:
        out, _ = p.communicate(timeout=600)
        conflicts += int(out.split()[2])
    wall = time.perf_counter() - t0
    return PROCS * PER_PROC / wall, conflicts


def _latency(backend: str, target: str) -> tuple[float, float]:
    store = _open(backend, target)
    times, revision = [], 0
    for i in range(LATENCY_APPENDS):
        ev = _event(i)
        t0 = time.perf_counter()
        revision = store.append("latency", [ev], expected_revision=revision)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, _p90(times) * 1e3


def compare(parent: str | None) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from _pg import Cluster, find_bin_dir

    from agentkit.stores.postgres import PostgresEventStore

    bin_dir = find_bin_dir()
    if bin_dir is None:
        sys.exit("--compare needs the PostgreSQL server binaries (Debian: apt-get install postgresql)")
    cluster = Cluster(bin_dir, fsync=True)
    try:
        with PostgresEventStore(cluster.conninfo, schema="bench") as pg:
            pg.migrate()
        print(f"file vs PostgreSQL {os.path.basename(os.path.dirname(bin_dir))} (fsync on for both; server on "
              f"127.0.0.1), python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.1f}")
        print(f"{'store':<11} {'append p50':>11} {'p90':>9} {'4 procs, own sessions':>22} "
              f"{'4 procs, one session (CAS)':>27} {'conflicts':>9}")
        for backend in ("file", "postgres"):
            with tempfile.TemporaryDirectory(dir=parent) as root:
                target = root if backend == "file" else cluster.conninfo
                if backend == "postgres":
                    with PostgresEventStore(target, schema="bench") as pg:
                        for sid in pg.list_sessions():
                            pg.delete(sid)
                p50, p90 = _latency(backend, target)
                own, _ = _throughput(backend, target, shared=False)
                one, conflicts = _throughput(backend, target, shared=True)
            print(f"{backend:<11} {p50:>8.3f} ms {p90:>6.3f} ms {own:>15.0f} ev/s {one:>20.0f} ev/s {conflicts:>9}")
    finally:
        cluster.destroy()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=None, help="parent directory for the logs (default: system temp)")
    parser.add_argument("--late", type=int, default=10_000, help="where the late window starts (default 10000)")
    parser.add_argument("--open", type=int, default=100_000, metavar="EVENTS",
                        help="events of the Session.open comparison (default 100000; 0 skips it)")
    parser.add_argument("--open-only", action="store_true", help="run only the Session.open comparison")
    parser.add_argument("--compare", action="store_true", help="file vs PostgreSQL latency and throughput")
    args = parser.parse_args()
    if args.compare:
        compare(args.dir)
        return
    if args.open_only:
        run_open(args.dir, args.open)
        return
    print(f"FileEventStore, python {sys.version.split()[0]}, window {WINDOW} appends of one event")
    print(f"{'fsync':<6} {'@10 median':>11} {'@10 p90':>9} {'@' + str(args.late) + ' median':>14} "
          f"{'p90':>8} {'late/early':>10} {'bytes/event':>12} {'load all':>10} {'events':>7}")
    for fsync in (True, False):
        with tempfile.TemporaryDirectory(dir=args.dir) as root:
            r = run(root, fsync, args.late)
        print(
            f"{'on' if fsync else 'off':<6} {r['early_median_ms']:>8.3f} ms {r['early_p90_ms']:>6.3f} ms "
            f"{r['late_median_ms']:>11.3f} ms {r['late_p90_ms']:>5.3f} ms {r['ratio']:>10.2f} "
            f"{r['bytes_per_event']:>12.0f} {r['load_ms']:>7.0f} ms {r['events']:>7.0f}"
        )
    if args.open:
        print()
        run_open(args.dir, args.open)


if __name__ == "__main__":
    main()
