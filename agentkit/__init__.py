"""agentkit: a sync-first Python agent runtime.

``run_agent(model, prompt, tools=...)`` runs a complete tool-using agent loop in one
call; :class:`Session` is the thread-safe, event-sourced conversation underneath it.
"""

from __future__ import annotations

from .agent import run_agent
from .cancel import CancelToken
from .errors import (
    AccessDenied,
    AgentkitError,
    AuthenticationError,
    CancelledError,
    CompletionValidationError,
    ConfigurationError,
    ContextOverflowError,
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
from .session import Session
from .stores import EventStore, FileEventStore, InMemoryEventStore, StoredSession
from .tools import Tool, ToolContext, ToolRegistry, tool
from .usage import Usage

__version__ = "0.1.0"

__all__ = [
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
    "FileEventStore",
    "FilePart",
    "FunctionModel",
    "GenerateResult",
    "ImagePart",
    "InMemoryEventStore",
    "Message",
    "MissingDependencyError",
    "ModelError",
    "ModelRequest",
    "ModelSettings",
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
    "Step",
    "StoreConflictError",
    "StoreCorruptionError",
    "StoreError",
    "StoreLockTimeout",
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
    "Turn",
    "Usage",
    "UserMessageEvent",
    "__version__",
    "build_model_messages",
    "event_from_dict",
    "events_from_messages",
    "get_model",
    "run_agent",
    "tool",
]
