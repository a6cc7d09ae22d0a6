"""Execution contexts: where built-in tools read files and run commands.

The port and its data live in :mod:`agentkit.execution.base`; the local adapter is
:class:`LocalExecutionContext` (:mod:`agentkit.execution.local`). A host supplies its own
context (a container, an SSH connection, a remote sandbox) by implementing
:class:`ExecutionContext`; the built-in tools work unchanged. A context's background jobs
(``context.jobs``, the ``JobControl`` port) live in :mod:`agentkit.jobs`.
"""

from __future__ import annotations

from .base import (
    DirEntry,
    ExecutionContext,
    FileSystem,
    OutputCallback,
    PermissionHandler,
    PermissionRequest,
    Shell,
    ShellResult,
)
from .local import LocalExecutionContext

__all__ = [
    "DirEntry",
    "ExecutionContext",
    "FileSystem",
    "LocalExecutionContext",
    "OutputCallback",
    "PermissionHandler",
    "PermissionRequest",
    "Shell",
    "ShellResult",
]
