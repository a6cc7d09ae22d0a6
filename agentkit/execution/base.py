"""The execution-context port: where built-in tools read files, run commands and start jobs.

:class:`ExecutionContext` is the port. A context has optional capabilities (``fs``,
``shell``, ``jobs``: the :class:`FileSystem`, :class:`Shell` and :class:`JobControl`
protocols), a ``cwd``/``root_dir`` and a ``request_permission`` hook; tools only ever
talk to the context, so a host can supply its own (a container, an SSH connection, a
remote sandbox) and the same tools work unchanged. This module also holds the data the
ports exchange (:class:`PermissionRequest`, :class:`ShellResult`, :class:`DirEntry`,
:class:`JobState`, :class:`JobEvent`). The local adapter is
:class:`agentkit.execution.local.LocalExecutionContext`.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ..cancel import CancelToken
from ..errors import ConfigurationError

JobStatus = Literal["running", "finished", "failed", "aborted", "lost"]
"""``lost``: the worker running the job died (jobs on Celery workers, :mod:`agentkit.celery`)."""


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
        if data.get("state") not in ("running", "finished", "failed", "aborted", "lost"):
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
    terminal states finished, failed, aborted and lost)."""


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


def _display(argv: Sequence[str], raw: bool) -> str:
    """How a command is shown: raw shell text as given, an argument list shell-quoted."""
    if raw:
        return argv[-1]
    return shlex.join(argv)
