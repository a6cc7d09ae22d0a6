"""The execution-context port: where built-in tools read files, run commands and start jobs.

:class:`ExecutionContext` is the port. A context has optional capabilities (``fs``,
``shell``, ``jobs``: the :class:`FileSystem`, :class:`Shell` and :class:`JobControl`
protocols), a ``cwd``/``root_dir`` and a ``request_permission`` hook; tools only ever
talk to the context, so a host can supply its own (a container, an SSH connection, a
remote sandbox) and the same tools work unchanged. This module also holds the data the
ports exchange (:class:`PermissionRequest`, :class:`DirEntry`; :class:`ShellResult` is the
process supervisor's, ``agentkit._process``). The job port and data (:class:`JobControl`,
:class:`JobState`, :class:`JobEvent`) are :mod:`agentkit.jobs`'; they are importable here
too. The local adapter is :class:`agentkit.execution.local.LocalExecutionContext`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from .._process import OutputCallback as OutputCallback  # imported back: the supervisor's
from .._process import ShellResult as ShellResult
from ..cancel import CancelToken
from ..jobs._base import JobControl as JobControl  # imported back: listed in agentkit.jobs
from ..jobs._base import JobEvent as JobEvent
from ..jobs._base import JobListener as JobListener
from ..jobs._base import JobState as JobState
from ..jobs._base import JobStatus as JobStatus
from ..jobs._base import _display as _display

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
class DirEntry:
    """One entry of a directory listing."""

    name: str
    kind: Literal["file", "directory", "symlink", "other"]
    size: int | None = None


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
