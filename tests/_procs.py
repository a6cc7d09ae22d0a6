"""Helpers for the tests that wait or run child processes: polling with a deadline,
liveness of a pid, starting a child, reading what it says, stopping it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path


def alive(pid: int) -> bool:
    """True while ``pid`` is a live process. A zombie counts as gone: in a container whose
    init does not reap, orphaned children stay zombies."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def wait_for(predicate, timeout: float = 60.0, what: str = "condition"):
    """Poll ``predicate`` until it returns something truthy (returned) or fail after
    ``timeout`` seconds (an upper bound for loaded machines: a passing test waits only as
    long as it must)."""
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


def listening(port: int) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:``port``."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- child processes ----------------------------------------------------------------------


def spawn(script: str, *args: str) -> subprocess.Popen[str]:
    """``script`` run with this interpreter, its stdin, stdout and stderr pipes (text)."""
    return subprocess.Popen([sys.executable, script, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def said(proc: subprocess.Popen[str], who: str = "the child") -> dict:
    """The next JSON line ``proc`` prints (fails with its stderr when it printed nothing)."""
    text = proc.stdout.readline()
    assert text, f"{who} said nothing; stderr: {proc.stderr.read()}"
    return json.loads(text)


def finished(proc: subprocess.Popen[str], timeout: float = 300) -> dict:
    """The last JSON line ``proc`` prints before it exits (which it must do cleanly)."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return json.loads(out.splitlines()[-1])


def ran(script: str, *args: str, timeout: float = 120) -> dict:
    """Run ``script`` to its end; the last JSON line it printed (it must exit cleanly)."""
    done = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def killed_after_first_line(argv: Sequence[str], env: dict[str, str] | None = None) -> list[str]:
    """Start ``argv``, read the first line it prints, SIGKILL it there (it must die of that
    signal); the words of that line."""
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, text=True, env=env)
    try:
        words = proc.stdout.readline().split()
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        proc.stdout.close()
    return words


def stop(proc: subprocess.Popen, timeout: float = 20.0) -> None:
    """End ``proc``: SIGTERM, and SIGKILL when it has not exited after ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


def stale_writer_race(argv: Sequence[str], win, env: dict[str, str] | None = None) -> None:
    """Start a stale writer (``argv``: it loads the session at revision 1, says ``loaded 1``
    and waits), append before it with ``win()``, release it: it must say ``conflict 1 2``
    (expected revision 1, found 2) and exit cleanly."""
    child = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout.readline().split() == ["loaded", "1"]
        win()  # we win the race
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().split() == ["conflict", "1", "2"]
        assert child.wait(30) == 0
    finally:
        child.kill()
        child.wait(30)
