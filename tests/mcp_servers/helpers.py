"""Helpers for the MCP tests: server commands, child processes, threads, polling."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _procs import alive, stop, wait_for

__all__ = [
    "DEMO", "GARBAGE", "HANG", "HERE", "PAGED", "alive", "children", "http_server", "no_leaks", "stdio", "wait_for",
]

HERE = Path(__file__).resolve().parent
DEMO = str(HERE / "demo_server.py")
PAGED = str(HERE / "paged_server.py")
HANG = str(HERE / "hang_server.py")
GARBAGE = str(HERE / "garbage_server.py")


def stdio(script: str, *args: str, env: dict[str, str] | None = None) -> dict:
    """A stdio config that runs ``script`` with this interpreter."""
    cfg: dict = {"command": sys.executable, "args": [script, *args]}
    if env is not None:
        cfg["env"] = env
    return cfg


def children() -> set[int]:
    """Live (non-zombie) child processes of this process."""
    me = os.getpid()
    out: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            out.add(int(entry))
    return out


@contextmanager
def no_leaks(timeout: float = 20.0) -> Iterator[None]:
    """Fail unless every child process and thread started inside the block is gone
    (polled with a deadline) after it. The process-wide worker threads all sessions share
    (agentkit/_threads/_pool.py: tool calls, listener delivery) are a pool, not a leak."""
    kids_before = children()
    threads_before = set(threading.enumerate())
    yield
    wait_for(lambda: not (children() - kids_before), timeout, "child processes to exit")
    wait_for(lambda: not [t for t in set(threading.enumerate()) - threads_before
                          if t.is_alive() and t.name not in _SHARED_POOL_THREADS],
             timeout, "threads to exit")


_SHARED_POOL_THREADS = frozenset({"agentkit-tool", "agentkit-listener", "agentkit-listener-watchdog"})


@contextmanager
def http_server(*args: str, env: dict[str, str] | None = None, script: str = DEMO) -> Iterator[str]:
    """Run demo_server.py (or ``script``) as a Streamable HTTP server on a free 127.0.0.1
    port; yields its MCP URL and stops it afterwards."""
    proc = subprocess.Popen(
        [sys.executable, script, "--http", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.strip().isdigit():
            raise RuntimeError(f"the HTTP MCP server did not start (printed {line!r})")
        yield f"http://127.0.0.1:{int(line)}/mcp"
    finally:
        stop(proc)
        if proc.stdout:
            proc.stdout.close()
