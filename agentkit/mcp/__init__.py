"""MCP servers as agentkit tools, from synchronous code.

::

    from agentkit import run_agent
    from agentkit.mcp import connect_mcp

    with connect_mcp({"files": {"command": "python", "args": ["server.py"]}}) as mcp:
        result = run_agent(model, "List the files", tools=mcp.tools)

Needs the ``mcp`` extra (``pip install 'sync-agentkit[mcp]'``). Importing this package does not
import the mcp SDK; :func:`connect_mcp` does, and raises
:class:`~agentkit.errors.MissingDependencyError` when it is missing.
"""

from __future__ import annotations

from ._calls import AuthorizeToolCall
from .config import HttpServer, LogLevel, ServerSpec, StdioServer
from .connect import connect_mcp
from .host import (
    ApproveSampling,
    ElicitationHandler,
    ElicitationRequest,
    ElicitationResult,
    McpPrompt,
    McpPromptArgument,
    McpResource,
    SamplingHandler,
    SamplingRequest,
    SamplingResult,
)
from .naming import MAX_TOOL_NAME_LENGTH, exposed_names, sanitize_name
from .oauth import AuthorizationResponse, McpOAuth, OnAuthorize, PendingAuthorizations
from .results import tool_result_to_output
from .tokens import FileTokenStore, MemoryTokenStore, TokenStore
from .toolset import McpServerStatus, McpToolRef, McpToolset

__all__ = [
    "MAX_TOOL_NAME_LENGTH",
    "ApproveSampling",
    "AuthorizationResponse",
    "AuthorizeToolCall",
    "ElicitationHandler",
    "ElicitationRequest",
    "ElicitationResult",
    "FileTokenStore",
    "HttpServer",
    "LogLevel",
    "McpOAuth",
    "McpPrompt",
    "McpPromptArgument",
    "McpResource",
    "McpServerStatus",
    "McpToolRef",
    "McpToolset",
    "MemoryTokenStore",
    "OnAuthorize",
    "PendingAuthorizations",
    "SamplingHandler",
    "SamplingRequest",
    "SamplingResult",
    "ServerSpec",
    "StdioServer",
    "TokenStore",
    "connect_mcp",
    "exposed_names",
    "sanitize_name",
    "tool_result_to_output",
]
