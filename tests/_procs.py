"""Helpers for the process and job tests: liveness of a pid and polling with a deadline."""

from __future__ import annotations

import time


def alive(pid: int) -> bool:
    """True while ``pid`` is a live process. A zombie counts as gone: in a container whose
    init does not reap, orphaned children stay zombies."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def wait_for(predicate, timeout: float = 30.0, what: str = "condition"):
    """Poll ``predicate`` until it returns something truthy (returned) or fail after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
