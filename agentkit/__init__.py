"""agentkit: a sync-first Python agent runtime.

``run_agent(model, prompt, tools=...)`` runs a complete tool-using agent loop in one
call; :class:`Session` is the thread-safe, event-sourced conversation underneath it.

What is exported here (the rule, see docs/architecture.md): the entry points
(``run_agent``, ``Session``, ``tool``, ``get_model`` and the built-in tool families),
the public data types, the ports (``ChatModel``, ``Tool``, ``EventStore``, ``JobStore``,
``ExecutionContext`` and its capabilities), the test models, the stores and the local
execution context that need no extra, and every error. Provider adapters and their
options live in :mod:`agentkit.models`, MCP in :mod:`agentkit.mcp`, LangChain in
:mod:`agentkit.adapters.langchain`, tool-author helpers in :mod:`agentkit.tools`.
"""

from __future__ import annotations

import logging as _logging

from .agent import Agent, run_agent, run_agent_stream
from .approval import ApprovalDecision, ApprovalPolicy, ApprovalRequest
from .budget import Limits
from .cancel import CancelToken
from .compaction import Retention, Threshold
from .errors import (
    AccessDenied,
    AgentkitError,
    ApprovalError,
    AuthenticationError,
    BrowserError,
    CancelledError,
    CompletionValidationError,
    ConfigurationError,
    ContextOverflowError,
    HookError,
    JobNotFoundError,
    McpError,
    MissingDependencyError,
    ModelError,
    OutputValidationError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    SchemaVersionError,
    ScriptExhaustedError,
    SessionClosedError,
    SessionError,
    SessionFailedError,
    StoreConflictError,
    StoreCorruptionError,
    StoreError,
    StoreLockTimeout,
    StoreUnavailableError,
    ToolDefinitionError,
    TransactionError,
    TurnLockLostError,
)
from .events import (
    AssistantMessageEvent,
    CompactionEvent,
    ContextReplacedEvent,
    ControlEvent,
    Event,
    RuntimeEvent,
    ToolResultEvent,
    UserMessageEvent,
    event_from_dict,
)
from .execution import (
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
from .hooks import Hooks
from .messages import (
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolOutput,
    ToolResultPart,
)
from .models import (
    ChatModel,
    FunctionModel,
    ModelRequest,
    ModelSettings,
    ScriptedModel,
    ToolCall,
    ToolSpec,
    Turn,
    get_model,
)
from .planning import PlanningAgent, PlanResult
from .pool import SessionPool
from .projection import build_model_messages, events_from_messages
from .results import GenerateResult, RunResult, Step, ToolCallRecord
from .session import Session
from .skills import load_skills
from .stores import (
    EventStore,
    FileEventStore,
    FileJobStore,
    InMemoryEventStore,
    InMemoryJobStore,
    JobStore,
    StoredJob,
    StoredSession,
)
from .stream import AgentEvent, AgentStream
from .subagents import subagent_tool
from .summarize import summarizing_compactor
from .tool_search import ToolSearch
from .tools import Tool, ToolContext, ToolDecision, filesystem_tools, json_tools, shell_tools, tool
from .transactions import GenerationTransaction, UncertainExecution
from .usage import Usage
from .view import ToolResultClearing

__version__ = "0.2.0.dev0"

# the library's logs reach the host's handlers only when it configures logging
_logging.getLogger("agentkit").addHandler(_logging.NullHandler())

# Names 0.1.0 exported here that are runtime internals or tool-author helpers with a
# home elsewhere: still importable from ``agentkit`` (lazily), not part of ``__all__``.
_MOVED = {
    "GenerationScheduler": "agentkit._scheduling",
    "JobRunner": "agentkit.execution._jobs",
    "Projector": "agentkit.projection",
    "ToolRegistry": "agentkit.tools",
    "TruncatedOutput": "agentkit.tools",
    "truncate_output": "agentkit.tools",
}


def __getattr__(name: str) -> object:
    import importlib

    if name == "http_tools":  # imports requests: agentkit.tools loads it on first use
        from . import tools

        return tools.http_tools
    home = _MOVED.get(name)
    if home is not None:
        return getattr(importlib.import_module(home), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "ApprovalDecision",
    "ApprovalError",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Agent",
    "AgentEvent",
    "AgentStream",
    "HookError",
    "Hooks",
    "ToolDecision",
    "run_agent_stream",
    "GenerationTransaction",
    "TransactionError",
    "UncertainExecution",
    "AccessDenied",
    "AgentkitError",
    "AssistantMessageEvent",
    "AuthenticationError",
    "BrowserError",
    "CompactionEvent",
    "Limits",
    "Retention",
    "Threshold",
    "ToolResultClearing",
    "summarizing_compactor",
    "ToolSearch",
    "load_skills",
    "CancelToken",
    "CancelledError",
    "ChatModel",
    "CompletionValidationError",
    "ConfigurationError",
    "ContextOverflowError",
    "ContextReplacedEvent",
    "ControlEvent",
    "DirEntry",
    "Event",
    "EventStore",
    "ExecutionContext",
    "FileEventStore",
    "FileJobStore",
    "FilePart",
    "FileSystem",
    "FunctionModel",
    "GenerateResult",
    "ImagePart",
    "InMemoryEventStore",
    "InMemoryJobStore",
    "JobControl",
    "JobEvent",
    "JobNotFoundError",
    "JobState",
    "JobStore",
    "LocalExecutionContext",
    "McpError",
    "Message",
    "MissingDependencyError",
    "ModelError",
    "OutputValidationError",
    "ModelRequest",
    "ModelSettings",
    "PermissionRequest",
    "ProviderError",
    "ProviderUnavailableError",
    "RateLimitError",
    "ReasoningPart",
    "RunResult",
    "RuntimeEvent",
    "SchemaVersionError",
    "ScriptExhaustedError",
    "ScriptedModel",
    "Session",
    "SessionPool",
    "SessionClosedError",
    "SessionError",
    "SessionFailedError",
    "Shell",
    "ShellResult",
    "Step",
    "StoreConflictError",
    "StoreCorruptionError",
    "StoreError",
    "StoreLockTimeout",
    "StoreUnavailableError",
    "TurnLockLostError",
    "StoredJob",
    "StoredSession",
    "TextPart",
    "Tool",
    "ToolCall",
    "ToolCallPart",
    "ToolCallRecord",
    "ToolContext",
    "ToolDefinitionError",
    "ToolOutput",
    "ToolResultEvent",
    "ToolResultPart",
    "ToolSpec",
    "Turn",
    "Usage",
    "UserMessageEvent",
    "build_model_messages",
    "event_from_dict",
    "events_from_messages",
    "filesystem_tools",
    "get_model",
    "http_tools",
    "json_tools",
    "run_agent",
    "shell_tools",
    "tool",
    "subagent_tool",
    "PlanningAgent",
    "PlanResult",
    "__version__",
]
