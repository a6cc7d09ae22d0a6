"""Old home of the execution-context port and the local adapter (kept for imports).

They now live in :mod:`agentkit.execution` (:mod:`agentkit.execution.base` and
:mod:`agentkit.execution.local`); import them from there or from ``agentkit``.
"""

from __future__ import annotations

from ..errors import JobNotFoundError
from ..execution.base import (
    DirEntry,
    ExecutionContext,
    FileSystem,
    JobControl,
    JobEvent,
    JobListener,
    JobState,
    JobStatus,
    PermissionHandler,
    PermissionRequest,
    Shell,
    ShellResult,
)
from ..execution.local import LocalExecutionContext

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
