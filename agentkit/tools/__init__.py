"""Tools: the Tool type, ``@tool``, the registry and the tool-call runner."""

from __future__ import annotations

from .base import Tool, ToolContext, ToolRegistry, to_tool_output
from .decorator import tool

__all__ = ["Tool", "ToolContext", "ToolRegistry", "to_tool_output", "tool"]
