"""The job port and its data: :class:`JobControl` (what an execution context offers as
``context.jobs``), a job's :class:`JobState` and :class:`JobEvent`\\ s, and the
:class:`JobStore` port a job runner persists :class:`StoredJob` snapshots in.

This module imports nothing above the data layer, so the execution and store ports can
import it (``execution/base.py``, ``stores/base.py``'s users) without importing a runner;
the names are listed in :mod:`agentkit.jobs`.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from ..errors import ConfigurationError

JobStatus = Literal["running", "finished", "failed", "aborted", "lost"]
"""``lost``: the worker running the job died (jobs on Celery workers, :mod:`agentkit.celery`)."""


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


@dataclass(frozen=True, kw_only=True)
class StoredJob:
    """A persisted job snapshot and its revision."""

    state: JobState
    revision: int


@runtime_checkable
class JobStore(Protocol):
    """Where a job runner persists job snapshots.

    A store keeps the latest :class:`JobState` of each job
    under a revision number (1 for the first write). ``put`` succeeds only when the
    caller names the current revision (0 for a new job); a stale writer gets
    :class:`~agentkit.errors.StoreConflictError` and nothing is written.
    """

    def load(self) -> list[StoredJob]:
        """Every stored job, oldest first."""
        ...

    def put(self, state: JobState, *, expected_revision: int) -> int:
        """Store ``state`` if the job's current revision is ``expected_revision`` (0 for
        a new job); return the new revision or raise StoreConflictError."""
        ...

    def delete(self, execution_id: str) -> None:
        """Forget a job (retention). Unknown ids are ignored."""
        ...


def _display(argv: Sequence[str], raw: bool) -> str:
    """How a command is shown: raw shell text as given, an argument list shell-quoted."""
    if raw:
        return argv[-1]
    return shlex.join(argv)
