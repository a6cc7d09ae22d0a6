"""Execution contexts: where built-in tools read files, run commands and start jobs.

The port and its data live in :mod:`agentkit.execution.base`; the local adapter is
:class:`~agentkit.execution.local.LocalExecutionContext`. A host supplies its own
context (a container, an SSH connection, a remote sandbox) by implementing
:class:`ExecutionContext`; the built-in tools work unchanged.
"""

from __future__ import annotations

from .base import (
    DirEntry,
    ExecutionContext,
    FileSystem,
    JobControl,
    JobEvent,
    JobState,
    PermissionRequest,
    Shell,
    ShellResult,
)
from .local import LocalExecutionContext

__all__ = [
    "DirEntry",
    "ExecutionContext",
    "FileSystem",
    "JobControl",
    "JobEvent",
    "JobState",
    "LocalExecutionContext",
    "PermissionRequest",
    "Shell",
    "ShellResult",
]
