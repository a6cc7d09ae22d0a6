"""FileEventStore append latency early and late in one session's log, and its size.

    python3 bench/store.py                 # default: 10,000 events, in a temp dir
    python3 bench/store.py --dir /var/tmp  # put the logs on another file system

For fsync on and off, one session receives one event per append (a 91-character user
message, the shape of a chat turn). We time the 200 appends starting at event 10 and the
200 starting at event 10,000 and report their median and p90; between the two windows
the log is filled with fsync off (same store object, so the figures are not affected).
Also reported: bytes on disk per event, and the time to load the whole log (10,199
events by default: 9 before the early window, 200 in it, filled to 9,999, 200 late).
The late/early ratio should stay near 1: an append costs O(events appended), not
O(history).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentkit import FileEventStore, UserMessageEvent  # noqa: E402
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=None, help="parent directory for the logs (default: system temp)")
    parser.add_argument("--late", type=int, default=10_000, help="where the late window starts (default 10000)")
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
