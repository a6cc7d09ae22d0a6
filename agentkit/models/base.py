"""The ChatModel port: what every model adapter implements.

An adapter has one required method, ``stream(request)``, which yields stream events.
All options travel in one :class:`ModelRequest`, so adding an option never changes an
adapter's signature.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Union, runtime_checkable

from ..cancel import CancelToken
from ..errors import ConfigurationError
from ..messages import Message, ReasoningPart
from ..usage import Usage

FinishReason = Literal["stop", "tool-calls", "length", "content-filter", "error", "other"]
ReasoningEffort = Literal["low", "medium", "high"]
"""How hard a reasoning model thinks before it answers (``ModelSettings.reasoning_effort``)."""
_EFFORTS = ("low", "medium", "high")
ToolChoice = Union[Literal["auto", "none", "required"], str]
"""``auto``, ``none``, ``required``, or the name of one tool the model must call."""
OutputMode = Literal["json-schema", "tool"]
"""How a model gives a structured output (``output_type=``): ``json-schema`` (the
provider constrains the final text to the schema, e.g. OpenAI ``response_format``) or
``tool`` (the output is the input of a tool the model calls to finish). A ChatModel
declares it as its ``output_mode`` attribute; a model without one uses ``tool``."""


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """What a model is told about a tool."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class OutputSpec:
    """The structured output a request asks for (``output_type=``), in JSON Schema.

    In ``tool`` mode the request's ``tools`` also hold a tool named ``name`` with this
    schema as its input: a model that knows nothing of outputs just sees one more tool,
    and an adapter that can force a tool call (Anthropic) forces this one. In
    ``json-schema`` mode the adapter asks the provider to constrain the final text."""

    name: str
    """The output's name (the tool's name in ``tool`` mode); ``[A-Za-z0-9_-]{1,64}``."""
    schema: Mapping[str, Any]
    """A JSON Schema of ``"type": "object"`` (other types are wrapped in one)."""
    description: str = ""
    mode: OutputMode = "tool"
    strict: bool = False
    """True when the schema follows the strict-mode rules (every object closed with
    ``additionalProperties: false`` and all its properties required)."""


@dataclass(frozen=True, kw_only=True)
class ModelSettings:
    """Sampling settings; ``None`` leaves the provider's default."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    reasoning_budget: int | None = None
    """Token budget for extended thinking (Anthropic's ``thinking.budget_tokens``). An
    adapter whose API has no such budget (OpenAI Chat Completions) raises
    :class:`~agentkit.errors.ConfigurationError` rather than dropping it."""
    reasoning_effort: ReasoningEffort | None = None
    """``"low"``, ``"medium"`` or ``"high"``: how much a reasoning model thinks (OpenAI's
    ``reasoning_effort``, Anthropic's ``output_config.effort``)."""

    def __post_init__(self) -> None:
        if self.reasoning_effort is not None and self.reasoning_effort not in _EFFORTS:
            raise ConfigurationError(
                f"reasoning_effort must be 'low', 'medium' or 'high' (or None for the model's "
                f"default), not {self.reasoning_effort!r}"
            )
        budget = self.reasoning_budget
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
            raise ConfigurationError(f"reasoning_budget must be a positive int (tokens) or None, not {budget!r}")


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """Everything one inference needs."""

    messages: tuple[Message, ...]
    """The conversation, without the system prompt."""
    system: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = "auto"
    settings: ModelSettings = field(default_factory=ModelSettings)
    provider_options: Mapping[str, Any] = field(default_factory=dict)
    """Passed through to the provider call; explicit options win over agentkit defaults."""
    cancel: CancelToken = field(default_factory=CancelToken)
    session_id: str | None = None
    """The session this request belongs to (used e.g. as OpenAI ``prompt_cache_key``)."""
    cache: bool = True
    """Whether to use provider prompt caching."""
    output: OutputSpec | None = None
    """The structured output the generation must end with (``output_type=``), or None."""
    on_retry: Callable[[Any], Any] | None = None
    """Called with a :class:`~agentkit.models.RetryInfo` before each wait between attempts
    of this request, besides the model's own ``on_retry`` (a generation with an event
    path sets it: its ``retry`` events)."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of assistant text."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of reasoning text, forwarded as it arrives."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDone:
    """A complete reasoning block (closes the deltas before it), with any opaque
    signature or redacted data that must be sent back unchanged."""

    part: ReasoningPart


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEvent:
    """A complete tool call. ``input_error`` is set when the model's arguments were not
    valid JSON (``input`` then holds the raw text)."""

    tool_call_id: str
    tool_name: str
    input: Any
    input_error: str | None = None


@dataclass(frozen=True, slots=True)
class UsageEvent:
    """Token usage of this call (may come more than once; they are summed)."""

    usage: Usage


@dataclass(frozen=True, slots=True)
class FinishEvent:
    """The model finished: ``reason`` in agentkit's vocabulary, ``raw`` as the API said."""

    reason: FinishReason
    raw: str | None = None


StreamEvent = Union[TextDelta, ReasoningDelta, ReasoningDone, ToolCallEvent, UsageEvent, FinishEvent]


@runtime_checkable
class ChatModel(Protocol):
    """A model that streams a reply to a :class:`ModelRequest`.

    Adapters translate provider errors into :mod:`agentkit.errors` types, in particular
    :class:`~agentkit.errors.ContextOverflowError` for context-window errors. An adapter
    may declare ``output_mode`` (:data:`OutputMode`), how it gives structured output;
    the default is ``tool``.
    """

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """Yield the reply as stream events, ending with a :class:`FinishEvent`."""
        ...


def tool_choice_problem(choice: ToolChoice, names: Sequence[str]) -> str | None:
    """Why ``tool_choice`` cannot be used with tools ``names``, or None when it can."""
    if choice == "required" and not names:
        return "tool_choice='required' needs at least one tool in tools="
    if choice in ("auto", "none", "required") or choice in names:
        return None
    return (
        f"tool_choice {choice!r} is neither 'auto', 'none', 'required' nor the name of one "
        f"of the tools ({', '.join(names) or 'none given'})"
    )
