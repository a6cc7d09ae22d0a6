"""The per-generation options: one definition for ``run_agent``, ``Session`` and ``generate``.

Every option is a field of :class:`GenerationOptions`. ``Session(**options)`` sets a
session's defaults, ``generate(**options)`` (and ``stream``) overrides them for one call,
and ``run_agent(**options)`` passes them through. Adding an option is one field here
(plus its use in the loop and its test): every front door accepts it at once.

How an override meets a default is the field's ``merge`` rule: ``replace`` (the call's
value wins), ``compose`` (hooks: the session's first, then the call's) or ``update``
(dicts: the call's keys win).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal

from typing_extensions import TypedDict

from .approvals._policy import ApprovalDecision, ApprovalPolicy, ApprovalRequest
from .context._budget import Limits
from .context._compaction import Threshold
from .errors import ConfigurationError
from .guardrails import Guardrail, Guardrails
from .hooks import HookChain, Hooks
from .loop._generation_tools import check_generation_tools
from .loop._output import OUTPUT_TOOL, output_plan
from .models.base import ChatModel, ModelSettings, ToolChoice, tool_choice_problem
from .session._redaction import Redaction, redactor_of
from .streaming._events import Emit
from .streaming._sinks import callback_sink, fan_out
from .tools._handoffs import Handoff, check_handoff_tools, handoffs_of
from .tools.base import ToolRegistry

if TYPE_CHECKING:
    from .agent import Agent
    from .cancel import CancelToken
    from .context._compaction import Compactor
    from .context._view import ToolResultClearing
    from .events import Event
    from .messages import Message, ToolCallPart
    from .results import RunResult, ToolCallRecord
    from .tools._search import ToolSearch
    from .tools._skills import Skills

__all__ = ["GenerationKwargs", "GenerationOptions"]

ToolExecution = Literal["parallel", "sequential"]


def _opt(default: Any = None, *, merge: str = "replace", factory: Callable[[], Any] | None = None) -> Any:
    meta = {"merge": merge}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True, kw_only=True)
class GenerationOptions:
    """Options of one generation. Each is a keyword argument of ``run_agent``,
    ``Session`` (a default for every generation) and ``generate``/``stream`` (for one)."""

    system: str | None = _opt()
    """The system prompt."""
    max_steps: int = _opt(20)
    """Model calls allowed in one generation; reaching it ends with ``finish_reason="max-steps"``."""
    tool_execution: ToolExecution = _opt("parallel")
    """``parallel`` (one step's calls on worker threads) or ``sequential``."""
    tool_choice: ToolChoice = _opt("auto")
    """``auto``, ``none``, ``required`` or a tool name."""
    settings: ModelSettings = _opt(factory=ModelSettings)
    """Temperature, max tokens, reasoning... (:class:`~agentkit.ModelSettings`)."""
    provider_options: Mapping[str, Any] = _opt(merge="update", factory=dict)
    """Passed through to the provider's API."""
    cache: bool = _opt(True)
    """Ask the provider to cache the prompt prefix where it supports it."""
    hooks: HookChain = _opt(merge="compose", factory=HookChain)
    """:class:`~agentkit.Hooks`: one, or a list composed in order."""
    on_token: Callable[[str], Any] | None = _opt()
    """Called with each piece of assistant text."""
    on_reasoning: Callable[[str], Any] | None = _opt()
    """Called with each piece of reasoning text."""
    on_tool_call_start: Callable[[ToolCallPart], Any] | None = _opt()
    """Called with each :class:`~agentkit.ToolCallPart` before it runs (``tool_call_id``,
    ``tool_name``, ``input``)."""
    on_tool_call_update: Callable[[str, Any], Any] | None = _opt()
    """Called with ``(tool_call_id, update)`` when a tool reports progress."""
    on_tool_call_finish: Callable[[ToolCallRecord], Any] | None = _opt()
    """Called with each tool call's :class:`~agentkit.ToolCallRecord` once its result is
    committed (``tool_call_id``, ``tool_name``, ``input``, ``output``: named as in
    ``on_tool_call_start``)."""
    validate_completion: Callable[[RunResult], str | None] | None = _opt()
    """Return feedback (str) to make the model try again, or None to accept."""
    max_validation_retries: int = _opt(1)
    """How often the model may be sent back with what was wrong: a structured output
    that did not validate, or ``validate_completion`` feedback (one count for both)."""
    output_type: Any = _opt()
    """The type of the generation's structured output (a pydantic model, a dataclass, a
    TypedDict, ``int``, ``list[str]``...): the result's ``output`` is a validated
    instance. See docs/structured-output.md."""
    on_context_overflow: Callable[[list[Message], CancelToken], Sequence[Message]] | None = _opt()
    """Return a shorter history when the provider says the context is too long."""
    max_context_overflow_retries: int = _opt(3)
    """How often ``on_context_overflow`` (or the compactor) may be used in one generation."""
    limits: Limits | None = _opt()
    """:class:`~agentkit.Limits`: tokens, model calls and tool calls one generation may spend."""
    compactor: Compactor | None = _opt()
    """``callable(messages, *, reason, cancel) -> str | list[Message]``: summarises what a
    compaction covers. With one, a context overflow compacts and retries."""
    auto_compact: Threshold | None = _opt()
    """:class:`~agentkit.Threshold`: compact before a request whose estimated input passes it."""
    context_builder: Callable[[Sequence[Event]], list[Message]] | None = _opt()
    """``callable(events) -> list[Message]``: replaces the default projection for each request."""
    clear_tool_results: ToolResultClearing | None = _opt()
    """:class:`~agentkit.ToolResultClearing`: older large tool results become placeholders."""
    max_tool_output_chars: int | None = _opt()
    """Cut every tool result the model sees to this many characters (the event keeps it all)."""
    approval: ApprovalPolicy | None = _opt()
    """:class:`~agentkit.ApprovalPolicy`: which tool calls run, are denied, or wait for an answer."""
    approver: Callable[[ApprovalRequest], bool | ApprovalDecision] | None = _opt()
    """Answers approval requests in process; without one they wait in the log
    (``finish_reason="approval-required"``)."""
    redact: Redaction | None = _opt()
    """Regexes and/or a callable: secrets in tool inputs, tool outputs and runtime event
    data become ``[redacted]`` before they are committed."""
    skills: Skills | None = _opt()
    """:class:`~agentkit.skills.Skills` (from :func:`~agentkit.load_skills`): their index in
    the system prompt, and the ``load_skill`` and ``read_skill_file`` tools."""
    tool_search: ToolSearch | None = _opt()
    """:class:`~agentkit.ToolSearch`: above its threshold the model sees a few tools plus
    ``find_tools``, which activates the ones it needs."""
    guardrails: Guardrails = _opt(merge="compose", factory=Guardrails)
    """Input, output and tool guardrails (:mod:`agentkit.guardrails`): one, or a list; a
    tripped one raises :class:`~agentkit.GuardrailTripped`."""
    name: str | None = _opt()
    """The agent's name: in handoff events, and in the handoff tool another agent offers
    for it (``transfer_to_<name>``)."""
    handoffs: tuple[Handoff, ...] = _opt(factory=tuple)
    """Agents (or :func:`~agentkit.handoff` results) the model may hand the conversation
    over to, each offered as a tool; the target answers from then on. See docs/handoffs.md."""

    def merged(self, overrides: Mapping[str, Any]) -> GenerationOptions:
        """These options with ``overrides`` (keyword arguments of one call) applied by each
        field's merge rule. An unknown name is a :class:`ConfigurationError`."""
        if not overrides:
            return self
        changes: dict[str, Any] = {}
        for name, value in overrides.items():
            rule = _RULES.get(name)
            if rule is None:
                raise _unknown(name)
            if rule == "compose":  # hooks, guardrails: a chain type with of() and +
                current = getattr(self, name)
                changes[name] = current + type(current).of(value)
            elif value is None and name in _NONE_KEEPS:
                continue  # e.g. max_steps=None means "the session's value"
            elif name == "handoffs":
                changes[name] = handoffs_of(value)  # agents become Handoffs, tool names derived
            elif rule == "update":
                if not isinstance(value, Mapping):
                    raise ConfigurationError(f"{name} must be a dict, not {type(value).__name__}")
                changes[name] = {**getattr(self, name), **value}
            else:
                changes[name] = value
        out = replace(self, **changes)
        out.check()
        return out

    @classmethod
    def build(cls, options: Mapping[str, Any]) -> GenerationOptions:
        """Options from keyword arguments (defaults for the rest), checked."""
        return cls().merged(options) if options else cls()

    def check(self) -> None:
        """Raise ConfigurationError for invalid values, before any side effect."""
        if not isinstance(self.max_steps, int) or isinstance(self.max_steps, bool) or self.max_steps < 1:
            raise ConfigurationError(f"max_steps must be a positive int, got {self.max_steps!r}")
        if self.tool_execution not in ("parallel", "sequential"):
            raise ConfigurationError(
                f"tool_execution must be 'parallel' or 'sequential', got {self.tool_execution!r}"
            )
        if self.system is not None and not isinstance(self.system, str):
            raise ConfigurationError(f"system must be a str or None, not {type(self.system).__name__}")
        if not isinstance(self.settings, ModelSettings):
            raise ConfigurationError(f"settings must be a ModelSettings, not {type(self.settings).__name__}")
        if not isinstance(self.provider_options, Mapping):
            raise ConfigurationError(
                f"provider_options must be a dict, not {type(self.provider_options).__name__}"
            )
        for name in _CALLBACKS:
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise ConfigurationError(f"{name} must be a callable or None, not {type(value).__name__}")
        if self.approval is not None and not isinstance(self.approval, ApprovalPolicy):
            raise ConfigurationError(
                f"approval must be an ApprovalPolicy (e.g. ApprovalPolicy(mode='ask-writes')) or None, "
                f"not {type(self.approval).__name__}"
            )
        if self.approver is not None and not callable(self.approver):
            raise ConfigurationError(
                f"approver must be a callable (request) -> bool | ApprovalDecision, not {type(self.approver).__name__}"
            )
        redactor_of(self.redact)
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            raise ConfigurationError(f"name must be a non-empty str or None, got {self.name!r}")
        _check_kinds(self)
        if self.output_type is not None:
            from .loop._output import plan_for

            plan_for(self.output_type)  # compiled once per type (cached): a bad type fails here
        self._check_context()
        for name in ("max_validation_retries", "max_context_overflow_retries"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigurationError(f"{name} must be an int >= 0, got {value!r}")

    def _check_context(self) -> None:
        from .context._view import ToolResultClearing

        for name, kind in (("limits", Limits), ("auto_compact", Threshold), ("clear_tool_results", ToolResultClearing)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise ConfigurationError(f"{name} must be a {kind.__name__} or None, not {type(value).__name__}")
        for name in ("compactor", "context_builder"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise ConfigurationError(f"{name} must be a callable or None, not {type(value).__name__}")
        chars = self.max_tool_output_chars
        if chars is not None and (not isinstance(chars, int) or isinstance(chars, bool) or chars < 1):
            raise ConfigurationError(f"max_tool_output_chars must be an int >= 1 or None, got {chars!r}")



class GenerationKwargs(TypedDict, total=False):
    """The generation options as keyword arguments, for type checkers: every front door
    (``run_agent``, ``Agent``, ``Session``, ``generate``/``ask``/``stream``...) takes
    ``**options: Unpack[GenerationKwargs]``, so a misspelled or mistyped option is a type
    error. One key per :class:`GenerationOptions` field, annotated as the field is (what
    a caller may pass: ``hooks`` takes one Hooks or a list), except ``output_type``:
    each front door takes it as its own parameter, since it decides the result's type.
    ``tests/test_options.py`` holds the two definitions together."""

    system: str | None
    max_steps: int | None
    tool_execution: ToolExecution | None
    tool_choice: ToolChoice | None
    settings: ModelSettings | None
    provider_options: Mapping[str, Any]
    cache: bool | None
    hooks: Hooks | Sequence[Hooks] | None
    on_token: Callable[[str], Any] | None
    on_reasoning: Callable[[str], Any] | None
    on_tool_call_start: Callable[[ToolCallPart], Any] | None
    on_tool_call_update: Callable[[str, Any], Any] | None
    on_tool_call_finish: Callable[[ToolCallRecord], Any] | None
    validate_completion: Callable[[RunResult], str | None] | None
    max_validation_retries: int | None
    on_context_overflow: Callable[[list[Message], CancelToken], Sequence[Message]] | None
    max_context_overflow_retries: int | None
    limits: Limits | None
    compactor: Compactor | None
    auto_compact: Threshold | None
    context_builder: Callable[[Sequence[Event]], list[Message]] | None
    clear_tool_results: ToolResultClearing | None
    max_tool_output_chars: int | None
    approval: ApprovalPolicy | None
    approver: Callable[[ApprovalRequest], bool | ApprovalDecision] | None
    redact: Redaction | None
    skills: Skills | None
    tool_search: ToolSearch | None
    guardrails: Guardrail | Sequence[Guardrail] | None
    name: str | None
    handoffs: Sequence[Agent[Any, Any] | Handoff] | None


def _check_kinds(options: GenerationOptions) -> None:
    """``skills`` and ``tool_search`` hold the right kinds of object."""
    from .tools._search import ToolSearch
    from .tools._skills import Skills

    for name, kind, hint in (("skills", Skills, "load_skills(directory)"), ("tool_search", ToolSearch, "ToolSearch()")):
        value = getattr(options, name)
        if value is not None and not isinstance(value, kind):
            raise ConfigurationError(
                f"{name} must be a {kind.__name__} (from {hint}) or None, not {type(value).__name__}"
            )


_RULES: dict[str, str] = {f.name: f.metadata["merge"] for f in fields(GenerationOptions)}
_CALLBACKS = tuple(
    f.name for f in fields(GenerationOptions) if f.name.startswith("on_") or f.name == "validate_completion"
)
# options whose None means "not given" (their meaningful values are never None)
_NONE_KEEPS = frozenset(
    {"max_steps", "tool_execution", "tool_choice", "settings", "cache", "max_validation_retries",
     "max_context_overflow_retries"}
)


def option_names() -> tuple[str, ...]:
    """The names of every per-generation option."""
    return tuple(_RULES)


def _unknown(name: str) -> ConfigurationError:
    import difflib

    close = difflib.get_close_matches(name, _RULES, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return ConfigurationError(
        f"unknown option {name!r}.{hint} Generation options are: {', '.join(sorted(_RULES))}"
    )



class _NotGiven:
    """The default of a front door's ``output_type`` override: "keep the defaults'"
    (None is a value there: no structured output)."""

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN: Any = _NotGiven()


def with_output_type(options: Mapping[str, Any], output_type: object) -> dict[str, Any]:
    """``options`` (a front door's keyword arguments) plus ``output_type`` when it was given."""
    given = dict(options)
    if output_type is not NOT_GIVEN:
        given["output_type"] = output_type
    return given


def check_deps_type(deps_type: Any) -> None:
    """Raise ConfigurationError unless ``deps_type`` is None, a class or a generic alias."""
    if deps_type is not None and not isinstance(deps_type, type) and not hasattr(deps_type, "__origin__"):
        raise ConfigurationError(f"deps_type must be a type (e.g. a dataclass), not {deps_type!r}")


def check_deps(deps: Any, deps_type: Any) -> None:
    """Raise ConfigurationError when ``deps`` is not of ``deps_type`` (when that is a class
    ``isinstance`` can check; other annotations are not checked)."""
    if deps_type is None:
        return
    check_deps_type(deps_type)
    name = getattr(deps_type, "__name__", repr(deps_type))
    if deps is None:
        raise ConfigurationError(f"deps_type is {name}, but no deps were given: pass deps= (a {name})")
    try:
        ok = isinstance(deps, deps_type)
    except TypeError:  # a generic alias, a non-runtime Protocol...: not checkable
        return
    if not ok:
        raise ConfigurationError(f"deps must be a {name} (deps_type), not {type(deps).__name__}")


@dataclass(frozen=True, kw_only=True)
class LoopOptions(GenerationOptions):
    """A generation's options plus what the session supplies: the model, the tools, the
    execution context and where agent events go."""

    model: ChatModel
    tools: ToolRegistry
    execution_context: Any = None
    emit: Emit | None = None
    """Where agent events go besides the callbacks (an AgentStream's buffer)."""
    deps: Any = None
    """This generation's dependencies, handed to tools and hooks as ``ToolContext.deps``."""

    @classmethod
    def of(cls, options: GenerationOptions, *, model: ChatModel, tools: ToolRegistry,
           execution_context: Any = None, emit: Emit | None = None, deps: Any = None) -> LoopOptions:
        """``options`` with the session's parts."""
        values = {name: getattr(options, name) for name in _RULES}
        return cls(**values, model=model, tools=tools, execution_context=execution_context, emit=emit, deps=deps)

    def event_sink(self) -> Emit | None:
        """The one event path: the callbacks and ``emit`` fed by the same events."""
        return fan_out(
            callback_sink(
                on_token=self.on_token,
                on_reasoning=self.on_reasoning,
                on_tool_call_start=self.on_tool_call_start,
                on_tool_call_update=self.on_tool_call_update,
                on_tool_call_finish=self.on_tool_call_finish,
            ),
            self.emit,
        )

    def check(self) -> None:
        """Raise ConfigurationError for invalid values, before any side effect."""
        if not hasattr(self.model, "stream"):
            raise ConfigurationError(
                f"model must be a ChatModel (with a stream(request) method) or a spec "
                f"string like 'openai:gpt-4.1-mini', not {type(self.model).__name__}"
            )
        super().check()
        names = tuple(self.tools)
        if self.skills is not None or self.tool_search is not None:
            names += check_generation_tools(self, self.tools)
        if self.handoffs:
            names += check_handoff_tools(self.handoffs, names, self.output_type)
        problem = tool_choice_problem(self.tool_choice, names)
        if problem is not None:
            raise ConfigurationError(problem)
        if self.output_type is not None and OUTPUT_TOOL in self.tools and output_plan(self).spec.mode == "tool":
            raise ConfigurationError(
                f"a tool is named {OUTPUT_TOOL!r}, the name of the tool a model calls to give its "
                f"output_type answer; rename the tool"
            )

