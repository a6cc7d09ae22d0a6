"""Helpers for the event-store tests: a child-process entry point and real file-system
conditions (a small tmpfs that fills up, a read-only remount).

Run as ``python tests/_store_child.py <mode> <args...>``; modes print one line per
fact, flushed, so the parent can read them from a pipe even if the child is killed.
"""

from __future__ import annotations

import functools
import os
import resource
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from _child import tell

from agentkit import FileEventStore, ScriptedModel, Session, StoreConflictError, StoreError
from agentkit.events import UserMessageEvent
from agentkit.messages import TextPart

REPO = Path(__file__).resolve().parent.parent


def child_cmd(*args: object) -> list[str]:
    """The command line that runs this helper with ``args``."""
    return [sys.executable, str(Path(__file__).resolve()), *map(str, args)]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def user(text: str, pad: int = 0) -> UserMessageEvent:
    return UserMessageEvent(content=(TextPart(text=text + ("." * pad if pad else "")),))


def texts(stored: object) -> list[str]:
    """The texts of stored user messages (a StoredSession or a tuple of events), without
    their padding."""
    events = stored if isinstance(stored, tuple) else stored.events  # type: ignore[attr-defined]
    return [e.content[0].text.rstrip(".") for e in events]


# -- real file-system conditions -----------------------------------------------------


@functools.cache
def mount_works() -> bool:
    """True when this process may mount a tmpfs (root with CAP_SYS_ADMIN)."""
    if os.geteuid() != 0:
        return False
    probe = tempfile.mkdtemp(prefix="agentkit-mount-probe-")
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", probe], capture_output=True)
        if r.returncode != 0:
            return False
        subprocess.run(["umount", probe], check=True)
        return True
    except OSError:
        return False
    finally:
        os.rmdir(probe)



@contextmanager
def tmpfs(path: Path, size: str):
    """Mount a tmpfs of ``size`` (e.g. '256k') at ``path`` for the block."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def remount(path: Path, *, read_only: bool) -> None:
    """Remount the tmpfs at ``path`` read-only or read-write (binds root too)."""
    mode = "ro" if read_only else "rw"
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True)


# -- child modes ---------------------------------------------------------------------


def append_loop(root: str, sid: str, pad: str) -> None:
    """Append one event per call forever, continuing from what is stored; after each
    append returns, print ``ack <revision>``. Event n carries the text ``e<n>``."""
    store = FileEventStore(root)
    loaded = store.load(sid)
    revision = 0 if loaded is None else loaded.revision
    tell("start", revision)
    while True:
        revision = store.append(sid, [user(f"e{revision + 1}", int(pad))], expected_revision=revision)
        tell("ack", revision)


def die_mid_append(root: str, sid: str, pad: str, acks: str) -> None:
    """Append ``acks`` events as ``append-loop`` does (at least one: it repairs any torn
    tail), then die in the middle of writing the next one's record: a file-size limit
    (RLIMIT_FSIZE) lets the first write() stop halfway and the kernel kills the process
    with SIGXFSZ at the next, so the log gets a torn tail however busy the machine is."""
    store = FileEventStore(root)
    loaded = store.load(sid)
    revision = 0 if loaded is None else loaded.revision
    tell("start", revision)
    for _ in range(int(acks)):
        revision = store.append(sid, [user(f"e{revision + 1}", int(pad))], expected_revision=revision)
        tell("ack", revision)
    size = os.path.getsize(os.path.join(root, sid, "events.jsonl"))
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it: restore "terminate"
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + int(pad) // 2, resource.RLIM_INFINITY))
    store.append(sid, [user(f"e{revision + 1}", int(pad))], expected_revision=revision)
    tell("survived")  # not reached


def compact_loop(root: str, sid: str, pad: str) -> None:
    """Forever: while the active log holds fewer than 6 ``e<n>`` events append the next
    one, else compact all but the last 2 events into archive ``c<revision>`` behind a
    summary ``sum-<revision>``. Print ``ack <revision>`` after each call returns. The
    choice depends only on what is stored, so a restarted loop repeats a compaction that
    was interrupted after writing its archive."""
    store = FileEventStore(root)
    loaded = store.load(sid)
    revision = 0 if loaded is None else loaded.revision
    active = [] if loaded is None else [e.content[0].text.rstrip(".") for e in loaded.events]
    n = max((int(t[1:]) for t in active if t.startswith("e")), default=0)
    tell("start", revision)
    while True:
        if sum(t.startswith("e") for t in active) < 6:
            n += 1
            revision = store.append(sid, [user(f"e{n}", int(pad))], expected_revision=revision)
            active.append(f"e{n}")
        else:
            summary = f"sum-{revision}"
            revision = store.compact(
                sid, f"c{revision}", expected_revision=revision, remove=len(active) - 2, summary=[user(summary)]
            )
            active = [summary, *active[-2:]]
        tell("ack", revision)


def trace_ops(root: str) -> None:
    """Every kind of write, each followed by a ``done <what>`` line, for a syscall trace:
    create a store under missing directories, append, archive, compact, delete."""
    store = FileEventStore(os.path.join(root, "a", "b"))
    store.append("s", [user("e1")], expected_revision=0)
    tell("done create")
    store.append("s", [user("e2"), user("e3")], expected_revision=1)
    tell("done append")
    store.archive("s", "copy", [user("old")])
    tell("done archive")
    store.compact("s", "c1", expected_revision=3, remove=2, summary=[user("sum")])
    tell("done compact")
    store.append("s", [user("e4")], expected_revision=4)
    tell("done append-after-compact")
    store.delete("s")
    tell("done delete")


def writer(root: str, sid: str, name: str, count: str) -> None:
    """Append ``count`` events named ``<name>-<i>``, retrying on conflict by reloading.
    The lock timeout is generous: on a busy machine a writer may wait long for its turn."""
    store = FileEventStore(root, lock_timeout=600)
    conflicts = 0
    for i in range(int(count)):
        while True:
            loaded = store.load(sid)
            revision = 0 if loaded is None else loaded.revision
            try:
                store.append(sid, [user(f"{name}-{i}")], expected_revision=revision)
                break
            except StoreConflictError:
                conflicts += 1
    tell("done", conflicts)


def stale_writer(root: str, sid: str) -> None:
    """Load, report the revision, wait for a line on stdin, then append at that (by then
    stale) revision and report what happened."""
    store = FileEventStore(root)
    loaded = store.load(sid)
    revision = 0 if loaded is None else loaded.revision
    tell("loaded", revision)
    sys.stdin.readline()
    try:
        store.append(sid, [user("stale")], expected_revision=revision)
        tell("appended")
    except StoreConflictError as exc:
        tell("conflict", exc.expected_revision, exc.actual_revision)


def hold_lock(root: str, sid: str) -> None:
    """Hold the session's write lock until stdin closes."""
    store = FileEventStore(root)
    with store._write_lock(sid):
        tell("locked")
        sys.stdin.read()
    tell("released")


def fsize_limited(root: str, sid: str, limit: str) -> None:
    """Append growing events under RLIMIT_FSIZE until the limit stops a write."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    store = FileEventStore(root)
    loaded = store.load(sid)
    revision = 0 if loaded is None else loaded.revision
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(limit), int(limit)))
    while True:
        try:
            revision = store.append(sid, [user(f"e{revision + 1}", 3000)], expected_revision=revision)
        except StoreError as exc:
            tell("error", revision, str(exc).replace("\n", " "))
            return
        tell("ack", revision)


def session_turn(root: str, sid: str, prompt: str, reply: str) -> None:
    """Reopen the session, print its projected messages, then run one generate()."""
    import json

    store = FileEventStore(root)
    with Session.open(sid, store=store, model=ScriptedModel([reply])) as s:
        tell("before", json.dumps([m.to_dict() for m in s.model_messages()], sort_keys=True))
        s.push_user_message(prompt)
        s.generate()
        model = s._model
        tell("request", json.dumps([m.to_dict() for m in model.requests[0].messages], sort_keys=True))
        tell("revision", s.revision)


def session_push(root: str, sid: str, text: str) -> None:
    """Reopen the session and push one user message."""
    with Session.open(sid, store=FileEventStore(root)) as s:
        s.push_user_message(text)
        tell("revision", s.revision)


def session_crash(root: str, sid: str) -> None:
    """Run a generation whose tool blocks (printing ``tool-running``) until killed."""
    import time

    from agentkit import ToolCall, tool

    @tool
    def slow_side_effect(name: str) -> str:
        """Do something slow with a side effect."""
        tell("tool-running")
        time.sleep(120)
        return "done"

    model = ScriptedModel([ToolCall("slow_side_effect", {"name": "x"}), "finished"])
    with Session.open(sid, store=FileEventStore(root), model=model, tools=[slow_side_effect]) as s:
        s.push_user_message("do the slow thing")
        s.generate()


MODES = {
    "append-loop": append_loop,
    "compact-loop": compact_loop,
    "die-mid-append": die_mid_append,
    "trace-ops": trace_ops,
    "writer": writer,
    "stale-writer": stale_writer,
    "hold-lock": hold_lock,
    "fsize-limited": fsize_limited,
    "session-turn": session_turn,
    "session-push": session_push,
    "session-crash": session_crash,
}

if __name__ == "__main__":
    MODES[sys.argv[1]](*sys.argv[2:])
