"""The Tool port: a name, a description, a JSON Schema for the input, and a callable
(in ``_tool``), and the registry of tools by name (in ``_registry``). This module is
their public path and holds no code of its own, so the port, ``@tool`` and the registry
import one another in one direction only."""

from __future__ import annotations

from ._registry import ToolRegistry as ToolRegistry
from ._registry import coerce_tool as coerce_tool  # for the front doors; not a public name
from ._tool import FunctionTool as FunctionTool
from ._tool import ResultCache as ResultCache
from ._tool import Tool as Tool
from ._tool import ToolContext as ToolContext
from ._tool import ToolDecision as ToolDecision
from ._tool import to_tool_output as to_tool_output
