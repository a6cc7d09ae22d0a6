"""The public surface: documented, keyword-only, and free of optional imports."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path

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


# portalocker imports redis when it is installed (its RedisLock), and redis 8 imports
# opentelemetry when that is installed: the environment's imports, not agentkit's (the
# celery extra installs redis). The import checks block redis to see agentkit's own.
NO_REDIS = "import sys; sys.modules['redis'] = None\n"


def test_importing_agentkit_imports_no_optional_sdk():
    code = NO_REDIS + (
        "import sys, agentkit, agentkit.models, agentkit.tools, agentkit.stores;"
        "import agentkit.observability;"
        "bad = [m for m in ('openai', 'anthropic', 'google.genai', 'mcp', 'langchain_core', 'requests',"
        " 'opentelemetry')"
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
        'AccessDenied', 'Agent', 'AgentClosedError', 'AgentEvent', 'AgentStream', 'AgentkitError', 'ApprovalDecision',
        'ApprovalError', 'ApprovalPolicy', 'ApprovalRequest', 'AuthenticationError', 'BrowserError',
        'CancelToken', 'CancelledError', 'CompletionValidationError', 'ConfigurationError',
        'ContextOverflowError', 'FileEventStore', 'FunctionModel', 'GenerateResult', 'GuardrailTripped',
        'HookError',
        'Hooks', 'InMemoryEventStore', 'InputError', 'InputRequest', 'JobNotFoundError', 'Limits', 'McpError',
        'MissingDependencyError', 'ModelError', 'OutputValidationError', 'PlanResult',
        'PlanningAgent', 'ProviderError', 'ProviderUnavailableError', 'RateLimitError', 'Retention',
        'RunLimitTimeout', 'RunResult', 'SchemaVersionError', 'ScriptExhaustedError', 'ScriptedModel', 'Session',
        'SessionClosedError', 'SessionError', 'SessionFailedError', 'SessionPool', 'Step',
        'StoreConflictError', 'StoreCorruptionError', 'StoreError', 'StoreLockTimeout',
        'StoreUnavailableError', 'Threshold', 'Tool', 'ToolCache', 'ToolCall', 'ToolCallRecord', 'ToolContext',
        'ToolDecision', 'ToolDefinitionError', 'ToolResultClearing', 'ToolSearch',
        'TransactionError', 'TurnLockLostError', 'Usage', '__version__', 'filesystem_tools',
        'get_model', 'handoff', 'http_tools', 'input_guardrail', 'json_tools', 'load_skills', 'output_guardrail',
        'replay', 'run_agent', 'run_agent_stream',
        'shell_tools', 'subagent_tool', 'summarizing_compactor', 'tool', 'tool_guardrail',
    ],
    'agentkit.adapters.langchain': [
        'Injected', 'LangChainChatModel', 'LangChainHistory', 'events_from_langchain',
        'from_langchain_tool', 'from_langchain_tools', 'messages_from_langchain',
        'messages_to_langchain', 'to_langchain_tool',
    ],
    'agentkit.approvals': [
        'APPROVAL_DECIDED', 'APPROVAL_REMEMBERED', 'APPROVAL_REQUESTED', 'ApprovalMode',
        'ApprovalState', 'Verdict',
    ],
    'agentkit.browser': [
        'BrowserContext', 'ChromiumBrowser', 'PageSnapshot', 'SnapshotFormat', 'browser_tools',
    ],
    'agentkit.celery': ['AgentTasks', 'BrokerUnavailableError'],
    'agentkit.cli': [
        'main',
    ],
    'agentkit.context': [
        'Budget', 'BudgetBreach', 'CONVERSATION_EVENTS', 'Compactor', 'DEFAULT_INSTRUCTIONS',
        'DEFAULT_KEEP_LAST', 'DEFAULT_MAX_BYTES', 'DEFAULT_MAX_LINES', 'INTERRUPTED_RESULT',
        'Projector', 'RuntimeRenderer', 'TruncatedOutput', 'build_model_messages', 'cap_output',
        'cap_tool_outputs', 'check_events', 'check_messages', 'clear_tool_results',
        'compaction_boundary', 'conversation_events_since_reset', 'estimate_tokens',
        'events_from_messages', 'render_runtime_event', 'summary_messages', 'truncate_output',
    ],
    'agentkit.evals': [
        'AgentOutput', 'AnswerMatches', 'EVALUATORS', 'MaxSteps', 'MaxTokens', 'OutputValidates', 'ReplayResult',
        'ReplaySide', 'ReplayTurn', 'ToolCalled', 'ToolCallsMatch', 'ToolMode', 'ToolNotCalled', 'agent_task',
        'dataset_from_sessions', 'replay_task',
    ],
    'agentkit.guardrails': [
        'Guardrail', 'GuardrailContext', 'GuardrailKind',
    ],
    'agentkit.events': [
        'AssistantMessageEvent', 'CompactionEvent', 'ContextReplacedEvent', 'ControlEvent', 'Event',
        'RuntimeEvent', 'ToolResultEvent', 'UserMessageEvent', 'event_from_dict', 'new_id',
    ],
    'agentkit.execution': [
        'DirEntry', 'ExecutionContext', 'FileSystem', 'LocalExecutionContext', 'OutputCallback',
        'PermissionHandler', 'PermissionRequest', 'Shell', 'ShellResult',
    ],
    'agentkit.jobs': [
        'FileJobStore', 'InMemoryJobStore', 'JobControl', 'JobEvent', 'JobListener', 'JobRunner',
        'JobState', 'JobStatus', 'JobStore', 'RunningJobs', 'StoredJob',
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
        'validate_servers',
    ],
    'agentkit.mcp.results': [
        'content_block_to_parts', 'resource_contents_to_parts',
    ],
    'agentkit.messages': [
        'ContentPart', 'FilePart', 'ImagePart', 'Message', 'Prompt', 'ReasoningPart', 'Role',
        'TextPart', 'ToolCallPart', 'ToolOutput', 'ToolResultPart', 'content_from_dict',
        'content_to_dict', 'normalize_prompt', 'text_of',
    ],
    'agentkit.models': [
        'ChatModel', 'EchoModel', 'FinishEvent', 'FinishReason', 'ModelRequest', 'ModelSettings',
        'OutputMode', 'OutputSpec', 'ReasoningDelta', 'ReasoningDone', 'ReasoningEffort',
        'RetryInfo', 'RetryPolicy', 'StreamEvent', 'TextDelta', 'ToolCallEvent', 'ToolChoice',
        'ToolSpec', 'Turn', 'UsageEvent',
    ],
    'agentkit.models.adapter': [
        'ProviderModel', 'TranslatedError', 'check_tool_choice', 'data_url', 'function_tools',
        'parse_tool_arguments', 'stream_with_retries', 'tool_result_text',
    ],
    'agentkit.models.anthropic': [
        'AnthropicModel',
    ],
    'agentkit.models.bedrock': [
        'BedrockModel',
    ],
    'agentkit.models.gemini': [
        'GeminiModel',
    ],
    'agentkit.models.openai': [
        'OpenAIChatModel',
    ],
    'agentkit.models.openai_responses': [
        'OpenAIResponsesModel',
    ],
    'agentkit.observability': [
        'configure', 'recording_content',
    ],
    'agentkit.options': [
        'GenerationKwargs', 'GenerationOptions',
    ],
    'agentkit.planning': [
        'Plan', 'PlanCreatedEvent', 'PlanReplannedEvent', 'PlanStageEvent', 'PlanStep', 'PlanStepEndEvent',
        'PlanStepStartEvent', 'PlanSynthesizedEvent', 'Stage', 'StepResult',
    ],
    'agentkit.session': [
        'REDACTED', 'Redaction', 'Redactor', 'redactor_of',
    ],
    'agentkit.stores': [
        'EventStore', 'SCHEMA_VERSION', 'StoredSession', 'TurnLease', 'validate_session_id',
    ],
    'agentkit.stores.postgres': [
        'PostgresEventStore', 'PostgresJobStore',
    ],
    'agentkit.streaming': [
        'ApprovalDecidedEvent', 'ApprovalRequestedEvent', 'BudgetExceededEvent', 'CompactedEvent',
        'GenerationEndEvent', 'GenerationStartEvent', 'GuardrailTrippedEvent', 'HandoffEvent', 'MessageEndEvent',
        'MessageStartEvent', 'ReasoningDeltaEvent', 'RetryEvent', 'StepEndEvent', 'StepStartEvent',
        'StepUsageEvent', 'TextDeltaEvent', 'ToolCallRequestedEvent', 'ToolEndEvent', 'ToolStartEvent',
        'ToolUpdateEvent',
    ],
    'agentkit.tools': [
        'FunctionTool', 'Handoff', 'MAX_SKILL_FILE_BYTES', 'SKILL_FILE', 'SearchableTool', 'Skill', 'Skills',
        'SubagentEndEvent', 'SubagentEvent', 'SubagentStartEvent', 'ToolRegistry',
        'child_session_id', 'format_shell_result', 'json_path', 'search_tools', 'to_tool_output',
    ],
    'agentkit.tools.runner': [
        'run_tool_call',
    ],
    'agentkit.transactions': [
        'GenerationTransaction', 'TransactionLedger', 'UncertainExecution', 'claim_digest',
        'reserved_problem',
    ],
    'agentkit.web': [
        'AsyncSSEIterator', 'KEEP_ALIVE', 'SSEIterator', 'SSE_HEADERS', 'ask_async', 'sse',
        'sse_async', 'sse_record',
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


def test_the_0_1_0_aliases_and_shim_modules_are_gone():
    """0.x: each public name has one home (CHANGELOG lists the old paths); the top level no
    longer hands out names moved elsewhere, and the re-export-only modules are deleted."""
    import importlib

    import pytest

    for name in ("GenerationScheduler", "JobRunner", "Projector", "ToolRegistry", "TruncatedOutput",
                 "truncate_output", "ChatModel", "UserMessageEvent", "TextPart", "EventStore", "JobStore"):
        with pytest.raises(AttributeError):
            getattr(agentkit, name)
    # (by file: an editable install of another checkout could still resolve the old names)
    package = Path(agentkit.__file__).parent
    for module in ("jobs.py", "job_store.py", "tools/context.py", "pool.py", "approval.py", "stream.py",
                   "projection.py", "subagents.py", "session.py", "_loop.py"):
        assert not (package / module).exists(), module
    assert not hasattr(importlib.import_module("agentkit.tools"), "browser_tools")  # its home: agentkit.browser


def test_the_lazy_names_load_their_dependency_on_first_use_only():
    code = (
        "import sys, agentkit, agentkit.tools;"
        "assert 'requests' not in sys.modules;"
        "from agentkit import http_tools; from agentkit.tools.http import http_tools as home;"
        "assert http_tools is home and 'requests' in sys.modules;"
        "from agentkit.tools import SubagentEvent; from agentkit.tools._subagents import SubagentEvent as h;"
        "assert SubagentEvent is h"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


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


def test_no_public_signature_takes_a_private_parameter():
    """Issue #28: every public callable (each name in a public ``__all__``, and the public
    methods and constructors of public classes) takes only public parameters; what the
    runtime passes privately goes through private functions and methods."""
    import importlib
    import pkgutil

    modules = ["agentkit"] + [m.name for m in pkgutil.walk_packages(agentkit.__path__, "agentkit.")
                              if not any(part.startswith("_") for part in m.name.split("."))]
    offenders = []
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # an optional extra that is not installed here
            continue
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name, None)
            callables = [(name, obj)]
            if inspect.isclass(obj):
                callables = [(f"{name}.__init__", obj)] + [
                    (f"{name}.{attr}", value) for attr, value in vars(obj).items()
                    if not attr.startswith("_") and callable(value)]
            for qualname, fn in callables:
                try:
                    params = inspect.signature(fn).parameters
                except (TypeError, ValueError):
                    continue
                private = [p for p in params if p.startswith("_")]
                if private:
                    offenders.append(f"{module_name}.{qualname}: {private}")
    assert offenders == []
