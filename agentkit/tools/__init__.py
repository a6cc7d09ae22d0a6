"""Tools: the Tool type, ``@tool``, the registry and the tool-call runner."""

from __future__ import annotations

from .base import Tool, ToolContext, ToolRegistry, to_tool_output
from .context import (
    DirEntry,
    ExecutionContext,
    FileSystem,
    JobControl,
    JobEvent,
    JobNotFoundError,
    JobState,
    LocalExecutionContext,
    PermissionRequest,
    Shell,
    ShellResult,
)
from .decorator import tool
from .filesystem import filesystem_tools
from .json_tools import json_path, json_tools
from .shell import format_shell_result, shell_tools


def __getattr__(name: str) -> object:
    # http_tools imports requests; load it on first use so `import agentkit` stays light
    if name == "http_tools":
        from .http import http_tools

        return http_tools
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DirEntry",
    "ExecutionContext",
    "FileSystem",
    "JobControl",
    "JobEvent",
    "JobNotFoundError",
    "JobState",
    "LocalExecutionContext",
    "PermissionRequest",
    "Shell",
    "ShellResult",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "filesystem_tools",
    "format_shell_result",
    "http_tools",
    "json_path",
    "json_tools",
    "shell_tools",
    "to_tool_output",
    "tool",
]
