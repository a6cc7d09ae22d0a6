"""The local execution context's files (``LocalExecutionContext.fs``): every path
opened through descriptors, component by component from its allowed root, without
following symlinks, so a symlink swapped in after the path check is refused (private)."""

from __future__ import annotations

import errno
import os
import stat
import uuid
from contextlib import suppress
from typing import TYPE_CHECKING

from ..errors import AccessDenied, ConfigurationError
from .base import DirEntry

if TYPE_CHECKING:
    from .local import LocalExecutionContext

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC


def _raced(path: str) -> AccessDenied:
    return AccessDenied(
        f"access denied: {path!r} changed while it was being opened (a symlink appeared "
        f"on the way); nothing was done. Use a path inside the root that is not a symlink."
    )


def _open_dir(ctx: LocalExecutionContext, real: str, path: str, *, create: bool = False) -> int:
    """A descriptor of the directory ``real`` (canonical), opened component by component
    from its allowed root without following symlinks; missing components are created
    with ``create=True``. ``path`` is what the caller asked for (for messages)."""
    root = ctx._root_of(real)
    parts = [] if real == root else os.path.relpath(real, root).split(os.sep)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        for part in parts:
            nxt = _open_component(fd, part, path, create)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_component(fd: int, part: str, path: str, create: bool) -> int:
    try:
        return os.open(part, _DIR, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path) from None
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        # Linux reports a symlink opened with O_DIRECTORY | O_NOFOLLOW as ENOTDIR
        if exc.errno == errno.ELOOP or stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
            raise _raced(path) from None
        raise NotADirectoryError(errno.ENOTDIR, f"a component of {path!r} is not a directory",
                                 path) from None
    with suppress(FileExistsError):
        os.mkdir(part, dir_fd=fd)
    return _open_component(fd, part, path, False)


def _open_in(ctx: LocalExecutionContext, real: str, path: str, flags: int) -> int:
    """Open the file ``real`` (canonical) for ``flags`` without following symlinks."""
    parent, name = os.path.split(real)
    dfd = _open_dir(ctx, parent, path)
    try:
        return os.open(name, flags | os.O_NOFOLLOW | _CLOEXEC, dir_fd=dfd)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", path) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _raced(path) from None
        raise
    finally:
        os.close(dfd)


def _not_regular(path: str) -> OSError:
    return OSError(errno.EINVAL, f"{path!r} is not a regular file (a FIFO, socket or device); "
                                 f"only regular files can be read")


class LocalFileSystem:
    """The ``fs`` capability of :class:`LocalExecutionContext`."""

    def __init__(self, ctx: LocalExecutionContext) -> None:
        self._ctx = ctx

    def read_file(self, path: str, *, tool_call_id: str | None = None) -> str:
        """Up to ``max_read_bytes`` of a regular file, decoded as UTF-8 (invalid bytes
        replaced); a longer file is cut with a note saying so."""
        real = self._ctx.resolve_path(path)
        if os.path.isdir(real):
            raise IsADirectoryError(errno.EISDIR, f"{path!r} is a directory; use list_directory", path)
        if os.path.exists(real) and not os.path.isfile(real):
            raise _not_regular(path)
        self._ctx._before("read", real, tool_call_id)
        limit = self._ctx.max_read_bytes
        # O_NONBLOCK: opening a FIFO swapped in after the check must not hang
        with os.fdopen(_open_in(self._ctx, real, path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise _not_regular(path)
            data = f.read(limit + 1)
        text = data[:limit].decode("utf-8", errors="replace")
        if len(data) > limit:
            text += f"\n[file larger than {limit} bytes: only the first {limit} bytes were read]"
        return text

    def write_file(self, path: str, content: str, *, tool_call_id: str | None = None) -> int:
        """Create or replace a file atomically (temp file, fsync, rename); missing parent
        directories are created. A new file gets the usual umask-based mode, a replaced
        one keeps its mode. Returns the bytes written."""
        if not isinstance(content, str):
            raise ConfigurationError("write_file content must be a str")
        real = self._ctx.resolve_path(path, write=True)
        if os.path.isdir(real):
            raise IsADirectoryError(errno.EISDIR, f"{path!r} is a directory; give a file path", path)
        data = content.encode("utf-8")
        self._ctx._before("write", real, tool_call_id, bytes=len(data))
        parent, name = os.path.split(real)
        dfd = _open_dir(self._ctx, parent, path, create=True)
        try:
            try:
                old: os.stat_result | None = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            if old is not None and stat.S_ISDIR(old.st_mode):
                raise IsADirectoryError(errno.EISDIR, f"{path!r} is a directory; give a file path", path)
            tmp = f".agentkit-{uuid.uuid4().hex}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o666,
                         dir_fd=dfd)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    if old is not None and stat.S_ISREG(old.st_mode):
                        os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
                    f.flush()
                    os.fsync(f.fileno())
                # renameat replaces a symlink that appeared at ``name`` itself, never its target
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
                raise
            os.fsync(dfd)
        finally:
            os.close(dfd)
        return len(data)

    def list_directory(self, path: str, *, tool_call_id: str | None = None) -> list[DirEntry]:
        """The entries of a directory, sorted by name (symlinks are reported as such,
        not followed)."""
        real = self._ctx.resolve_path(path)
        if not os.path.isdir(real):
            if not os.path.exists(real):
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
            raise NotADirectoryError(errno.ENOTDIR, f"{path!r} is not a directory", path)
        self._ctx._before("list", real, tool_call_id)
        dfd = _open_dir(self._ctx, real, path)
        out: list[DirEntry] = []
        try:
            with os.scandir(dfd) as it:
                for entry in it:
                    out.append(_entry(entry))
        finally:
            os.close(dfd)
        out.sort(key=lambda e: e.name)
        return out

    def delete_file(self, path: str, *, tool_call_id: str | None = None) -> None:
        """Delete one file. A symlink is removed itself; its target is left alone."""
        real = self._ctx._resolve_entry(path)
        parent, name = os.path.split(real)
        dfd = _open_dir(self._ctx, parent, path)
        try:
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", path) from None
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, f"{path!r} is a directory; delete_file removes "
                                                      f"files only", path)
            self._ctx._before("delete", real, tool_call_id)
            os.unlink(name, dir_fd=dfd)
        finally:
            os.close(dfd)


def _entry(entry: os.DirEntry[str]) -> DirEntry:
    if entry.is_symlink():
        return DirEntry(name=entry.name, kind="symlink")
    if entry.is_dir(follow_symlinks=False):
        return DirEntry(name=entry.name, kind="directory")
    if entry.is_file(follow_symlinks=False):
        return DirEntry(name=entry.name, kind="file", size=entry.stat(follow_symlinks=False).st_size)
    return DirEntry(name=entry.name, kind="other")
