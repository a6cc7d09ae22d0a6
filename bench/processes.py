"""Many processes on one store: what currentness costs, and turns per second.

    python3 bench/processes.py              # FileEventStore and PostgreSQL (a throwaway server)
    python3 bench/processes.py --file-only  # without PostgreSQL
    python3 bench/processes.py --turns 50   # turns per process (default 500; a turn takes milliseconds)

1. The currentness check. A pooled session of 200 events (100 turns); for each store,
   the cost per call (median and p99 of 2,000 calls) of asking the store for the
   session's head (``store.head()``; a store without it is asked with ``load()``, and the
   table says so, and adds what a head check costs at least: a stat of the log file, or
   one indexed query), of a read (``pending_approvals()``, as this build does it: with
   the head check once reads are current), and of both one after the other.
2. How soon a listener hears what another process commits: that process pushes 40
   runtime events carrying their commit time; p50, p99 and max of the delay until this
   process's listener is called (the file store's follower looks every 0.25 s;
   PostgreSQL's listens, LISTEN/NOTIFY).
3. Turns per second with 1, 2 and 4 processes on one store: each process has a
   SessionPool and runs ``ask()`` turns against a zero-latency FunctionModel, in
   conversations of its own (distinct) or all in one conversation (shared); the wall time
   runs from a common start until the last process ends. Each process times its waits
   for the conversation's turn lock; their p50 and p99 over all processes are printed
   (a store without a turn lock prints n/a). Errors (e.g. StoreConflictError) are counted,
   not retried.

The figures are printed, never asserted; docs/performance.md records a run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentkit import FileEventStore, FunctionModel, SessionPool
from agentkit.events import AssistantMessageEvent, UserMessageEvent
from agentkit.messages import TextPart  # noqa: E402
from agentkit.session._follow import current_head  # noqa: E402
from agentkit.stores import EventStore  # noqa: E402

CHECKS = 2000
PROCS = (1, 2, 4)
_LOCK_NAMES = ("turn_lock", "generation_lock")  # the port's name, and the file store's older one


def _open(backend: str, target: str, schema: str) -> Any:
    if backend == "file":
        return FileEventStore(target)
    from agentkit.stores.postgres import PostgresEventStore

    return PostgresEventStore(target, schema=schema, pool_size=2)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _timed(fn: Callable[[], object]) -> list[float]:
    times = []
    for _ in range(CHECKS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def currentness(backend: str, target: str, schema: str) -> list[tuple[str, float, float]]:
    """(what, median µs, p99 µs) of the head check, a read, and both."""
    store = _open(backend, target, schema)
    revision = 0
    for i in range(100):
        revision = store.append("current", [UserMessageEvent(content=(TextPart(text=f"question {i}"),)),
                                            AssistantMessageEvent(content=(TextPart(text=f"answer {i}"),))],
                                expected_revision=revision)
    with SessionPool(store, model=FunctionModel(lambda r: "ok")) as pool:
        session = pool.get("current")
        log = session._log
        head = "head()" if callable(getattr(store, "head", None)) else "load() (no head() in this build)"
        checks: list[tuple[str, Callable[[], object]]] = [
            (f"head check: {head}", lambda: current_head(log)),
            ("read: pending_approvals()", session.pending_approvals),
            ("head check + read", lambda: (current_head(log), session.pending_approvals())),
        ]
        if not callable(getattr(store, "head", None)):
            checks.append(_primitive(backend, store))
        rows = []
        for what, fn in checks:
            times = _timed(fn)
            rows.append((what, statistics.median(times) * 1e6, _pct(times, 0.99) * 1e6))
    close = getattr(store, "close", None)
    if callable(close):
        close()
    return rows


def _primitive(backend: str, store: Any) -> tuple[str, Callable[[], object]]:
    """What a head check costs at least, for a build whose store has no head() yet: the
    file store's is a stat of the log (size and identity), PostgreSQL's one indexed query."""
    if backend == "file":
        path = store._log_path("current")
        return "(no head(): os.stat of the log)", lambda: os.stat(path)
    query = store._pg.q("SELECT revision FROM {s}.sessions WHERE session_id = %s")
    return "(no head(): SELECT revision, one row)", lambda: store._pg.read(
        "head", lambda conn: conn.execute(query, ["current"]).fetchone())


# -- listeners across processes ----------------------------------------------------------

PUSHES = 40


def _pusher(backend: str, target: str, schema: str, sid: str) -> None:
    """Another process: PUSHES runtime events to ``sid``, each carrying its commit time."""
    store = _open(backend, target, schema)
    with SessionPool(store) as pool:
        session = pool.get(sid)
        for i in range(PUSHES):
            session.push_runtime_event("tick", {"i": i, "sent": time.time()})
            time.sleep(0.05)


def listener_latency(backend: str, target: str, schema: str) -> list[float]:
    """Seconds from another process's commit to this process's listener call, per event."""
    import threading

    store = _open(backend, target, schema)
    sid = f"follow-{uuid.uuid4().hex[:8]}"
    heard: list[float] = []
    done = threading.Event()

    def listener(event: Any) -> None:
        if getattr(event, "runtime_type", None) == "tick":
            heard.append(time.time() - event.data["sent"])
            if len(heard) == PUSHES:
                done.set()

    with SessionPool(store) as pool:
        pool.get(sid).subscribe(listener)
        subprocess.run([sys.executable, __file__, "--pusher", backend, target, schema, sid], check=True)
        done.wait(60)
    return heard


# -- turns per second -------------------------------------------------------------------


def _time_lock_waits(store: EventStore, waits: list[float]) -> bool:
    """Wrap the store's turn lock so each acquisition's wait lands in ``waits``; False
    when the store has none."""
    for name in _LOCK_NAMES:
        lock = getattr(store, name, None)
        if callable(lock):
            @contextmanager
            def timed(*args: Any, _lock: Any = lock, **kwargs: Any) -> Iterator[Any]:
                t0 = time.perf_counter()
                with _lock(*args, **kwargs) as lease:
                    waits.append(time.perf_counter() - t0)
                    yield lease

            setattr(store, name, timed)
            return True
    return False


def _worker(backend: str, target: str, schema: str, sid: str, turns: int) -> None:
    """One process: ``turns`` asks in ``sid``, started when the parent says go."""
    store = _open(backend, target, schema)
    waits: list[float] = []
    locked = _time_lock_waits(store, waits)
    errors: dict[str, int] = {}
    with SessionPool(store, model=FunctionModel(lambda r: "You said: " + r.messages[-1].text)) as pool:
        session = pool.get(sid)
        print("ready", flush=True)
        sys.stdin.readline()
        t0 = time.perf_counter()
        for i in range(turns):
            try:
                session.ask(f"{os.getpid()} question {i}")
            except Exception as exc:  # noqa: BLE001 - counted and reported
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                session = pool.get(sid)
        wall = time.perf_counter() - t0
    print(json.dumps({"wall": wall, "waits": waits if locked else None, "errors": errors}), flush=True)


def throughput(backend: str, target: str, schema: str, procs: int, shared: bool,
               turns: int) -> tuple[float, list[float] | None, dict[str, int]]:
    """(turns per second over all processes, lock waits in s or None, errors)."""
    run = uuid.uuid4().hex[:8]
    children = [
        subprocess.Popen([sys.executable, __file__, "--worker", backend, target, schema,
                          f"shared-{run}" if shared else f"own-{run}-{n}", str(turns)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for n in range(procs)
    ]
    for child in children:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    waits: list[float] | None = []
    errors: dict[str, int] = {}
    for child in children:
        out, _ = child.communicate(timeout=1800)
        result = json.loads(out.strip().splitlines()[-1])
        if result["waits"] is None:
            waits = None
        elif waits is not None:
            waits += result["waits"]
        for name, n in result["errors"].items():
            errors[name] = errors.get(name, 0) + n
    wall = time.perf_counter() - t0
    return procs * turns / wall, waits, errors


def report(backend: str, target: str, schema: str, turns: int) -> None:
    print(f"\n{backend}: the currentness check, {CHECKS} calls on a pooled session of 200 events")
    print(f"{'':<48} {'median':>10} {'p99':>10}")
    for what, median, p99 in currentness(backend, target, schema):
        print(f"{what:<48} {median:>7.1f} µs {p99:>7.1f} µs")
    lags = listener_latency(backend, target, schema)
    print(f"\n{backend}: a listener hears another process's commits: {len(lags)} of {PUSHES} events, "
          f"after p50 {_pct(lags, 0.5) * 1e3:.0f} ms, p99 {_pct(lags, 0.99) * 1e3:.0f} ms, "
          f"max {max(lags) * 1e3:.0f} ms")
    print(f"\n{backend}: turns per second, {turns} ask() turns per process, zero-latency model")
    print(f"{'processes':>9} {'conversations':>14} {'turns/s':>9} {'lock wait p50':>14} {'p99':>10}  errors")
    for procs in PROCS:
        for shared in (False, True):
            rate, waits, errors = throughput(backend, target, schema, procs, shared, turns)
            if waits:
                p50, p99 = f"{_pct(waits, 0.5) * 1e3:.2f} ms", f"{_pct(waits, 0.99) * 1e3:.2f} ms"
            else:
                p50, p99 = "n/a", "n/a"
            print(f"{procs:>9} {'one shared' if shared else 'distinct':>14} {rate:>9.0f} {p50:>14} {p99:>10}  "
                  f"{errors or '-'}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--pusher":
        _pusher(*sys.argv[2:6])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file-only", action="store_true", help="skip PostgreSQL")
    parser.add_argument("--turns", type=int, default=500, help="ask() turns per process (default 500)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as root:
        report("file", root, "", args.turns)
    if args.file_only:
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from _pg import Cluster, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        sys.exit("PostgreSQL needs the server binaries (Debian: apt-get install postgresql); or use --file-only")
    cluster = Cluster(bin_dir, fsync=True)
    try:
        from agentkit.stores.postgres import PostgresEventStore

        with PostgresEventStore(cluster.conninfo, schema="bench") as pg:
            pg.migrate()
        report("postgres", cluster.conninfo, "bench", args.turns)
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
