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


def escaping(pidfile, *, chatty: bool = True) -> str:
    """Shell text that starts, in the background, a process that leaves our process group
    (``setsid``) keeping our stdout and stderr: printing a line every 0.2 s, or silent. It
    writes its pid (its own group's id) to ``pidfile``; :func:`kill_escaped` ends it."""
    body = "while :; do echo x; sleep 0.2; done" if chatty else "exec sleep 300"
    return f"setsid sh -c 'echo $$ > {pidfile}; {body}' &"


def kill_escaped(pidfile) -> None:
    """SIGKILL the group :func:`escaping` started (if it got as far as writing its pid)."""
    import os
    import signal
    from pathlib import Path

    try:
        text = wait_for(lambda: Path(pidfile).exists() and Path(pidfile).read_text().strip(), 5.0)
    except AssertionError:
        return
    try:
        os.killpg(int(text), signal.SIGKILL)
    except ProcessLookupError:
        pass


def within(fn, seconds: float = 15.0):
    """``fn()``'s result, run on a thread; fails if it has not returned after ``seconds``
    (a generous bound against hangs, not a timing assertion)."""
    import threading

    box = {}

    def run():
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the test's thread
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds:g}s"
    if "error" in box:
        raise box["error"]
    return box["result"]


def our_ends_of_its_stdout(pid: int) -> list[str]:
    """Our descriptors open on the pipe that process ``pid`` has as its stdout."""
    import os

    pipe = os.readlink(f"/proc/{pid}/fd/1")
    assert pipe.startswith("pipe:"), pipe
    ours = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == pipe:
                ours.append(fd)
        except OSError:
            continue
    return ours


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
