"""Execution contexts: where built-in tools read files, run commands and start jobs.

:class:`ExecutionContext` is the port. A context has optional capabilities (``fs``,
``shell``, ``jobs``), a ``cwd``/``root_dir`` and a ``request_permission`` hook; tools
only ever talk to the context, so a host can supply its own (a container, an SSH
connection, a remote sandbox) and the same tools work unchanged.

:class:`LocalExecutionContext` is the local adapter: every path is resolved canonically
and confined to ``root_dir`` (``..`` and symlink escapes raise
:class:`~agentkit.errors.AccessDenied`), extra read-only roots allow reads and listings
only, and a ``before_operation`` guard runs right before each side effect and may veto
it. Commands run as real subprocesses in their own process group, bounded by a timeout,
a :class:`~agentkit.CancelToken` and an output cap.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ..cancel import CancelToken
from ..errors import AccessDenied, AgentkitError, ConfigurationError

__all__ = [
    "DirEntry",
    "ExecutionContext",
    "FileSystem",
    "JobControl",
    "JobEvent",
    "JobListener",
    "JobNotFoundError",
    "JobState",
    "JobStatus",
    "LocalExecutionContext",
    "PermissionHandler",
    "PermissionRequest",
    "Shell",
    "ShellResult",
]

JobStatus = Literal["running", "finished", "failed", "aborted"]


class JobNotFoundError(AgentkitError, LookupError):
    """No job with this execution id is known (it may have been pruned)."""


# -- data ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PermissionRequest:
    """An operation a tool (or the context guard) is about to perform."""

    operation: str
    """``read``, ``list``, ``write``, ``delete``, ``shell`` (raw), ``exec``
    (structured), ``job-start``, ``http-get``, ``http-post``..."""
    target: str
    """The path, command line or URL the operation acts on."""
    tool_call_id: str | None = None
    """The model's tool-call id when a tool asked."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """Extra facts (argument list, byte count...)."""


PermissionHandler = Callable[[PermissionRequest], "bool | None"]
"""Decides a :class:`PermissionRequest`: return False or raise to deny."""


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


@dataclass(frozen=True, kw_only=True)
class DirEntry:
    """One entry of a directory listing."""

    name: str
    kind: Literal["file", "directory", "symlink", "other"]
    size: int | None = None


@dataclass(frozen=True, kw_only=True)
class JobState:
    """A snapshot of one background job."""

    execution_id: str
    command: str
    """The command line, for display."""
    argv: tuple[str, ...]
    state: JobStatus
    exit_code: int | None = None
    error: str | None = None
    """Why the job failed or was aborted."""
    tool_call_id: str | None = None
    """The tool call that started the job, if a tool did."""
    cwd: str = ""
    pid: int | None = None
    started_at: float = 0.0
    updated_at: float = 0.0
    finished_at: float | None = None
    output_tail: str = ""
    """The end of the combined output (bounded)."""
    output_bytes: int = 0

    @property
    def running(self) -> bool:
        """True while the job has not reached a terminal state."""
        return self.state == "running"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` restores an equal state."""
        return {
            "execution_id": self.execution_id,
            "command": self.command,
            "argv": list(self.argv),
            "state": self.state,
            "exit_code": self.exit_code,
            "error": self.error,
            "tool_call_id": self.tool_call_id,
            "cwd": self.cwd,
            "pid": self.pid,
            "started_at": self.started_at,
            "updated_at": self.updated_at,
            "finished_at": self.finished_at,
            "output_tail": self.output_tail,
            "output_bytes": self.output_bytes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobState:
        """Restore a state written by :meth:`to_dict`."""
        if data.get("state") not in ("running", "finished", "failed", "aborted"):
            raise ConfigurationError(f"invalid job state {data.get('state')!r}")
        return cls(
            execution_id=str(data["execution_id"]),
            command=str(data.get("command", "")),
            argv=tuple(data.get("argv", ())),
            state=data["state"],
            exit_code=data.get("exit_code"),
            error=data.get("error"),
            tool_call_id=data.get("tool_call_id"),
            cwd=data.get("cwd", ""),
            pid=data.get("pid"),
            started_at=float(data.get("started_at", 0.0)),
            updated_at=float(data.get("updated_at", 0.0)),
            finished_at=data.get("finished_at"),
            output_tail=data.get("output_tail", ""),
            output_bytes=int(data.get("output_bytes", 0)),
        )


@dataclass(frozen=True, kw_only=True)
class JobEvent:
    """What job subscribers receive, in order per job (``seq`` 1, 2, ...)."""

    type: Literal["started", "output", "finished"]
    execution_id: str
    seq: int
    stream: Literal["stdout", "stderr"] | None = None
    """For ``output``: which stream the chunk came from."""
    chunk: str = ""
    """For ``output``: the new text."""
    state: JobState | None = None
    """For ``started`` and ``finished``: the job's snapshot (``finished`` covers the
    terminal states finished, failed and aborted)."""


JobListener = Callable[[JobEvent], object]
OutputCallback = Callable[[str, str], None]
"""``on_output(stream, chunk)`` with stream ``"stdout"`` or ``"stderr"``."""


# -- ports -----------------------------------------------------------------------------


@runtime_checkable
class FileSystem(Protocol):
    """File operations of an execution context. Paths are relative to the context's
    ``cwd`` or absolute; implementations enforce their own boundaries."""

    def read_file(self, path: str, *, tool_call_id: str | None = None) -> str:
        """The text of a file."""
        ...
    def write_file(self, path: str, content: str, *, tool_call_id: str | None = None) -> int:
        """Create or replace a file; returns the bytes written."""
        ...
    def list_directory(self, path: str, *, tool_call_id: str | None = None) -> list[DirEntry]:
        """The entries of a directory."""
        ...
    def delete_file(self, path: str, *, tool_call_id: str | None = None) -> None:
        """Delete one file."""
        ...


@runtime_checkable
class Shell(Protocol):
    """Command execution. ``run`` takes raw shell text; ``run_structured`` an executable
    and literal arguments (no shell parsing)."""

    def run(self, command: str, *, cwd: str | None = None, timeout: float | None = None,
            cancel: CancelToken | None = None, on_output: OutputCallback | None = None,
            tool_call_id: str | None = None) -> ShellResult:
        """Run shell text (e.g. with ``bash -lc``)."""
        ...

    def run_structured(self, executable: str, args: Sequence[str] = (), *, cwd: str | None = None,
                       timeout: float | None = None, cancel: CancelToken | None = None,
                       on_output: OutputCallback | None = None,
                       tool_call_id: str | None = None) -> ShellResult:
        """Run ``executable`` with literal ``args``, without a shell."""
        ...


@runtime_checkable
class JobControl(Protocol):
    """Background jobs: start returns at once; events arrive through ``subscribe``."""

    def start(self, executable: str, args: Sequence[str] = (), *, raw: bool = False,
              cwd: str | None = None, timeout: float | None = None,
              tool_call_id: str | None = None) -> JobState:
        """Start a job; returns its ``running`` state at once."""
        ...
    def get(self, execution_id: str) -> JobState:
        """A job's current state (JobNotFoundError for an unknown id)."""
        ...
    def list(self) -> list[JobState]:
        """Every known job."""
        ...
    def abort(self, execution_id: str, reason: str = "aborted") -> JobState:
        """Stop a running job; returns its final state."""
        ...
    def subscribe(self, listener: JobListener) -> Callable[[], None]:
        """Receive job events from now on; returns an unsubscribe function."""
        ...


@runtime_checkable
class ExecutionContext(Protocol):
    """Where tools act. Capabilities a context lacks are ``None``."""

    cwd: str
    root_dir: str | None
    fs: FileSystem | None
    shell: Shell | None
    jobs: JobControl | None

    def request_permission(self, request: PermissionRequest) -> None:
        """Raise :class:`~agentkit.errors.AccessDenied` to refuse ``request``."""
        ...


# -- local adapter ---------------------------------------------------------------------


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
      of jobs a previous host left running.

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
        job_store: Any = None,
        settle_orphaned_job: Callable[[JobState], JobState | None] | None = None,
        job_listener_timeout: float = 30.0,
        job_listener_queue_size: int = 256,
        max_retained_jobs: int = 100,
    ) -> None:
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
        # the local parts import this module's data types, hence imported here
        from ._jobs import JobRunner
        from ._local import LocalFileSystem, LocalShell

        self.fs: FileSystem | None = LocalFileSystem(self)
        self.shell: Shell | None = LocalShell(self)

        self.jobs: JobControl | None = JobRunner(
            self._launch_job,
            store=job_store,
            settle_orphaned_job=settle_orphaned_job,
            listener_timeout=job_listener_timeout,
            listener_queue_size=job_listener_queue_size,
            max_retained_jobs=max_retained_jobs,
            max_output_bytes=max_shell_output_bytes,
            kill_grace=kill_grace,
        )

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
        from ._process import spawn

        return (lambda: spawn(argv, cwd=workdir, env=self._env)), argv, workdir

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
        runner = self.jobs
        if runner is not None and hasattr(runner, "close"):
            runner.close(abort_jobs=abort_jobs)

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


def _display(argv: Sequence[str], raw: bool) -> str:
    """How a command is shown: raw shell text as given, an argument list shell-quoted."""
    if raw:
        return argv[-1]
    return shlex.join(argv)
