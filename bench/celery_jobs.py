"""Background jobs through Celery against local job threads, and how soon a job's end on a
worker is heard in the web process.

    python3 bench/celery_jobs.py                  # 200 jobs, 2 prefork workers x 2 processes
    python3 bench/celery_jobs.py --jobs 500 --pool threads --concurrency 4

Starts a throwaway PostgreSQL server (tests/_pg.py), a redis-server (tests/_celery.py) and
two ``celery worker`` processes (tests/_celery_app.py), then, from this process (the "web
process"):

- **throughput**: ``--jobs`` jobs (``sh -c true``) started from 5 sessions on PostgreSQL,
  through ``tasks.job_control()``, until every ``job-finished`` is in its session (jobs/s);
  and the same jobs on local job threads (``LocalExecutionContext``'s own runner, the same
  sessions' store), for comparison.
- **latency**: for each Celery job, from its completion on the worker (``finished_at`` of
  its record, set when the worker saw the process end) to the moment a listener on its
  session in this process received its ``job-finished`` event (PostgreSQL LISTEN/NOTIFY,
  then a read): p50 and p99. One host, one clock.
- **abort**: 20 times, the time from ``abort()`` (another job control, no session) to the
  ``job-aborted`` event heard here, for a running ``sleep 60`` (p50, max).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from _celery import Redis, Rig, wait_for  # noqa: E402
from _pg import Cluster, find_bin_dir  # noqa: E402

from agentkit import Session  # noqa: E402
from agentkit.execution import LocalExecutionContext  # noqa: E402

_END = ("job-finished", "job-failed", "job-aborted", "job-lost")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class _Heard:
    """Terminal job events heard by listeners in this process, with when."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.at: dict[str, tuple[float, Any]] = {}
        self.done = threading.Condition(self.lock)

    def listener(self, event: Any) -> None:
        if getattr(event, "runtime_type", "") in _END:
            with self.lock:
                self.at.setdefault(event.data["execution_id"], (time.time(), event))
                self.done.notify_all()

    def wait(self, ids: list[str], timeout: float = 600.0) -> None:
        deadline = time.monotonic() + timeout
        with self.lock:
            while not all(i in self.at for i in ids):
                if not self.done.wait(max(0.0, deadline - time.monotonic())):
                    raise SystemExit(f"timed out: {sum(i in self.at for i in ids)}/{len(ids)} jobs heard")


def _run(sessions: list[Session], n: int, heard: _Heard) -> tuple[float, list[str]]:
    began = time.monotonic()
    ids = [sessions[i % len(sessions)].execution_context.jobs.start("sh", ["-c", "true"]).execution_id
           for i in range(n)]
    heard.wait(ids)
    return time.monotonic() - began, ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--pool", default="prefork", choices=["prefork", "threads"])
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--aborts", type=int, default=20)
    args = parser.parse_args()
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("needs the PostgreSQL server binaries (see tests/_pg.py)")
    pg, redis = Cluster(bin_dir), Redis()
    rig = Rig(redis, pg)
    try:
        _app, tasks, store, _job_store = rig.tasks()
        for name in ("w1", "w2"):
            rig.worker(pool=args.pool, concurrency=args.concurrency, name=name)
        heard = _Heard()
        celery_sessions = []
        for i in range(5):
            ctx = LocalExecutionContext(tempfile.mkdtemp(), jobs=tasks.job_control())
            s = Session.open(f"celery-{i}", store=store, execution_context=ctx)
            s.subscribe(heard.listener)
            celery_sessions.append(s)
        _run(celery_sessions, 10, heard)  # warm up: workers' session pools, connections
        seconds, ids = _run(celery_sessions, args.jobs, heard)
        celery_rate = args.jobs / seconds
        latencies = []
        for eid in ids:
            state = tasks.job_control().get(eid)
            latencies.append(heard.at[eid][0] - (state.finished_at or 0.0))
        local_sessions = []
        for i in range(5):
            s = Session.open(f"local-{i}", store=store, execution_context=LocalExecutionContext(tempfile.mkdtemp()))
            s.subscribe(heard.listener)
            local_sessions.append(s)
        _run(local_sessions, 10, heard)
        local_seconds, _ = _run(local_sessions, args.jobs, heard)
        aborts = []
        other = tasks.job_control()
        for _ in range(args.aborts):
            state = celery_sessions[0].execution_context.jobs.start("sh", ["-c", "exec sleep 60"])
            wait_for(lambda eid=state.execution_id: other.get(eid).pid is not None, "the job's start")
            began = time.time()
            other.abort(state.execution_id)
            heard.wait([state.execution_id])
            aborts.append(heard.at[state.execution_id][0] - began)
        print(f"workers: 2 x {args.pool} --concurrency {args.concurrency}; {args.jobs} jobs (sh -c true) "
              f"from 5 sessions on PostgreSQL")
        print(f"celery: {celery_rate:.1f} jobs/s ({seconds:.2f} s)")
        print(f"local threads (one process): {args.jobs / local_seconds:.1f} jobs/s ({local_seconds:.2f} s)")
        print(f"worker completion -> job-finished heard in the web process: p50 {_pct(latencies, .5) * 1000:.0f} ms, "
              f"p99 {_pct(latencies, .99) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms")
        print(f"abort() from another job control -> job-aborted heard: p50 {statistics.median(aborts) * 1000:.0f} ms, "
              f"max {max(aborts) * 1000:.0f} ms ({len(aborts)} aborts of a running sleep)")
        for s in celery_sessions + local_sessions:
            s.close()
    finally:
        rig.close()
        redis.destroy()
        pg.destroy()


if __name__ == "__main__":
    main()
