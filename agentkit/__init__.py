"""agentkit: a sync-first Python agent runtime.

``run_agent(model, prompt, tools=...)`` runs a complete tool-using agent loop in one
call; :class:`Session` is the thread-safe, event-sourced conversation underneath it.
"""

from __future__ import annotations

from .agent import run_agent, run_agent_stream
from .cancel import CancelToken
from .errors import (
    AccessDenied,
    AgentkitError,
    AuthenticationError,
    CancelledError,
    CompletionValidationError,
    ConfigurationError,
    ContextOverflowError,
    HookError,
    McpError,
    MissingDependencyError,
    ModelError,
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
    ToolDefinitionError,
)
from .events import (
    AssistantMessageEvent,
    ContextReplacedEvent,
    ControlEvent,
    Event,
    RuntimeEvent,
    ToolResultEvent,
    UserMessageEvent,
    event_from_dict,
)
from .hooks import Hooks, ToolDecision
from .job_store import FileJobStore, InMemoryJobStore, JobStore, StoredJob
from .jobs import JobRunner
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
from .projection import Projector, build_model_messages, events_from_messages
from .results import GenerateResult, RunResult, Step, ToolCallRecord
from .scheduling import GenerationScheduler
from .session import Session
from .stores import EventStore, FileEventStore, InMemoryEventStore, StoredSession
from .stream import AgentEvent, AgentStream
from .tools import (
    ExecutionContext,
    JobEvent,
    JobNotFoundError,
    JobState,
    LocalExecutionContext,
    PermissionRequest,
    ShellResult,
    Tool,
    ToolContext,
    ToolRegistry,
    filesystem_tools,
    json_tools,
    shell_tools,
    tool,
)
from .truncate import TruncatedOutput, truncate_output
from .usage import Usage

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # http_tools imports requests; it is loaded on first use
    if name == "http_tools":
        from .tools.http import http_tools

        return http_tools
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "AgentEvent",
    "AgentStream",
    "HookError",
    "Hooks",
    "ToolDecision",
    "run_agent_stream",
    "AccessDenied",
    "AgentkitError",
    "AssistantMessageEvent",
    "AuthenticationError",
    "CancelToken",
    "CancelledError",
    "ChatModel",
    "CompletionValidationError",
    "ConfigurationError",
    "ContextOverflowError",
    "ContextReplacedEvent",
    "ControlEvent",
    "Event",
    "EventStore",
    "ExecutionContext",
    "FileEventStore",
    "FileJobStore",
    "FilePart",
    "FunctionModel",
    "GenerateResult",
    "GenerationScheduler",
    "ImagePart",
    "InMemoryEventStore",
    "InMemoryJobStore",
    "JobEvent",
    "JobNotFoundError",
    "JobRunner",
    "JobState",
    "JobStore",
    "LocalExecutionContext",
    "McpError",
    "Message",
    "MissingDependencyError",
    "ModelError",
    "ModelRequest",
    "ModelSettings",
    "PermissionRequest",
    "Projector",
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
    "SessionClosedError",
    "SessionError",
    "SessionFailedError",
    "ShellResult",
    "Step",
    "StoreConflictError",
    "StoreCorruptionError",
    "StoreError",
    "StoreLockTimeout",
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
    "ToolRegistry",
    "ToolResultEvent",
    "ToolResultPart",
    "ToolSpec",
    "TruncatedOutput",
    "Turn",
    "Usage",
    "UserMessageEvent",
    "__version__",
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
    "truncate_output",
]
