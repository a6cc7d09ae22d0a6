"""Small file-system helpers for the file store: durable writes and readable errors."""

from __future__ import annotations

import errno
import os
import uuid

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

from ..errors import StoreError

_HINTS = {
    errno.ENOSPC: "the disk is full: free some space and retry",
    errno.EDQUOT: "the disk quota is exhausted: free some space and retry",
    errno.EFBIG: "the file size limit was reached: raise the limit (ulimit -f) and retry",
    errno.EROFS: "the file system is mounted read-only: remount it writable or use another root_dir",
    errno.EACCES: "permission denied: give this process write access to the store directory",
    errno.EPERM: "the operation is not permitted (an immutable file or directory?)",
}


def os_error(action: str, exc: OSError, *, tail: str = "") -> StoreError:
    """A StoreError saying what failed, why, and what to do."""
    hint = _HINTS.get(exc.errno or 0, "")
    msg = f"{action}: {exc.strerror or exc}"
    if hint:
        msg += f" ({hint})"
    if tail:
        msg += f". {tail}"
    err = StoreError(msg)
    err.__cause__ = exc
    return err


def sync_file(fd: int) -> None:
    """Flush a file to stable storage. On macOS plain fsync leaves data in the drive's
    cache, so F_FULLFSYNC is used where it exists."""
    full = getattr(fcntl, "F_FULLFSYNC", None) if fcntl is not None else None
    if full is not None:
        try:
            fcntl.fcntl(fd, full)
            return
        except OSError:  # not supported by this file system: fall back to fsync
            pass
    os.fsync(fd)


def fsync_dir(path: str) -> None:
    """Make a directory's entries (a created, renamed or removed file) durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` (os.write may write less than asked)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_range(fd: int, size: int, offset: int) -> bytes:
    """Read ``size`` bytes at ``offset`` (fewer only at end of file); os.pread may
    return less than asked, e.g. above 2 GiB on Linux."""
    chunks = []
    while size > 0:
        chunk = os.pread(fd, size, offset)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def atomic_write(path: str, data: bytes, *, sync: bool, tmp_prefix: str = ".tmp-", tmp_suffix: str = "",
                 mode: int = 0o644) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, atomic rename, directory fsync.

    A crash leaves either the old file or the new one, never a mix (plus, at worst, the
    temp file ``tmp_prefix + <32 hex digits> + tmp_suffix`` beside it). The new file is
    created with permission bits ``mode`` (before the umask). Raises OSError."""
    directory = os.path.dirname(path)
    tmp = os.path.join(directory, f"{tmp_prefix}{uuid.uuid4().hex}{tmp_suffix}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        try:
            write_all(fd, data)
            if sync:
                sync_file(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if sync:
        fsync_dir(directory)


def make_dir(path: str, *, sync: bool) -> bool:
    """Create directory ``path`` (its parent must exist); True when it was created.
    The parent is fsynced so the new entry survives a crash."""
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        if not os.path.isdir(path):
            raise NotADirectoryError(errno.ENOTDIR, "exists and is not a directory", path) from None
        return False
    if sync:
        fsync_dir(os.path.dirname(path))
    return True


def make_dirs(path: str, *, sync: bool) -> None:
    """Create directory ``path`` and any missing ancestors, fsyncing the parent of each
    one created (``os.makedirs`` would leave new entries that a power loss can undo)."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        make_dirs(parent, sync=sync)
    make_dir(path, sync=sync)
