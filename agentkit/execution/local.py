"""The local execution context: files, commands and background jobs on this machine.

:class:`LocalExecutionContext` is the local adapter of the
:class:`~agentkit.execution.base.ExecutionContext` port: every path is resolved
canonically and confined to ``root_dir`` (``..`` and symlink escapes raise
:class:`~agentkit.errors.AccessDenied`), extra read-only roots allow reads and listings
only, and a ``before_operation`` guard runs right before each side effect and may veto
it. Commands run as real subprocesses in their own process group, bounded by a timeout,
a :class:`~agentkit.CancelToken` and an output cap.

Its ``fs`` and ``shell`` capabilities (:class:`LocalFileSystem`, :class:`LocalShell`)
check paths through the context (lexically and after resolving symlinks); the file
operations then open the checked path one component at a time from its root with
``O_NOFOLLOW`` and act through those descriptors (``openat``, ``renameat``,
``unlinkat``). A symlink swapped in after the check therefore cannot redirect an
operation outside the root: opening it fails and the operation is refused.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import _process
from ..cancel import CancelToken
from ..errors import AccessDenied, ConfigurationError
from ..jobs._base import JobControl, JobState, JobStore, _display
from ..jobs._runner import JobRunner
from ._localfs import LocalFileSystem
from .base import FileSystem, OutputCallback, PermissionHandler, PermissionRequest, Shell, ShellResult


class LocalShell:
    """The ``shell`` capability of :class:`LocalExecutionContext`."""

    def __init__(self, ctx: LocalExecutionContext) -> None:
        self._ctx = ctx

    def run(self, command: str, *, cwd: str | None = None, timeout: float | None = None,
            cancel: CancelToken | None = None, on_output: OutputCallback | None = None,
            tool_call_id: str | None = None) -> ShellResult:
        """Run shell text with ``bash -lc`` (not a security boundary)."""
        if not isinstance(command, str) or not command.strip():
            raise ConfigurationError("give the shell command to run as a non-empty string")
        return self._run(command, (), True, cwd, timeout, cancel, on_output, tool_call_id)

    def run_structured(self, executable: str, args: Sequence[str] = (), *, cwd: str | None = None,
                       timeout: float | None = None, cancel: CancelToken | None = None,
                       on_output: OutputCallback | None = None,
                       tool_call_id: str | None = None) -> ShellResult:
        """Run ``executable`` (looked up on PATH, or relative to the working directory
        when it contains a ``/``) with literal ``args``, without a shell."""
        if isinstance(args, str):
            raise ConfigurationError("args must be a list of strings, not one string")
        return self._run(executable, list(args), False, cwd, timeout, cancel, on_output, tool_call_id)

    def _run(self, executable: str, args: Sequence[str], raw: bool, cwd: str | None,
             timeout: float | None, cancel: CancelToken | None, on_output: OutputCallback | None,
             tool_call_id: str | None) -> ShellResult:
        ctx = self._ctx
        if timeout is not None and timeout <= 0:
            raise ConfigurationError("timeout must be positive (or None)")
        workdir = ctx._workdir(cwd)
        argv = ctx._command_argv(executable, args, raw, workdir)
        display = _display(argv, raw)
        if cancel is not None:
            cancel.raise_if_cancelled()
        ctx._before("shell" if raw else "exec", display, tool_call_id, argv=argv, cwd=workdir)
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


# -- the context -------------------------------------------------------------------------


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class LocalExecutionContext:
    """Files, commands and background jobs on this machine, confined to ``root_dir``.

    * Paths (relative to ``cwd``, or absolute) must stay inside ``root_dir`` both
      lexically and after resolving symlinks; ``additional_read_only_roots`` allow
      ``read_file`` and ``list_directory`` of absolute paths inside them, nothing else.
      File operations then act through descriptors opened component by component
      without following symlinks, so a symlink swapped in after the check is refused.
    * ``permission(request)`` answers :meth:`request_permission` (the built-in tools ask
      before every operation); ``before_operation(request)`` runs right before each side
      effect (read, list, write, delete, command spawn, job start) and vetoes it by
      raising or returning False. Both default to allowing.
    * Commands run with their own process group; a timeout, a cancel token, or output
      beyond ``max_shell_output_bytes`` terminates the group (SIGTERM, then SIGKILL after
      ``kill_grace`` seconds). The raw shell (``bash -lc``) is *not* a security boundary:
      confine it with a container or a permission handler.
    * ``jobs`` runs background jobs on worker threads (a :class:`~agentkit.JobRunner`);
      ``job_store`` persists their snapshots, ``settle_orphaned_job`` decides the state
      of jobs a previous host left running. ``jobs=`` puts another
      :class:`~agentkit.execution.JobControl` in its place (``tasks.job_control()``:
      jobs on Celery workers, :mod:`agentkit.celery`).

    :meth:`close` aborts the jobs this context started and waits for their threads.
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        additional_read_only_roots: Sequence[str | os.PathLike[str]] = (),
        before_operation: Callable[[PermissionRequest], object] | None = None,
        permission: PermissionHandler | None = None,
        max_shell_output_bytes: int = 1_048_576,
        max_read_bytes: int = 10_485_760,
        default_timeout: float | None = None,
        kill_grace: float = 1.0,
        shell_executable: str = "bash",
        env: Mapping[str, str] | None = None,
        job_store: JobStore | None = None,
        settle_orphaned_job: Callable[[JobState], JobState | None] | None = None,
        job_listener_timeout: float = 30.0,
        job_listener_queue_size: int = 256,
        max_retained_jobs: int = 100,
        jobs: JobControl | None = None,
    ) -> None:
        if jobs is not None and not isinstance(jobs, JobControl):
            raise ConfigurationError(
                f"jobs must implement the JobControl port (start, get, list, abort, subscribe), "
                f"not {type(jobs).__name__}"
            )
        root = os.path.realpath(os.fspath(root_dir))
        if not os.path.isdir(root):
            raise ConfigurationError(f"root_dir {os.fspath(root_dir)!r} is not an existing directory")
        for name, value in (("max_shell_output_bytes", max_shell_output_bytes),
                            ("max_read_bytes", max_read_bytes)):
            if not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a positive int, got {value!r}")
        if default_timeout is not None and default_timeout <= 0:
            raise ConfigurationError("default_timeout must be positive (or None for no limit)")
        if kill_grace < 0:
            raise ConfigurationError("kill_grace must be >= 0 seconds")
        for name, fn in (("before_operation", before_operation), ("permission", permission),
                         ("settle_orphaned_job", settle_orphaned_job)):
            if fn is not None and not callable(fn):
                raise ConfigurationError(f"{name} must be callable")
        self.root_dir: str | None = root
        ro: list[str] = []
        for r in additional_read_only_roots:
            real = os.path.realpath(os.fspath(r))
            if not os.path.isdir(real):
                raise ConfigurationError(f"read-only root {os.fspath(r)!r} is not an existing directory")
            ro.append(real)
        self.read_only_roots: tuple[str, ...] = tuple(ro)
        self.cwd: str = root
        if cwd is not None:
            self.cwd = self._resolve(os.fspath(cwd), write=True, base=root)
            if not os.path.isdir(self.cwd):
                raise ConfigurationError(f"cwd {os.fspath(cwd)!r} is not an existing directory")
        self._guard = before_operation
        self._permission = permission
        self.max_shell_output_bytes = max_shell_output_bytes
        self.max_read_bytes = max_read_bytes
        self.default_timeout = default_timeout
        self.kill_grace = kill_grace
        self._shell_executable = shell_executable
        self._env = dict(env) if env is not None else None
        self.fs: FileSystem | None = LocalFileSystem(self)
        self.shell: Shell | None = LocalShell(self)

        self._runner = JobRunner(
            self._launch_job,
            store=job_store,
            settle_orphaned_job=settle_orphaned_job,
            listener_timeout=job_listener_timeout,
            listener_queue_size=job_listener_queue_size,
            max_retained_jobs=max_retained_jobs,
            max_output_bytes=max_shell_output_bytes,
            kill_grace=kill_grace,
        )
        self.jobs: JobControl | None = self._runner if jobs is None else jobs

    # -- permission and guard ------------------------------------------------------------

    def request_permission(self, request: PermissionRequest) -> None:
        """Ask the ``permission`` handler; raise AccessDenied when it refuses."""
        _decide(self._permission, request, "permission denied")

    def _before(self, operation: str, target: str, tool_call_id: str | None, **details: Any) -> None:
        _decide(
            self._guard,
            PermissionRequest(operation=operation, target=target, tool_call_id=tool_call_id, details=details),
            "vetoed by before_operation",
        )

    # -- paths ---------------------------------------------------------------------------

    def resolve_path(self, path: str, *, write: bool = False) -> str:
        """The canonical absolute path for ``path``, or AccessDenied when it escapes the
        allowed roots (``write=True`` allows ``root_dir`` only)."""
        return self._resolve(path, write=write, base=self.cwd)

    def _resolve(self, path: str, *, write: bool, base: str) -> str:
        if not isinstance(path, str) or not path or "\x00" in path:
            raise ConfigurationError(f"invalid path {path!r}: give a non-empty path without NUL bytes")
        absolute = os.path.isabs(path)
        joined = os.path.normpath(path if absolute else os.path.join(base, path))
        assert self.root_dir is not None
        roots = [self.root_dir]
        if not write and absolute:
            roots += list(self.read_only_roots)
        if not any(_within(joined, r) for r in roots):
            raise AccessDenied(_escape_message(path, self.root_dir, write, self.read_only_roots))
        real = os.path.realpath(joined)
        if not any(_within(real, r) for r in roots):
            raise AccessDenied(
                f"access denied: {path!r} resolves through a symlink to {real!r}, outside "
                + _allowed(self.root_dir, write, self.read_only_roots)
            )
        return real

    def _resolve_entry(self, path: str) -> str:
        """Like ``resolve_path(path, write=True)`` but the last component is not
        followed: a symlink named by ``path`` stands for itself (delete removes the link,
        never its target)."""
        if not isinstance(path, str) or not path or "\x00" in path:
            raise ConfigurationError(f"invalid path {path!r}: give a non-empty path without NUL bytes")
        assert self.root_dir is not None
        joined = os.path.normpath(path if os.path.isabs(path) else os.path.join(self.cwd, path))
        if not _within(joined, self.root_dir):
            raise AccessDenied(_escape_message(path, self.root_dir, True, self.read_only_roots))
        if joined == self.root_dir:
            raise IsADirectoryError(f"{path!r} is the root directory; give a file path")
        parent = os.path.realpath(os.path.dirname(joined))
        if not _within(parent, self.root_dir):
            raise AccessDenied(
                f"access denied: {path!r} resolves through a symlink to {parent!r}, outside "
                + _allowed(self.root_dir, True, self.read_only_roots)
            )
        return os.path.join(parent, os.path.basename(joined))

    def _root_of(self, real: str) -> str:
        """The allowed root that contains the canonical path ``real``."""
        assert self.root_dir is not None
        for root in (self.root_dir, *self.read_only_roots):
            if _within(real, root):
                return root
        raise AccessDenied(f"access denied: {real!r} is outside every allowed root")

    # -- jobs ----------------------------------------------------------------------------

    def _command_argv(self, executable: str, args: Sequence[str], raw: bool, workdir: str) -> list[str]:
        if raw:
            if args:
                raise ConfigurationError("raw shell text takes no separate args; put them in the text")
            return [self._shell_executable, "-lc", executable]
        if not isinstance(executable, str) or not executable:
            raise ConfigurationError("give the executable to run as a non-empty string")
        bad = [a for a in args if not isinstance(a, str)]
        if bad:
            raise ConfigurationError(f"command arguments must be strings, got {bad[0]!r}")
        if os.sep in executable:  # a path: the child resolves it from its working directory
            found = os.path.join(workdir, executable)
            if not (os.path.isfile(found) and os.access(found, os.X_OK)):
                raise ConfigurationError(
                    f"executable {executable!r} is not an executable file (looked in {workdir!r}); "
                    f"give an existing program, or a command name found on PATH"
                )
        elif shutil.which(executable, path=self._path()) is None:
            hint = (f"; pass arguments separately, e.g. command={executable.split()[0]!r}, "
                    f"args={executable.split()[1:]!r}" if " " in executable.strip() else
                    "; give an installed command")
            raise ConfigurationError(f"executable {executable!r} was not found on PATH{hint}")
        return [executable, *args]

    def _path(self) -> str | None:
        return (self._env or {}).get("PATH", os.environ.get("PATH"))

    def _launch_job(self, executable: str, args: Sequence[str], raw: bool, cwd: str | None,
                    tool_call_id: str | None) -> tuple[Callable[[], Any], list[str], str]:
        """Validate and guard a job request; returns (spawn, argv, cwd)."""
        workdir = self._workdir(cwd)
        argv = self._command_argv(executable, args, raw, workdir)
        self._before("job-start", _display(argv, raw), tool_call_id, argv=argv, cwd=workdir)
        return (lambda: _process.spawn(argv, cwd=workdir, env=self._env)), argv, workdir

    def _workdir(self, cwd: str | None) -> str:
        if cwd is None:
            return self.cwd
        workdir = self.resolve_path(cwd, write=True)
        if not os.path.isdir(workdir):
            raise ConfigurationError(f"working directory {cwd!r} does not exist")
        return workdir

    def close(self, *, abort_jobs: bool = True) -> None:
        """Abort this context's running jobs (unless ``abort_jobs=False``) and stop its
        job threads."""
        self._runner.close(abort_jobs=abort_jobs)

    def __enter__(self) -> LocalExecutionContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<LocalExecutionContext root={self.root_dir!r} cwd={self.cwd!r}>"


def _decide(handler: Callable[[PermissionRequest], object] | None, request: PermissionRequest,
            what: str) -> None:
    if handler is None:
        return
    try:
        verdict = handler(request)
    except AccessDenied:
        raise
    except Exception as exc:  # noqa: BLE001 - a refusal with the handler's reason
        raise AccessDenied(f"{request.operation} {request.target!r} {what}: {exc}") from exc
    if verdict is False:
        raise AccessDenied(f"{request.operation} {request.target!r} {what}")


def _allowed(root: str, write: bool, ro: Sequence[str]) -> str:
    if write or not ro:
        return f"the root directory {root!r}"
    return f"the root directory {root!r} and the read-only roots {list(ro)!r}"


def _escape_message(path: str, root: str, write: bool, ro: Sequence[str]) -> str:
    extra = ""
    if write and ro and any(_within(os.path.normpath(path), r) for r in ro):
        extra = " (that location is read-only: it may be read and listed, not changed)"
    return (
        f"access denied: {path!r} is outside {_allowed(root, write, ro)}{extra}; "
        f"use a path inside it"
    )
