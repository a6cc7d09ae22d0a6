"""FileEventStore fsync ordering, read from a real syscall trace (strace) of a child that
creates a store under missing directories, appends, archives, compacts and deletes.

At every point where the child reports an operation as done, nothing it wrote may still
be unsynced: no file written since its last fsync, no directory whose entries (a mkdir,
a created file, a rename) changed since its last fsync. And a file is only renamed into
place after its data, and everything written before it (a compaction's archive), was
fsynced. Lock files and the renamed-aside remains of a deleted
session hold no data and are exempt.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from _env import reason
from _store_child import child_cmd, child_env

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason=reason(
    "needs strace to trace syscalls (Debian/Ubuntu: `apt-get install -y strace`)"))

_SYSCALLS = "mkdir,mkdirat,openat,rename,renameat,renameat2,write,pwrite64,ftruncate,fsync,fdatasync"
_LINE = re.compile(r"^(?P<call>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?\d+)")
_FD = re.compile(r"^(\d+)<([^>]*)>")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _trace(tmp_path) -> tuple[list[tuple[str, str, int]], str]:
    out = tmp_path / "trace.txt"
    root = os.path.realpath(tmp_path / "store")
    os.mkdir(root)
    proc = subprocess.run(
        ["strace", "-y", "-s", "64", "-e", f"trace={_SYSCALLS}", "-o", str(out), *child_cmd("trace-ops", root)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    calls = []
    for line in out.read_text().splitlines():
        m = _LINE.match(line)
        if m:
            calls.append((m["call"], m["args"], int(m["ret"])))
    return calls, root


def _exempt(path: str) -> bool:
    return "/.locks" in path or "/.deleted-" in path


def test_every_acknowledged_write_is_fsynced_file_and_directory_in_order(tmp_path):
    calls, root = _trace(tmp_path)
    dirty_files: set[str] = set()
    dirty_dirs: set[str] = set()
    done: list[str] = []

    def touch_dir(path: str) -> None:
        if path.startswith(os.path.dirname(root)) and not _exempt(path):
            dirty_dirs.add(os.path.dirname(path))

    for call, args, ret in calls:
        if ret < 0:
            continue
        fd = _FD.match(args)
        paths = _QUOTED.findall(args)
        if call in ("write", "pwrite64", "ftruncate") and fd:
            if fd[1] == "1" and paths and paths[0].startswith("done "):
                what = paths[0][5:].replace("\\n", "")
                assert not dirty_files, f"{what}: acknowledged with unsynced file data {dirty_files}"
                assert not dirty_dirs, f"{what}: acknowledged with unsynced directory entries {dirty_dirs}"
                done.append(what)
            elif fd[2].startswith(root) and not _exempt(fd[2]):
                dirty_files.add(fd[2])
        elif call in ("fsync", "fdatasync") and fd:
            dirty_files.discard(fd[2])
            dirty_dirs.discard(fd[2])
        elif call in ("mkdir", "mkdirat"):
            touch_dir(paths[0])
        elif call == "openat" and "O_CREAT" in args:
            touch_dir(paths[0])
        elif call.startswith("rename"):
            src, dst = paths[0], paths[1]
            assert src not in dirty_files, f"{src} renamed to {dst} before its data was fsynced"
            # everything written before (a compaction's archive) is durable before a
            # rename replaces a file; only the temp file's own directory entry is pending
            assert not dirty_files, f"{dst} replaced while {dirty_files} were unsynced"
            assert dirty_dirs <= {os.path.dirname(dst)}, f"{dst} replaced while {dirty_dirs} were unsynced"
            touch_dir(src)
            touch_dir(dst)
    assert done == ["create", "append", "archive", "compact", "append-after-compact", "delete"]
