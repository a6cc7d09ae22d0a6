"""Many open sessions: threads alive, memory, and the cost of opening one and running a turn.

    python3 bench/sessions.py               # 1,000 and 10,000 sessions
    python3 bench/sessions.py 500 2000      # other counts

Each session is opened (in memory), gets a listener, and runs one turn in which the model
calls two tools in parallel, then answers; all sessions stay open. Printed per count:
threads alive once every listener has heard its session, peak RSS, and ms per
open+subscribe+turn. Tool calls of every session share one tool pool and listener
delivery shares a few delivery threads (agentkit/_threads/_pool.py), so the thread count does
not grow with the number of sessions (the target: at most 64 threads at 10,000).
"""

from __future__ import annotations

import json
import resource
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentkit import FunctionModel, Session, ToolCall, tool
from agentkit.models import ModelRequest, Turn  # noqa: E402


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


def _reply(request: ModelRequest) -> Turn | str:
    if request.messages[-1].role == "user":
        calls = (ToolCall(name="lookup", input={"key": "a"}), ToolCall(name="lookup", input={"key": "b"}))
        return Turn(tool_calls=calls)
    return "done"


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def run(count: int) -> dict[str, float]:
    model = FunctionModel(_reply, keep_requests=0)
    heard = [0]
    lock = threading.Lock()

    def listener(event: object) -> None:
        with lock:
            heard[0] += 1

    sessions: list[Session] = []
    threads_before = threading.active_count()
    start = time.perf_counter()
    for _ in range(count):
        s = Session(model, tools=[lookup])
        s.subscribe(listener)
        s.ask("go")
        sessions.append(s)
    elapsed = time.perf_counter() - start
    expected = count * 5  # user, assistant (two calls), two tool results, answer
    while heard[0] < expected:
        time.sleep(0.01)
    figures = {
        "sessions": count,
        "threads_alive": threading.active_count(),
        "threads_before": threads_before,
        "rss_mib": round(_rss_mib(), 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "ms_per_open_and_turn": round(elapsed * 1000 / count, 3),
    }
    for s in sessions:
        s.close()
    return figures


if __name__ == "__main__":
    counts = [int(a) for a in sys.argv[1:]] or [1_000, 10_000]
    for n in counts:
        print(json.dumps(run(n)))
