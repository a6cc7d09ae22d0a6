"""The public surface: documented, keyword-only, and free of optional imports."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys

import agentkit


def test_all_names_exist_and_have_docstrings():
    for name in agentkit.__all__:
        obj = getattr(agentkit, name)
        if name == "__version__":
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"agentkit.{name} has no docstring"


# API-DECISIONS: ToolCall(name=..., input=...) in scripts; the positional form stays as
# a convenience. Every other public data type is keyword-only.
_POSITIONAL_CONVENIENCE = {"ToolCall": {"name", "input"}}


def test_public_dataclasses_are_keyword_only_and_frozen():
    for name in agentkit.__all__:
        obj = getattr(agentkit, name)
        if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
            params = dataclasses.fields(obj)
            allowed = _POSITIONAL_CONVENIENCE.get(name, set())
            positional = {f.name for f in params if f.init and not f.kw_only}
            assert positional == allowed, f"{name} has positional fields {positional - allowed}"
            init = vars(obj).get("__init__")
            assert init is None or init.__code__.co_filename == "<string>", f"{name} hand-writes __init__"
            assert obj.__dataclass_params__.frozen, f"{name} is not frozen"


def test_importing_agentkit_imports_no_optional_sdk():
    code = (
        "import sys, agentkit, agentkit.models, agentkit.tools, agentkit.stores;"
        "import agentkit.observability;"
        "bad = [m for m in ('openai', 'anthropic', 'mcp', 'langchain_core', 'requests', 'opentelemetry')"
        " if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_public_name_is_documented():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    text = (root / "README.md").read_text() + "".join(p.read_text() for p in (root / "docs").glob("*.md"))
    missing = [n for n in agentkit.__all__ if n != "__version__" and not re.search(rf"\b{re.escape(n)}\b", text)]
    assert missing == [], f"public names no page of docs/ or the README mentions: {missing}"


# -- the surface is a contract: a change to any public namespace is deliberate ---------------

PUBLIC_NAMESPACES = {
    'agentkit': [
        'AccessDenied', 'Agent', 'AgentEvent', 'AgentStream', 'AgentkitError', 'ApprovalDecision',
        'ApprovalError', 'ApprovalPolicy', 'ApprovalRequest', 'AssistantMessageEvent',
        'AuthenticationError', 'BrowserError', 'CancelToken', 'CancelledError', 'ChatModel',
        'CompactionEvent', 'CompletionValidationError', 'ConfigurationError',
        'ContextOverflowError', 'ContextReplacedEvent', 'ControlEvent', 'DirEntry', 'Event',
        'EventStore', 'ExecutionContext', 'FileEventStore', 'FileJobStore', 'FilePart',
        'FileSystem', 'FunctionModel', 'GenerateResult', 'GenerationTransaction', 'HookError',
        'Hooks', 'ImagePart', 'InMemoryEventStore', 'InMemoryJobStore', 'JobControl', 'JobEvent',
        'JobNotFoundError', 'JobState', 'JobStore', 'Limits', 'LocalExecutionContext', 'McpError',
        'Message', 'MissingDependencyError', 'ModelError', 'ModelRequest', 'ModelSettings',
        'OutputValidationError', 'PermissionRequest', 'PlanResult', 'PlanningAgent',
        'ProviderError', 'ProviderUnavailableError', 'RateLimitError', 'ReasoningPart', 'Retention',
        'RunResult', 'RuntimeEvent', 'SchemaVersionError', 'ScriptExhaustedError', 'ScriptedModel',
        'Session', 'SessionClosedError', 'SessionError', 'SessionFailedError', 'SessionPool',
        'Shell', 'ShellResult', 'Step', 'StoreConflictError', 'StoreCorruptionError', 'StoreError',
        'StoreLockTimeout', 'StoreUnavailableError', 'StoredJob', 'StoredSession', 'TextPart',
        'Threshold', 'Tool', 'ToolCall', 'ToolCallPart', 'ToolCallRecord', 'ToolContext',
        'ToolDecision', 'ToolDefinitionError', 'ToolOutput', 'ToolResultClearing',
        'ToolResultEvent', 'ToolResultPart', 'ToolSearch', 'ToolSpec', 'TransactionError', 'Turn',
        'TurnLockLostError', 'UncertainExecution', 'Usage', 'UserMessageEvent', '__version__', 'build_model_messages',
        'event_from_dict', 'events_from_messages', 'filesystem_tools', 'get_model', 'http_tools',
        'json_tools', 'load_skills', 'run_agent', 'run_agent_stream', 'shell_tools',
        'subagent_tool', 'summarizing_compactor', 'tool',
    ],
    'agentkit.adapters.langchain': [
        'Injected', 'LangChainChatModel', 'LangChainHistory', 'events_from_langchain',
        'from_langchain_tool', 'from_langchain_tools', 'messages_from_langchain',
        'messages_to_langchain', 'to_langchain_tool',
    ],
    'agentkit.adapters.langchain.chat_model': [
        'LangChainChatModel',
    ],
    'agentkit.adapters.langchain.messages': [
        'LangChainHistory', 'events_from_langchain', 'messages_from_langchain',
        'messages_to_langchain',
    ],
    'agentkit.adapters.langchain.tools': [
        'Injected', 'from_langchain_tool', 'from_langchain_tools', 'to_langchain_tool',
    ],
    'agentkit.agent': [
        'run_agent', 'run_agent_stream',
    ],
    'agentkit.agents': [
        'Agent',
    ],
    'agentkit.approval': [
        'APPROVAL_DECIDED', 'APPROVAL_REMEMBERED', 'APPROVAL_REQUESTED', 'ApprovalDecision',
        'ApprovalMode', 'ApprovalPolicy', 'ApprovalRequest', 'ApprovalState', 'Verdict',
    ],
    'agentkit.browser': [
        'BrowserContext', 'ChromiumBrowser', 'PageSnapshot', 'SnapshotFormat', 'browser_tools',
    ],
    'agentkit.browser.base': [
        'BrowserContext', 'PageSnapshot', 'SnapshotFormat',
    ],
    'agentkit.browser.chromium': [
        'ChromiumBrowser',
    ],
    'agentkit.browser.tools': [
        'browser_tools',
    ],
    'agentkit.budget': [
        'Budget', 'BudgetBreach', 'Limits',
    ],
    'agentkit.cancel': [
        'CancelToken',
    ],
    'agentkit.cli': [
        'main',
    ],
    'agentkit.compaction': [
        'CONVERSATION_EVENTS', 'Compactor', 'DEFAULT_KEEP_LAST', 'Retention', 'Threshold',
        'compaction_boundary', 'conversation_events_since_reset', 'estimate_tokens',
        'summary_messages',
    ],
    'agentkit.celery': ['AgentTasks'],
    'agentkit.errors': [
        'AccessDenied', 'AgentkitError', 'ApprovalError', 'AuthenticationError', 'BrokerUnavailableError',
        'BrowserError', 'CancelledError', 'CompletionValidationError', 'ConfigurationError', 'ContextOverflowError',
        'HookError', 'JobNotFoundError', 'McpError', 'MissingDependencyError', 'ModelError',
        'OutputValidationError', 'ProviderError', 'ProviderUnavailableError', 'RateLimitError',
        'SchemaVersionError', 'ScriptExhaustedError', 'SessionClosedError', 'SessionError',
        'SessionFailedError', 'StoreConflictError', 'StoreCorruptionError', 'StoreError',
        'StoreLockTimeout', 'StoreUnavailableError', 'ToolDefinitionError', 'TransactionError',
        'TurnLockLostError',
    ],
    'agentkit.events': [
        'AssistantMessageEvent', 'CompactionEvent', 'ContextReplacedEvent', 'ControlEvent', 'Event',
        'RuntimeEvent', 'ToolResultEvent', 'UserMessageEvent', 'event_from_dict', 'new_id',
    ],
    'agentkit.execution': [
        'DirEntry', 'ExecutionContext', 'FileSystem', 'JobControl', 'JobEvent', 'JobState',
        'LocalExecutionContext', 'PermissionRequest', 'Shell', 'ShellResult',
    ],
    'agentkit.execution.base': [
        'DirEntry', 'ExecutionContext', 'FileSystem', 'JobControl', 'JobEvent', 'JobListener',
        'JobNotFoundError', 'JobState', 'JobStatus', 'OutputCallback', 'PermissionHandler',
        'PermissionRequest', 'Shell', 'ShellResult',
    ],
    'agentkit.execution.local': [
        'LocalExecutionContext',
    ],
    'agentkit.hooks': [
        'Hooks', 'ToolDecision',
    ],
    'agentkit.invariants': [
        'check_events', 'check_messages',
    ],
    'agentkit.job_status': [
        'RunningJobs',
    ],
    'agentkit.job_store': [
        'FileJobStore', 'InMemoryJobStore', 'JobStore', 'StoredJob',
    ],
    'agentkit.jobs': [
        'JobRunner',
    ],
    'agentkit.mcp': [
        'ApproveSampling', 'AuthorizationResponse', 'AuthorizeToolCall', 'ElicitationHandler',
        'ElicitationRequest', 'ElicitationResult', 'FileTokenStore', 'HttpServer', 'LogLevel',
        'MAX_TOOL_NAME_LENGTH', 'McpOAuth', 'McpPrompt', 'McpPromptArgument', 'McpResource',
        'McpServerStatus', 'McpToolRef', 'McpToolset', 'MemoryTokenStore', 'OnAuthorize',
        'PendingAuthorizations', 'SamplingHandler', 'SamplingRequest', 'SamplingResult',
        'ServerSpec', 'StdioServer', 'TokenStore', 'connect_mcp', 'exposed_names', 'sanitize_name',
        'tool_result_to_output',
    ],
    'agentkit.mcp.config': [
        'HttpServer', 'LogLevel', 'ServerSpec', 'StdioServer', 'validate_servers',
    ],
    'agentkit.mcp.connect': [
        'connect_mcp',
    ],
    'agentkit.mcp.host': [
        'ApproveSampling', 'ElicitationHandler', 'ElicitationRequest', 'ElicitationResult',
        'McpPrompt', 'McpPromptArgument', 'McpResource', 'SamplingHandler', 'SamplingRequest',
        'SamplingResult',
    ],
    'agentkit.mcp.naming': [
        'MAX_TOOL_NAME_LENGTH', 'exposed_names', 'sanitize_name',
    ],
    'agentkit.mcp.oauth': [
        'AuthorizationResponse', 'McpOAuth', 'OnAuthorize', 'PendingAuthorizations',
    ],
    'agentkit.mcp.results': [
        'content_block_to_parts', 'resource_contents_to_parts', 'tool_result_to_output',
    ],
    'agentkit.mcp.tokens': [
        'FileTokenStore', 'MemoryTokenStore', 'TokenStore',
    ],
    'agentkit.mcp.toolset': [
        'AuthorizeToolCall', 'McpServerStatus', 'McpToolRef', 'McpToolset',
    ],
    'agentkit.messages': [
        'ContentPart', 'FilePart', 'ImagePart', 'Message', 'Prompt', 'ReasoningPart', 'Role',
        'TextPart', 'ToolCallPart', 'ToolOutput', 'ToolResultPart', 'content_from_dict',
        'content_to_dict', 'normalize_prompt', 'text_of',
    ],
    'agentkit.models': [
        'ChatModel', 'EchoModel', 'FinishEvent', 'FinishReason', 'FunctionModel', 'ModelRequest',
        'ModelSettings', 'OutputMode', 'OutputSpec', 'ReasoningDelta', 'ReasoningDone', 'RetryInfo',
        'RetryPolicy', 'ScriptedModel', 'StreamEvent', 'TextDelta', 'ToolCall', 'ToolCallEvent',
        'ToolChoice', 'ToolSpec', 'Turn', 'UsageEvent', 'get_model',
    ],
    'agentkit.models.adapter': [
        'ProviderModel', 'RetryInfo', 'RetryPolicy', 'TranslatedError', 'check_tool_choice',
        'data_url', 'function_tools', 'parse_tool_arguments', 'stream_with_retries',
        'tool_result_text',
    ],
    'agentkit.models.anthropic': [
        'AnthropicModel',
    ],
    'agentkit.models.base': [
        'ChatModel', 'FinishEvent', 'FinishReason', 'ModelRequest', 'ModelSettings', 'OutputMode',
        'OutputSpec', 'ReasoningDelta', 'ReasoningDone', 'ReasoningEffort', 'StreamEvent', 'TextDelta',
        'ToolCallEvent', 'ToolChoice', 'ToolSpec', 'UsageEvent',
    ],
    'agentkit.models.echo': [
        'EchoModel',
    ],
    'agentkit.models.openai': [
        'OpenAIChatModel',
    ],
    'agentkit.models.registry': [
        'get_model',
    ],
    'agentkit.models.scripted': [
        'FunctionModel', 'ScriptedModel', 'ToolCall', 'Turn',
    ],
    'agentkit.observability': [
        'configure', 'recording_content',
    ],
    'agentkit.options': [
        'GenerationOptions',
    ],
    'agentkit.planning': [
        'Plan', 'PlanResult', 'PlanStep', 'PlanningAgent', 'Stage', 'StepResult',
    ],
    'agentkit.pool': [
        'SessionPool',
    ],
    'agentkit.projection': [
        'INTERRUPTED_RESULT', 'Projector', 'RuntimeRenderer', 'build_model_messages',
        'events_from_messages', 'render_runtime_event',
    ],
    'agentkit.redaction': [
        'REDACTED', 'Redaction', 'Redactor', 'redactor_of',
    ],
    'agentkit.results': [
        'GenerateResult', 'RunResult', 'Step', 'ToolCallRecord',
    ],
    'agentkit.session': [
        'Session',
    ],
    'agentkit.skills': [
        'MAX_SKILL_FILE_BYTES', 'SKILL_FILE', 'Skill', 'Skills', 'load_skills',
    ],
    'agentkit.stores': [
        'EventStore', 'FileEventStore', 'FileJobStore', 'InMemoryEventStore', 'InMemoryJobStore',
        'JobStore', 'SCHEMA_VERSION', 'StoredJob', 'StoredSession', 'TurnLease', 'validate_session_id',
    ],
    'agentkit.stores.base': [
        'EventStore', 'JobStore', 'SCHEMA_VERSION', 'StoredJob', 'StoredSession', 'TurnLease',
        'validate_session_id',
    ],
    'agentkit.stores.file': [
        'FileEventStore',
    ],
    'agentkit.stores.jobs': [
        'FileJobStore', 'InMemoryJobStore', 'JobStore', 'StoredJob',
    ],
    'agentkit.stores.memory': [
        'InMemoryEventStore',
    ],
    'agentkit.stores.postgres': [
        'PostgresEventStore', 'PostgresJobStore',
    ],
    'agentkit.stream': [
        'AgentEvent', 'AgentStream', 'GenerationEndEvent', 'GenerationStartEvent',
        'ReasoningDeltaEvent', 'StepEndEvent', 'StepStartEvent', 'TextDeltaEvent',
        'ToolCallRequestedEvent', 'ToolEndEvent', 'ToolStartEvent', 'ToolUpdateEvent',
    ],
    'agentkit.subagents': [
        'SubagentEndEvent', 'SubagentEvent', 'SubagentStartEvent', 'child_session_id',
        'subagent_tool',
    ],
    'agentkit.summarize': [
        'DEFAULT_INSTRUCTIONS', 'summarizing_compactor',
    ],
    'agentkit.tool_search': [
        'SearchableTool', 'ToolSearch', 'search_tools',
    ],
    'agentkit.tools': [
        'DirEntry', 'ExecutionContext', 'FileSystem', 'FunctionTool', 'JobControl', 'JobEvent', 'JobNotFoundError',
        'JobState', 'LocalExecutionContext', 'PermissionRequest', 'Shell', 'ShellResult', 'Tool',
        'ToolContext', 'ToolDecision', 'ToolRegistry', 'TruncatedOutput', 'browser_tools',
        'filesystem_tools', 'format_shell_result', 'http_tools', 'json_path', 'json_tools',
        'shell_tools', 'to_tool_output', 'tool', 'truncate_output',
    ],
    'agentkit.tools.base': [
        'FunctionTool', 'Tool', 'ToolContext', 'ToolDecision', 'ToolRegistry', 'to_tool_output',
    ],
    'agentkit.tools.context': [
        'DirEntry', 'ExecutionContext', 'FileSystem', 'JobControl', 'JobEvent', 'JobListener',
        'JobNotFoundError', 'JobState', 'JobStatus', 'LocalExecutionContext', 'PermissionHandler',
        'PermissionRequest', 'Shell', 'ShellResult',
    ],
    'agentkit.tools.decorator': [
        'tool',
    ],
    'agentkit.tools.filesystem': [
        'filesystem_tools',
    ],
    'agentkit.tools.http': [
        'http_tools',
    ],
    'agentkit.tools.json_tools': [
        'json_path', 'json_tools',
    ],
    'agentkit.tools.runner': [
        'run_tool_call',
    ],
    'agentkit.tools.shell': [
        'format_shell_result', 'shell_tools',
    ],
    'agentkit.transactions': [
        'GenerationTransaction', 'TransactionLedger', 'UncertainExecution', 'claim_digest',
        'reserved_problem',
    ],
    'agentkit.truncate': [
        'DEFAULT_MAX_BYTES', 'DEFAULT_MAX_LINES', 'TruncatedOutput', 'truncate_output',
    ],
    'agentkit.usage': [
        'Usage',
    ],
    'agentkit.view': [
        'ToolResultClearing', 'cap_output', 'cap_tool_outputs', 'clear_tool_results',
    ],
    'agentkit.web': [
        'AsyncSSEIterator', 'KEEP_ALIVE', 'SSEIterator', 'SSE_HEADERS', 'ask_async', 'sse', 'sse_async',
        'sse_record',
    ],
}


def _public_modules() -> list[str]:
    import pkgutil

    return ["agentkit"] + sorted(
        m.name for m in pkgutil.walk_packages(agentkit.__path__, "agentkit.")
        if not any(part.startswith("_") for part in m.name.split("."))
    )


def test_every_public_namespace_matches_its_snapshot():
    """Adding, removing or moving a public name means editing PUBLIC_NAMESPACES in the
    same change (and docs/architecture.md's rule if the rule changes)."""
    import importlib

    actual = {}
    for name in _public_modules():
        module = importlib.import_module(name)
        if hasattr(module, "__all__"):
            actual[name] = sorted(module.__all__)
    assert actual == PUBLIC_NAMESPACES


def test_every_name_in_a_public_all_exists():
    import importlib

    for name, exported in PUBLIC_NAMESPACES.items():
        module = importlib.import_module(name)
        missing = [n for n in exported if not hasattr(module, n)]
        assert missing == [], f"{name}.__all__ names what it does not define: {missing}"


def test_runtime_internals_are_not_in_the_top_level_all():
    internals = {"GenerationScheduler", "Projector", "JobRunner", "truncate_output", "ToolRegistry",
                 "LoopOptions", "run_loop", "bridge_job_events"}
    assert internals & set(agentkit.__all__) == set()
    for name in ("GenerationScheduler", "Projector", "JobRunner", "truncate_output", "ToolRegistry"):
        assert getattr(agentkit, name) is not None  # 0.1.0 imports keep working


def _documented_imports() -> list[tuple[str, str, str]]:
    """(page, module, name) for every ``from agentkit... import name`` and every
    ``agentkit.x.y`` reference in README.md and docs/."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = []
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        text = page.read_text()
        for m in re.finditer(r"from (agentkit[\w.]*) import \(?([\w,\s]+?)\)?\s*(?:#|$|\n\n|\)|\n[^\s])",
                             text, re.M):
            for name in re.split(r"[,\s]+", m.group(2)):
                if name and name != "as":
                    out.append((page.name, m.group(1), name))
        for m in re.finditer(r"`(agentkit(?:\.\w+)+)`", text):
            out.append((page.name, m.group(1), ""))
    return out


def test_every_import_the_docs_show_works():
    import importlib

    found = _documented_imports()
    assert len(found) > 40  # the scan still finds the docs' imports
    broken = []
    for page, module, name in found:
        try:
            if name:
                getattr(importlib.import_module(module), name)
                continue
            try:
                importlib.import_module(module)
            except ImportError:  # agentkit.tools.json_path: a name, not a module
                parent, _, attr = module.rpartition(".")
                getattr(importlib.import_module(parent), attr)
        except (ImportError, AttributeError) as exc:
            broken.append(f"{page}: {module} {name}: {exc}")
    assert broken == []
