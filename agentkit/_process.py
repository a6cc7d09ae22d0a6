"""Running one subprocess under supervision: the one supervisor of every child process the
runtime runs (the local execution context's foreground commands, the job runner's
background jobs), and what it reports (:class:`ShellResult`, listed in
:mod:`agentkit.execution`). It imports only the data layer, so both the execution
context and the job runner use it without importing each other (private).

The process gets its own process group (``start_new_session=True``) so that a timeout,
a cancellation, an output overflow or a failing output listener terminates the whole
tree: SIGTERM to the group, then SIGKILL after a grace period. The pipes are drained
during the grace period too, so a process that prints its last words on SIGTERM is not
blocked on a full pipe and killed for it. Output is read by one thread per stream into
a bounded queue (a slow consumer therefore slows the process down instead of buffering
without limit) and decoded incrementally, so a UTF-8 code point split across two reads
is never mangled. A descendant that left the group (``setsid``) cannot be killed with
it, but it cannot hold the call either: the timeout and the cancel token apply while the
group terminates, and once the group is dead its pipes are closed after a bounded wait.
"""

from __future__ import annotations

import codecs
import os
import queue
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from .cancel import CancelToken

OutputCallback = Callable[[str, str], None]
"""``on_output(stream, chunk)`` with stream ``"stdout"`` or ``"stderr"``."""


@dataclass(frozen=True, kw_only=True)
class ShellResult:
    """What a foreground command did."""

    command: str
    """The command as run (raw text, or the argument list joined for display)."""
    exit_code: int | None
    """The exit status; negative when a signal ended the process."""
    stdout: str
    stderr: str
    timed_out: bool = False
    cancelled: bool = False
    output_limited: bool = False
    """True when the output cap was hit and the process was terminated."""
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the command ran to completion with exit code 0."""
        return self.exit_code == 0 and not (self.timed_out or self.cancelled or self.output_limited)


_READ_SIZE = 65_536
_ABANDON_AFTER = 2.0
"""Once the group has been killed, pipes still held open by something outside it (a
descendant that called setsid) are abandoned after this many seconds spent waiting for
output (a trickle of output does not reset it), or this many seconds of any kind once the
caller's timeout or cancellation has fired. Abandoned pipes are closed: their writers get
SIGPIPE (EPIPE) on their next write."""
_RESIDUE_BYTES = 4 * 1_048_576
_RESIDUE_CHUNKS = 128
"""Output still in flight when the group is dead is bounded by the pipe buffers and the
read queue (a few dozen reads at most); more than this after the kill comes from outside
the group."""
_EOF = object()


def spawn(argv: Sequence[str], *, cwd: str, env: Mapping[str, str] | None) -> subprocess.Popen[bytes]:
    """Start ``argv`` (no shell) in its own process group with piped output."""
    full_env = None if env is None else {**os.environ, **env}
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=full_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
    )


class _Group:
    """Terminating one process group: SIGTERM at once, SIGKILL once ``grace`` seconds
    have passed and anything is left. :meth:`escalate` is polled by the caller, so it
    can keep reading output meanwhile."""

    def __init__(self, proc: subprocess.Popen[bytes], grace: float) -> None:
        self.proc = proc
        self.grace = grace
        self.term_at: float | None = None
        self.killed_at: float | None = None
        """When SIGKILL was sent, or when it turned out not to be needed."""

    @property
    def terminating(self) -> bool:
        return self.term_at is not None

    def terminate(self) -> None:
        if self.term_at is None:
            self.term_at = time.monotonic()
            if not _signal_group(self.proc.pid, signal.SIGTERM):
                self.killed_at = self.term_at  # nothing left in the group

    def escalate(self, now: float) -> None:
        if self.term_at is None or self.killed_at is not None or now - self.term_at < self.grace:
            return
        self.killed_at = now
        if self.proc.poll() is None or _group_alive(self.proc.pid):
            _signal_group(self.proc.pid, signal.SIGKILL)

    def finish(self) -> None:
        """Block until the group is gone (escalating to SIGKILL after the grace)."""
        self.terminate()
        while self.killed_at is None:
            if self.proc.poll() is not None and not _group_alive(self.proc.pid):
                return
            time.sleep(0.02)
            self.escalate(time.monotonic())


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the process group, then SIGKILL it if anything is left after ``grace``."""
    _Group(proc, grace).finish()


def _group_alive(pgid: int) -> bool:
    """True while a live (non-zombie) process is in group ``pgid``. Zombies count as
    gone: in a container whose init does not reap, orphans stay zombies forever."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    if not os.path.isdir("/proc/self"):
        return True
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # fields after the ")" that ends the command name: state ppid pgrp ...
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def _reader(stream_name: str, pipe: object, out: queue.Queue[object], stop: threading.Event,
            wake_fd: int) -> None:
    """Read one pipe into ``out`` until EOF, or until ``stop`` is set (the supervisor gave
    up on the pipe; ``wake_fd`` becomes readable then, so a reader waiting for output from
    a writer that left the group notices at once). The reader closes its pipe itself: an
    abandoned pipe's writer gets SIGPIPE, and no other thread closes a descriptor that a
    read here could still use."""
    fd = pipe.fileno()  # type: ignore[attr-defined]
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    poller.register(wake_fd, select.POLLIN)

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    try:
        while True:
            poller.poll()
            if stop.is_set():
                return  # abandoned
            try:
                data = os.read(fd, _READ_SIZE)
            except OSError:
                break
            if not data:
                break
            if not put((stream_name, data)):
                return
        put((stream_name, _EOF))
    finally:
        pipe.close()  # type: ignore[attr-defined]


def supervise(
    proc: subprocess.Popen[bytes],
    *,
    command: str,
    timeout: float | None = None,
    cancel: CancelToken | None = None,
    max_output_bytes: int = 1_048_576,
    on_output: OutputCallback | None = None,
    capture: bool = True,
    grace: float = 1.0,
    drain_after_exit: float = 0.5,
) -> ShellResult:
    """Collect ``proc``'s output until it and its pipes are done, enforcing the limits.

    ``on_output`` runs on this thread, in order; while it runs no more output is read
    (backpressure). If it raises, the process group is terminated and, once the process
    is gone, its exception propagates. When the leader has exited but a descendant keeps
    the pipes open past ``drain_after_exit`` seconds, the remaining group is terminated
    too, so no orphan outlives a command. Output beyond ``max_output_bytes`` is dropped
    (an incomplete trailing code point with it) and ends the command. A timeout or a
    cancellation is reported (``timed_out`` / ``cancelled``) whenever it fires before the
    call ends, and ends it within about ``grace`` + :data:`_ABANDON_AFTER` seconds.
    """
    # long: one loop owns every piece of the command's state (pipes open, bytes taken,
    # the limits that fired, the group's kill time); split into helpers, that dozen
    # variables would travel between them and the order of the checks would be hidden
    started = time.monotonic()
    chunks: queue.Queue[object] = queue.Queue(maxsize=16)
    stop = threading.Event()
    wake_r, wake_w = os.pipe()  # readable once ``stop`` is set: wakes the readers
    readers = [
        threading.Thread(target=_reader, args=("stdout", proc.stdout, chunks, stop, wake_r), daemon=True),
        threading.Thread(target=_reader, args=("stderr", proc.stderr, chunks, stop, wake_r), daemon=True),
    ]
    for t in readers:
        t.start()
    decoders = {
        "stdout": codecs.getincrementaldecoder("utf-8")(errors="replace"),
        "stderr": codecs.getincrementaldecoder("utf-8")(errors="replace"),
    }
    captured: dict[str, list[str]] = {"stdout": [], "stderr": []}
    group = _Group(proc, grace)
    total = 0
    after_kill = chunks_after_kill = 0
    waited_after_kill = 0.0
    open_streams = 2
    timed_out = cancelled = limited = False
    stopped_at = 0.0  # when the timeout or the cancellation fired
    listener_error: BaseException | None = None
    exited_at: float | None = None
    deadline = None if timeout is None else started + timeout

    def deliver(name: str, text: str) -> None:
        nonlocal listener_error
        if not text:
            return
        if capture:
            captured[name].append(text)
        if on_output is not None and listener_error is None:
            try:
                on_output(name, text)
            except BaseException as exc:  # noqa: BLE001 - re-raised once the process is gone
                listener_error = exc
                group.terminate()

    try:
        # until both pipes are closed and the leader has exited (a process that closed its
        # output is still bound by the timeout and the cancel token)
        while open_streams or proc.poll() is None:
            waiting_since = time.monotonic()
            try:
                item = chunks.get(timeout=0.05)
            except queue.Empty:
                item = None
            if group.killed_at is not None:
                # time spent waiting, not delivering: a slow listener is not idleness,
                # and a trickle of output from outside the group cannot reset it
                waited_after_kill += time.monotonic() - waiting_since
            if item is not None:
                name, data = cast("tuple[str, Any]", item)  # bytes, or _EOF
                if data is _EOF:
                    open_streams -= 1
                    if not limited:  # after a cut, an incomplete code point is dropped
                        deliver(name, decoders[name].decode(b"", final=True))
                else:
                    if group.killed_at is not None:
                        after_kill += len(data)
                        chunks_after_kill += 1
                    if not limited:
                        room = max_output_bytes - total
                        if len(data) > room:
                            limited = True
                            deliver(name, decoders[name].decode(data[:room]))
                            total = max_output_bytes
                            group.terminate()
                        else:
                            total += len(data)
                            deliver(name, decoders[name].decode(data))
            now = time.monotonic()
            group.escalate(now)
            # the caller's limits hold whatever else is ending the command
            if not (timed_out or cancelled):
                if cancel is not None and cancel.cancelled:
                    cancelled, stopped_at = True, now
                    group.terminate()
                elif deadline is not None and now >= deadline:
                    timed_out, stopped_at = True, now
                    group.terminate()
            if group.terminating:
                killed_at = group.killed_at
                if killed_at is not None and (
                    waited_after_kill > _ABANDON_AFTER
                    or after_kill > _RESIDUE_BYTES
                    or chunks_after_kill > _RESIDUE_CHUNKS
                    or ((timed_out or cancelled) and now - max(killed_at, stopped_at) > _ABANDON_AFTER)
                ):
                    break  # something that left the process group holds the pipes: stop waiting
                continue
            if proc.poll() is not None:
                if exited_at is None:
                    exited_at = now
                elif now - exited_at > drain_after_exit:
                    group.terminate()  # descendants hold the pipes open: end them
    finally:
        stop.set()  # the readers end and close our ends of the pipes
        os.write(wake_w, b"x")
        if group.terminating or _group_alive(proc.pid):
            group.finish()  # no descendant outlives a command
        exit_code = proc.wait()
        for t in readers:
            t.join(timeout=2.0)
        if not any(t.is_alive() for t in readers):  # (never seen; leaking two fds beats a reused one)
            os.close(wake_r)
            os.close(wake_w)
    if listener_error is not None:
        raise listener_error
    return ShellResult(
        command=command,
        exit_code=exit_code,
        stdout="".join(captured["stdout"]),
        stderr="".join(captured["stderr"]),
        timed_out=timed_out,
        cancelled=cancelled,
        output_limited=limited,
        duration=time.monotonic() - started,
    )
