"""The local ``fs`` and ``shell`` capabilities of
:class:`~agentkit.tools.context.LocalExecutionContext` (private)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..cancel import CancelToken
from ..errors import ConfigurationError
from . import _process
from .context import DirEntry, OutputCallback, ShellResult, _display

if TYPE_CHECKING:
    from .context import LocalExecutionContext


class LocalFileSystem:
    """The ``fs`` capability of :class:`LocalExecutionContext`."""

    def __init__(self, ctx: LocalExecutionContext) -> None:
        self._ctx = ctx

    def read_file(self, path: str, *, tool_call_id: str | None = None) -> str:
        real = self._ctx.resolve_path(path)
        if os.path.isdir(real):
            raise IsADirectoryError(f"{path!r} is a directory; use list_directory")
        self._ctx._before("read", real, tool_call_id)
        limit = self._ctx.max_read_bytes
        with open(real, "rb") as f:
            data = f.read(limit + 1)
        text = data[:limit].decode("utf-8", errors="replace")
        if len(data) > limit:
            text += f"\n[file larger than {limit} bytes: only the first {limit} bytes were read]"
        return text

    def write_file(self, path: str, content: str, *, tool_call_id: str | None = None) -> int:
        if not isinstance(content, str):
            raise ConfigurationError("write_file content must be a str")
        real = self._ctx.resolve_path(path, write=True)
        if os.path.isdir(real):
            raise IsADirectoryError(f"{path!r} is a directory; give a file path")
        data = content.encode("utf-8")
        self._ctx._before("write", real, tool_call_id, bytes=len(data))
        parent = os.path.dirname(real)
        os.makedirs(parent, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=".agentkit-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if os.path.exists(real):
                shutil.copymode(real, tmp)
            os.replace(tmp, real)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return len(data)

    def list_directory(self, path: str, *, tool_call_id: str | None = None) -> list[DirEntry]:
        real = self._ctx.resolve_path(path)
        if not os.path.isdir(real):
            raise NotADirectoryError(f"{path!r} is not a directory")
        self._ctx._before("list", real, tool_call_id)
        out: list[DirEntry] = []
        with os.scandir(real) as it:
            for entry in it:
                if entry.is_symlink():
                    out.append(DirEntry(name=entry.name, kind="symlink"))
                elif entry.is_dir():
                    out.append(DirEntry(name=entry.name, kind="directory"))
                elif entry.is_file():
                    out.append(DirEntry(name=entry.name, kind="file", size=entry.stat().st_size))
                else:
                    out.append(DirEntry(name=entry.name, kind="other"))
        out.sort(key=lambda e: e.name)
        return out

    def delete_file(self, path: str, *, tool_call_id: str | None = None) -> None:
        real = self._ctx.resolve_path(path, write=True)
        if real == self._ctx.root_dir or os.path.isdir(real):
            raise IsADirectoryError(f"{path!r} is a directory; delete_file removes files only")
        if not os.path.lexists(real):
            raise FileNotFoundError(f"{path!r} does not exist")
        self._ctx._before("delete", real, tool_call_id)
        os.unlink(real)


class LocalShell:
    """The ``shell`` capability of :class:`LocalExecutionContext`."""

    def __init__(self, ctx: LocalExecutionContext) -> None:
        self._ctx = ctx

    def run(self, command: str, *, cwd: str | None = None, timeout: float | None = None,
            cancel: CancelToken | None = None, on_output: OutputCallback | None = None,
            tool_call_id: str | None = None) -> ShellResult:
        if not isinstance(command, str) or not command.strip():
            raise ConfigurationError("give the shell command to run as a non-empty string")
        argv = self._ctx._command_argv(command, (), raw=True)
        return self._run(argv, command, "shell", cwd, timeout, cancel, on_output, tool_call_id)

    def run_structured(self, executable: str, args: Sequence[str] = (), *, cwd: str | None = None,
                       timeout: float | None = None, cancel: CancelToken | None = None,
                       on_output: OutputCallback | None = None,
                       tool_call_id: str | None = None) -> ShellResult:
        if isinstance(args, str):
            raise ConfigurationError("args must be a list of strings, not one string")
        argv = self._ctx._command_argv(executable, list(args), raw=False)
        return self._run(argv, _display(argv, False), "exec", cwd, timeout, cancel, on_output,
                         tool_call_id)

    def _run(self, argv: list[str], display: str, operation: str, cwd: str | None,
             timeout: float | None, cancel: CancelToken | None, on_output: OutputCallback | None,
             tool_call_id: str | None) -> ShellResult:
        ctx = self._ctx
        if timeout is not None and timeout <= 0:
            raise ConfigurationError("timeout must be positive (or None)")
        workdir = ctx._workdir(cwd)
        if cancel is not None:
            cancel.raise_if_cancelled()
        ctx._before(operation, display, tool_call_id, argv=argv, cwd=workdir)
        proc = _process.spawn(argv, cwd=workdir, env=ctx._env)
        return _process.supervise(
            proc,
            command=display,
            timeout=timeout if timeout is not None else ctx.default_timeout,
            cancel=cancel,
            max_output_bytes=ctx.max_shell_output_bytes,
            on_output=on_output,
            grace=ctx.kill_grace,
        )
