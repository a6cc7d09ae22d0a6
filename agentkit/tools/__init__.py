"""Tools: the Tool type, ``@tool``, the registry, the tool-call runner and the built-in
tool families (filesystem, shell, http, json; browser, whose home is
:mod:`agentkit.browser`).

The execution-context names below are re-exported from :mod:`agentkit.execution`, their
home, so imports written for 0.1.0 keep working.
"""

from __future__ import annotations

from ..errors import JobNotFoundError
from ..execution import (
    DirEntry,
    ExecutionContext,
    FileSystem,
    JobControl,
    JobEvent,
    JobState,
    LocalExecutionContext,
    PermissionRequest,
    Shell,
    ShellResult,
)
from ..truncate import TruncatedOutput, truncate_output
from .base import FunctionTool, Tool, ToolContext, ToolDecision, ToolRegistry, to_tool_output
from .decorator import tool
from .filesystem import filesystem_tools
from .json_tools import json_path, json_tools
from .shell import format_shell_result, shell_tools


def __getattr__(name: str) -> object:
    # http_tools imports requests; load it on first use so `import agentkit` stays light
    if name == "http_tools":
        from .http import http_tools

        return http_tools
    if name == "browser_tools":  # its home is agentkit.browser, which imports this package
        from ..browser.tools import browser_tools

        return browser_tools
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DirEntry",
    "ExecutionContext",
    "FileSystem",
    "FunctionTool",
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
    "ToolDecision",
    "ToolRegistry",
    "TruncatedOutput",
    "browser_tools",
    "filesystem_tools",
    "format_shell_result",
    "http_tools",
    "json_path",
    "json_tools",
    "shell_tools",
    "to_tool_output",
    "tool",
    "truncate_output",
]
