"""Session.fork of a 10,000-event session on FileEventStore and PostgresEventStore.

    python3 bench/fork.py                  # both stores (PostgreSQL: a throwaway server)
    python3 bench/fork.py --events 50000   # a longer session
    python3 bench/fork.py --file-only      # no PostgreSQL server needed

The source is a stored chat of ``--events`` events (turns of four: a user message, an
answer calling a tool, its result, the final answer), written with fsync off; the
measurements run with fsync on for both stores (the PostgreSQL server is started by
tests/_pg.py, as bench/store.py --compare does: Debian's binaries, fsync on, 127.0.0.1).
For each store, the median of ``--repeats`` runs of:

- ``open``: ``Session.open`` of the source (reading its 10,000 events), for scale;
- ``fork``: ``session.fork(at=<its last event>)``, end to end: the checks, the closing
  events (a fold of the prefix), the store write and the new Session;
- ``plan``: the checks and the closing events alone (no I/O);
- the store write alone, as ``Session.fork`` does it (``copy_prefix`` on PostgreSQL: an
  ``INSERT ... SELECT`` inside the server), and as a store without ``copy_prefix`` would
  (``append`` of all 10,000 events to the new session in one call).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentkit import FileEventStore, Session  # noqa: E402
from agentkit.events import AssistantMessageEvent, Event, ToolResultEvent, UserMessageEvent  # noqa: E402
from agentkit.messages import TextPart, ToolCallPart, ToolOutput  # noqa: E402
from agentkit.session._fork import plan, write_fork  # noqa: E402

TEXT = "please look at the quarterly report and tell me which region grew the most, and why: "


def _turn(n: int) -> list[Event]:
    call = f"call-{n}"
    return [
        UserMessageEvent(content=(TextPart(text=f"{TEXT}{n:06d}"),)),
        AssistantMessageEvent(content=(ToolCallPart(tool_call_id=call, tool_name="read_report",
                                                    input={"quarter": n % 4 + 1, "year": 2026}),)),
        ToolResultEvent(tool_call_id=call, tool_name="read_report",
                        output=ToolOutput.text(f"north +{n % 7}%, south +{n % 5}%, east +{n % 3}%")),
        AssistantMessageEvent(content=(TextPart(text=f"The north region grew the most ({n % 7}%)."),)),
    ]


def fill(store: Any, sid: str, events: int) -> None:
    """``events`` events of chat turns in ``sid``, appended in batches of 1,000."""
    revision, n, pending = 0, 0, []
    while revision + len(pending) < events:
        pending.extend(_turn(n))
        n += 1
        if len(pending) >= 1000 or revision + len(pending) >= events:
            batch = [e.with_seq(revision + i) for i, e in enumerate(pending[: events - revision], 1)]
            revision = store.append(sid, batch, expected_revision=revision)
            pending = []


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def measure(store: Any, events: int, repeats: int) -> dict[str, float]:
    fsync = getattr(store, "fsync", None)
    if fsync is not None:
        store.fsync = False
    fill(store, "src", events)
    if fsync is not None:
        store.fsync = fsync
    out: dict[str, float] = {}
    out["open"] = median_ms(lambda: Session.open("src", store=store).close(), repeats)
    source = Session.open("src", store=store)
    last = source.events[-1].id
    assert len(source.events) == events

    def fork() -> None:
        with source.fork(at=last) as forked:
            assert forked.revision == events

    out["fork"] = median_ms(fork, repeats)
    target, prefix, extra = plan(source.events, last, "src", store, None, archived=lambda: ())
    out["plan"] = median_ms(lambda: plan(source.events, last, "src", store, None, archived=lambda: ()), repeats)
    if callable(getattr(store, "copy_prefix", None)):
        out["copy_prefix"] = median_ms(lambda: write_fork(store, "src", uuid.uuid4().hex, prefix, extra), repeats)
    out["append"] = median_ms(
        lambda: store.append(uuid.uuid4().hex, [*prefix, *extra], expected_revision=0), repeats)
    source.close()
    return out


def report(name: str, r: dict[str, float]) -> None:
    copy = f"{r['copy_prefix']:>9.0f} ms" if "copy_prefix" in r else f"{'-':>12}"
    print(f"{name:<10} {r['open']:>9.0f} ms {r['fork']:>9.0f} ms {r['plan']:>9.0f} ms {copy} {r['append']:>9.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", default=None, help="parent directory for the file store (default: system temp)")
    parser.add_argument("--file-only", action="store_true", help="skip PostgreSQL")
    args = parser.parse_args()
    print(f"Session.fork of a {args.events:,}-event session at its last event, median of {args.repeats}; "
          f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'store':<10} {'open':>12} {'fork':>12} {'plan':>12} {'copy_prefix':>12} {'append all':>12}")
    with tempfile.TemporaryDirectory(dir=args.dir) as root:
        report("file", measure(FileEventStore(root, fsync=True), args.events, args.repeats))
    if args.file_only:
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from _pg import Cluster, find_bin_dir

    from agentkit.stores.postgres import PostgresEventStore

    bin_dir = find_bin_dir()
    if bin_dir is None:
        sys.exit("PostgreSQL needs the server binaries (Debian: apt-get install postgresql); or pass --file-only")
    cluster = Cluster(bin_dir, fsync=True)
    try:
        with PostgresEventStore(cluster.conninfo, schema="bench") as pg:
            pg.migrate()
            report("postgres", measure(pg, args.events, args.repeats))
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
