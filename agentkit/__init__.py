"""agentkit: a sync-first Python agent runtime.

``run_agent(model, prompt, tools=...)`` runs a complete tool-using agent loop in one
call; :class:`Session` is the thread-safe, event-sourced conversation underneath it.

What is exported here (the rule, see docs/architecture.md, "Public surface"): what an
ordinary program names: the front doors, results and context, the policies and limits,
the embedded stores, the test models and ``ToolCall``, ``CancelToken``, and the errors
users catch. Everything else has one home in its concept's folder: event classes in
:mod:`agentkit.events`, messages in :mod:`agentkit.messages`, the model port and
adapters in :mod:`agentkit.models`, the event-store port in :mod:`agentkit.stores`, the
execution port in :mod:`agentkit.execution`, jobs in :mod:`agentkit.jobs`, projection,
compaction and budgets in :mod:`agentkit.context`, agent events in
:mod:`agentkit.streaming`, tool-author helpers in :mod:`agentkit.tools`, MCP in
:mod:`agentkit.mcp`, LangChain in :mod:`agentkit.adapters.langchain`.
"""

from __future__ import annotations

import logging as _logging
from typing import TYPE_CHECKING

from .agent import Agent, run_agent, run_agent_stream
from .approvals._policy import ApprovalDecision, ApprovalPolicy, ApprovalRequest
from .cancel import CancelToken
from .context._budget import Limits
from .context._compaction import Retention, Threshold
from .context._summarize import summarizing_compactor
from .context._view import ToolResultClearing
from .errors import (
    AccessDenied,
    AgentClosedError,
    AgentkitError,
    ApprovalError,
    AuthenticationError,
    BrowserError,
    CancelledError,
    CompletionValidationError,
    ConfigurationError,
    ContextOverflowError,
    GuardrailTripped,
    HookError,
    InputError,
    JobNotFoundError,
    McpError,
    MissingDependencyError,
    ModelError,
    OutputValidationError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    RunLimitTimeout,
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
from .evals._replay import replay
from .guardrails import input_guardrail, output_guardrail, tool_guardrail
from .hooks import Hooks
from .models.registry import get_model
from .models.scripted import FunctionModel, ScriptedModel, ToolCall
from .planning._agent import PlanningAgent, PlanResult
from .results import GenerateResult, RunResult, Step, ToolCallRecord
from .session._pool import SessionPool
from .session._session import Session
from .stores.file import FileEventStore
from .stores.memory import InMemoryEventStore
from .streaming._events import AgentEvent
from .streaming._stream import AgentStream
from .tools._cache import ToolCache
from .tools._handoffs import handoff
from .tools._search import ToolSearch
from .tools._skills import load_skills
from .tools._subagents import subagent_tool
from .tools.base import Tool, ToolContext, ToolDecision
from .tools.decorator import tool
from .tools.filesystem import filesystem_tools
from .tools.json_tools import json_tools
from .tools.shell import shell_tools
from .transactions._journal import InputRequest
from .usage import Usage

if TYPE_CHECKING:
    from .tools.http import http_tools

__version__ = "0.2.0.dev0"

# the library's logs reach the host's handlers only when it configures logging
_logging.getLogger("agentkit").addHandler(_logging.NullHandler())


def __getattr__(name: str) -> object:
    if name == "http_tools":  # imports requests: loaded on first use, so `import agentkit` stays light
        from .tools.http import http_tools

        return http_tools
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    # front doors
    "Agent",
    "PlanningAgent",
    "Session",
    "SessionPool",
    "filesystem_tools",
    "get_model",
    "handoff",
    "http_tools",
    "json_tools",
    "load_skills",
    "replay",
    "run_agent",
    "run_agent_stream",
    "shell_tools",
    "subagent_tool",
    "tool",
    # results and context
    "AgentEvent",
    "AgentStream",
    "GenerateResult",
    "PlanResult",
    "RunResult",
    "Step",
    "Tool",
    "ToolCallRecord",
    "ToolContext",
    "Usage",
    # policies and limits
    "ApprovalDecision",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Hooks",
    "InputRequest",
    "Limits",
    "Retention",
    "Threshold",
    "ToolCache",
    "ToolDecision",
    "ToolResultClearing",
    "ToolSearch",
    "input_guardrail",
    "output_guardrail",
    "summarizing_compactor",
    "tool_guardrail",
    # stores
    "FileEventStore",
    "InMemoryEventStore",
    # test models
    "FunctionModel",
    "ScriptedModel",
    "ToolCall",
    # cancellation
    "CancelToken",
    # errors
    "AccessDenied",
    "AgentClosedError",
    "AgentkitError",
    "ApprovalError",
    "AuthenticationError",
    "BrowserError",
    "CancelledError",
    "CompletionValidationError",
    "ConfigurationError",
    "ContextOverflowError",
    "GuardrailTripped",
    "HookError",
    "InputError",
    "JobNotFoundError",
    "McpError",
    "MissingDependencyError",
    "ModelError",
    "OutputValidationError",
    "ProviderError",
    "ProviderUnavailableError",
    "RateLimitError",
    "RunLimitTimeout",
    "SchemaVersionError",
    "ScriptExhaustedError",
    "SessionClosedError",
    "SessionError",
    "SessionFailedError",
    "StoreConflictError",
    "StoreCorruptionError",
    "StoreError",
    "StoreLockTimeout",
    "StoreUnavailableError",
    "ToolDefinitionError",
    "TransactionError",
    "TurnLockLostError",
    # version
    "__version__",
]
