"""The Tool port: a name, a description, a JSON Schema for the input, and a callable; the
context a running tool sees, the hook decision, and what a tool function's return value
becomes (private: import these from :mod:`agentkit.tools.base` or :mod:`agentkit.tools`)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, ParamSpec, Protocol, TypeVar, cast, runtime_checkable

import jsonschema
import typing_extensions
from jsonschema.exceptions import SchemaError

from ..cancel import CancelToken
from ..errors import ConfigurationError, ToolDefinitionError
from ..messages import FilePart, ImagePart, TextPart, ToolCallPart, ToolOutput
from ..models.base import ToolSpec
from ..usage import Usage
from ._fastschema import compile_simple

__all__ = ["FunctionTool", "Reconcile", "ResultCache", "Tool", "ToolContext", "ToolDecision", "to_tool_output"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


DepsT = typing_extensions.TypeVar("DepsT", default=Any, covariant=True)
"""The type of ``ToolContext.deps``: the agent's ``deps_type`` (``Any`` for a bare ``ToolContext``)."""


@dataclass(frozen=True, kw_only=True)
class ToolContext(Generic[DepsT]):
    """What a running tool may know about its call. A tool function receives it by
    declaring a parameter annotated ``ToolContext`` (or ``ToolContext[Deps]``, so a type
    checker knows ``ctx.deps`` is a ``Deps``); it is never part of the schema."""

    tool_call_id: str
    tool_name: str
    cancel: CancelToken
    session_id: str | None = None
    execution_context: Any = None
    """The session's execution context, when one was configured."""
    idempotency_key: str | None = None
    """The id of this call's execution intent: unique per call, stable across a crash and
    the host's reconciliation. Pass it on (an HTTP ``Idempotency-Key``, a unique key in a
    database) to make the call's effect happen at most once. None outside the loop."""
    model: Any = None
    """The ChatModel of the generation making this call (None outside the loop): a tool
    that needs a completion on the caller's behalf (MCP sampling) asks it."""
    store: Any = None
    """The session's :class:`~agentkit.EventStore` when the session is durable (None
    otherwise): a tool that runs a child session (``subagent_tool``) stores it there."""
    deps: DepsT = cast("DepsT", None)
    """The generation's dependencies (``deps=`` of ``Agent.run``, ``generate``, ``ask``...):
    a database handle, the current user, an HTTP client... None when none were given."""
    # the runtime's callbacks: not constructor arguments (a tool author never passes them);
    # the loop attaches them with bind_runtime()
    _progress: Callable[[Any], None] | None = field(default=None, init=False, repr=False, compare=False)
    _emit: Callable[[Any], None] | None = field(default=None, init=False, repr=False, compare=False)
    _usage: Callable[[Usage], bool] | None = field(default=None, init=False, repr=False, compare=False)
    _journal: Any = field(default=None, init=False, repr=False, compare=False)

    def _bind_runtime(self, *, progress: Callable[[Any], None] | None = None,
                      emit: Callable[[Any], None] | None = None,
                      usage: Callable[[Usage], bool] | None = None,
                      journal: Any = None) -> ToolContext[DepsT]:
        """This context with the runtime's progress, event and usage callbacks and the
        call's journal (steps, human input) (private: the loop and the tests of what a
        tool reports use it)."""
        object.__setattr__(self, "_progress", progress)
        object.__setattr__(self, "_emit", emit)
        object.__setattr__(self, "_usage", usage)
        object.__setattr__(self, "_journal", journal)
        return self

    def _with_cancel(self, cancel: CancelToken) -> ToolContext[DepsT]:
        """A copy with ``cancel`` and the same runtime callbacks."""
        return replace(self, cancel=cancel)._bind_runtime(progress=self._progress, emit=self._emit,
                                                          usage=self._usage, journal=self._journal)

    def step(self, name: str, fn: Callable[[], _R]) -> _R:
        """Run ``fn()`` once for this call and record its JSON result in the session
        before the tool goes on; when the same call runs again (a reconcile probe found
        it did not finish, or a person answered :meth:`ask_human`), a finished step
        returns its recorded result without running. ``name`` is unique within the
        call. Returns the result as recorded (plain JSON: tuples become lists). Outside
        a generation ``fn()`` just runs."""
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"ctx.step() needs a non-empty str name, not {name!r}")
        if not callable(fn):
            raise ConfigurationError(f"ctx.step({name!r}, fn): fn must be callable, not {type(fn).__name__}")
        if self._journal is None:
            return fn()
        return cast(_R, self._journal.step(name, fn))

    def ask_human(self, question: str, *, schema: Mapping[str, Any] | None = None,
                  timeout: float | None = None) -> Any:
        """Ask a person and return the answer. The first time, this records an input
        request (:meth:`agentkit.Session.pending_inputs`) and ends the generation with
        ``finish_reason="input-required"``; once :meth:`agentkit.Session.answer_input`
        answered it (from any process), the next ``generate()`` runs the call again from
        its start, its finished :meth:`step` calls return their recorded results, and
        this returns the answer as given. ``schema`` (JSON Schema) is what an answer must
        match; ``timeout`` (seconds) is how long the request stays open: unanswered by
        then, the call gets an error result the model reads."""
        if self._journal is None:
            raise ConfigurationError(
                "ctx.ask_human() works in a tool a generation runs (Session.generate, Agent.run): "
                "the question is recorded in the session and answered with Session.answer_input"
            )
        return self._journal.ask_human(question, schema, timeout)

    def report_progress(self, update: Any) -> None:
        """Send a progress update to ``on_tool_call_update`` listeners."""
        if self._progress is not None:
            self._progress(update)

    @property
    def streaming(self) -> bool:
        """True when someone consumes the generation's agent events (an
        :class:`~agentkit.AgentStream` or a callback): only then is :meth:`emit` worth
        calling."""
        return self._emit is not None

    def emit(self, event: Any) -> None:
        """Send an :class:`~agentkit.AgentEvent` to the generation's stream and
        callbacks, between its own events (``subagent_tool`` forwards its child's
        events this way). A no-op when nobody consumes them."""
        if self._emit is not None:
            self._emit(event)

    def report_usage(self, usage: Usage) -> bool:
        """Add ``usage`` (tokens spent on this call's behalf, e.g. by a child agent) to
        the generation's: it is part of the result's ``usage`` and counts against its
        ``limits``. Returns False once a token limit of the generation is reached (stop
        spending), True otherwise (and always outside the loop)."""
        if not isinstance(usage, Usage):
            raise ConfigurationError(f"report_usage takes a Usage, not {type(usage).__name__}")
        negative = [name for name, value in usage.to_dict().items() if value < 0]
        if negative:
            raise ConfigurationError(f"report_usage takes token counts >= 0; {', '.join(negative)} is negative")
        return True if self._usage is None else self._usage(usage)


@dataclass(frozen=True, kw_only=True)
class ToolDecision:
    """What a ``before_tool_call`` hook decided about one tool call.

    Build it with :meth:`allow`, :meth:`block`, :meth:`rewrite` or :meth:`respond`.
    """

    action: Literal["allow", "block", "rewrite", "respond"]
    reason: str | None = None
    """Why the call was blocked (the model reads it)."""
    input: Any = None
    """The replacement input of a rewrite."""
    output: ToolOutput | None = None
    """The result of a respond."""

    @classmethod
    def allow(cls) -> ToolDecision:
        """Run the call as the model wrote it."""
        return cls(action="allow")

    @classmethod
    def block(cls, reason: str) -> ToolDecision:
        """Do not run the tool; the model reads an error result with ``reason``."""
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigurationError("ToolDecision.block needs a non-empty reason the model can read")
        return cls(action="block", reason=reason)

    @classmethod
    def rewrite(cls, input: Any) -> ToolDecision:
        """Run the tool with ``input`` instead (validated against the schema again)."""
        return cls(action="rewrite", input=input)

    @classmethod
    def respond(cls, output: Any) -> ToolDecision:
        """Do not run the tool; use ``output`` (anything a tool may return) as its result."""
        return cls(action="respond", output=to_tool_output(output))


@runtime_checkable
class ResultCache(Protocol):
    """What ``Tool.cache`` holds (:class:`~agentkit.ToolCache` is the one agentkit
    has): the tool runner hands it a call that passed its schema, its gates and hooks,
    and it answers from the cache or runs ``compute``."""

    def through(self, tool_name: str, data: dict[str, Any], ctx: ToolContext,
                compute: Callable[[], ToolOutput]) -> tuple[ToolOutput, dict[str, Any] | None]:
        """The call's output and, when it came from the cache, the marker its result
        event carries (``{"hit": True, "key": ..., "stored_at": ...}``); else None."""
        ...


Reconcile = Callable[[dict[str, Any], ToolContext], Literal["executed", "not-executed"] | None]
"""A tool's reconcile probe: ``probe(input, ctx)`` says whether an interrupted call took
effect (``"executed"``, ``"not-executed"``, or None for unknown)."""


@dataclass(frozen=True, kw_only=True)
class Tool:
    """A tool the model can call.

    ``fn`` receives the validated input as keyword arguments (plus the
    :class:`ToolContext` under ``context_param`` when set) and returns a str (text
    output), any JSON value (json output), a :class:`~agentkit.messages.ToolOutput`, or a
    list of text/image/file parts. Raising an exception produces an error result the
    model reads. ``timeout`` (seconds) bounds one call.
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    fn: Callable[..., Any]
    read_only: bool = False
    timeout: float | None = None
    context_param: str | None = None
    """Name of the parameter that receives the ToolContext, if any."""
    prepare_input: Callable[[dict[str, Any]], dict[str, Any]] | None = field(
        default=None, repr=False
    )
    """Turns validated JSON input into the keyword arguments ``fn`` takes."""
    strict: bool = True
    """True: the model's input must match ``input_schema`` exactly (``"3"`` is not an
    integer). False (lax): ``prepare_input`` alone checks and converts it, as pydantic's
    lax mode does (``"3"`` becomes ``3``); its errors go back to the model."""
    before_call: Callable[[ToolCallPart, ToolContext], ToolDecision | None] | None = field(
        default=None, repr=False
    )
    """The tool's own gate, run after the generation's ``before_tool_call`` hooks (MCP
    tools put ``authorize_tool_call`` here)."""
    redact_input: Callable[[Any], Any] | None = field(default=None, repr=False)
    """Turns an input into what may be recorded of it (the session's events, streams,
    records, approval requests); the tool itself still receives the input as the model
    wrote it. ``http_tools`` hides credential header values this way."""
    reconcile: Reconcile | None = field(default=None, repr=False, compare=False)
    """How to find out whether an interrupted call took effect: called with the call's
    input (a dict) and a context carrying its ``idempotency_key``, it answers
    ``"executed"``, ``"not-executed"`` (the call runs again as the same call) or None
    (unknown: the call stays uncertain). See docs/transactions.md, "Exactly once"."""
    on_session: Callable[[Any], None] | None = field(default=None, repr=False, compare=False)
    """Called with each Session the tool is given to (once per callable, however many
    tools share it): MCP tools connected with ``roots="session"`` announce the session's
    execution-context root this way."""
    cache: ResultCache | None = field(default=None, repr=False, compare=False)
    """Where the tool's successful results are kept and answered from (a
    :class:`~agentkit.ToolCache`); only for a ``read_only`` tool. See docs/tools.md,
    "Caching tool results"."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ToolDefinitionError(
                f"invalid tool name {self.name!r}: use 1-128 characters from A-Z a-z 0-9 _ -"
            )
        if not callable(self.fn):
            raise ToolDefinitionError(f"tool {self.name!r}: fn must be callable")
        schema = dict(self.input_schema)
        if schema.get("type") != "object":
            raise ToolDefinitionError(
                f"tool {self.name!r}: input_schema must be a JSON Schema with "
                f'"type": "object" (got {schema.get("type")!r})'
            )
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise ToolDefinitionError(
                f"tool {self.name!r}: input_schema is not a valid JSON Schema: {exc.message}"
            ) from None
        if self.reconcile is not None and not callable(self.reconcile):
            raise ToolDefinitionError(f"tool {self.name!r}: reconcile must be callable(input, ctx)")
        if self.redact_input is not None and not callable(self.redact_input):
            raise ToolDefinitionError(f"tool {self.name!r}: redact_input must be callable")
        if self.cache is not None:
            _check_cache(self)
        if self.timeout is not None and self.timeout <= 0:
            raise ToolDefinitionError(f"tool {self.name!r}: timeout must be positive")
        if not self.strict and self.prepare_input is None:
            raise ToolDefinitionError(
                f"tool {self.name!r}: strict=False needs prepare_input (what checks and converts "
                f"the input instead of the JSON Schema); @tool(strict=False) makes one"
            )
        object.__setattr__(self, "_validator", jsonschema.Draft202012Validator(schema))
        object.__setattr__(self, "_certainly_valid", compile_simple(schema))

    @property
    def spec(self) -> ToolSpec:
        """What the model is told about this tool."""
        return ToolSpec(name=self.name, description=self.description, input_schema=self.input_schema)

    def validation_error(self, data: Any) -> str | None:
        """A readable message naming the path and rule of the first schema violation, or
        None when ``data`` is valid (for a lax tool, when ``prepare_input`` accepts it)."""
        if not self.strict:
            return self._lax_problem(data)
        fast = getattr(self, "_certainly_valid", None)  # a flat object of scalars: no jsonschema
        if fast is not None and fast(data):
            return None
        validator: jsonschema.Draft202012Validator = self._validator  # type: ignore[attr-defined]
        if validator.is_valid(data):
            return None
        # paths mix ints (array items) and strs (keys): sort on comparable pairs
        errors = sorted(
            validator.iter_errors(data),
            key=lambda e: [(isinstance(p, str), p if isinstance(p, int) else str(p)) for p in e.absolute_path],
        )
        parts = [f"{_json_path(err.absolute_path)}: {err.message} (rule: {err.validator})" for err in errors[:5]]
        return f"invalid input for tool {self.name!r}: " + "; ".join(parts)

    def _lax_problem(self, data: Any) -> str | None:
        assert self.prepare_input is not None
        if not isinstance(data, dict):
            return f"invalid input for tool {self.name!r}: $: the arguments must be a JSON object"
        try:
            self.prepare_input(data)
        except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError, or the tool's own
            errors = getattr(exc, "errors", None)
            if not callable(errors):
                return f"invalid input for tool {self.name!r}: {exc}"
            parts = [f"{_json_path(err.get('loc', ()))}: {err.get('msg')} (rule: {err.get('type')})"
                     for err in errors(include_url=False)[:5]]
            return f"invalid input for tool {self.name!r}: " + "; ".join(parts)
        return None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn`` directly with these arguments, positional or keyword (no schema
        validation, no hooks, no approvals): handy in tests."""
        return self.fn(*args, **kwargs)


def _check_cache(tool: Tool) -> None:
    """A cache is a :class:`ResultCache`, on a tool that does not write."""
    if not isinstance(tool.cache, ResultCache):
        raise ConfigurationError(
            f"tool {tool.name!r}: cache must be a ToolCache (cache=ToolCache(path, ttl=seconds)), "
            f"not {type(tool.cache).__name__}"
        )
    if not tool.read_only:
        raise ConfigurationError(
            f"tool {tool.name!r}: cache= is only for tools that do not write: a cached call does not "
            f"run, so its effect would not happen. If the tool only reads, mark it read_only=True "
            f"(@tool(cache=..., read_only=True)); else drop cache="
        )


def _json_path(parts: Iterable[Any]) -> str:
    """``$.points[0].x``: where in the input an error is."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


@dataclass(frozen=True, kw_only=True)
class FunctionTool(Tool, Generic[_P, _R]):
    """A :class:`Tool` made by ``@tool`` from a function: calling it calls the function
    with the same arguments (``add(1, 2)``, ``add(a=1, b=2)``) and returns what it
    returns, typed as the function is. A function that takes a :class:`ToolContext`
    gets one only from the loop: a direct call passes it like any other argument."""

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        """Call the function (no schema validation, no hooks, no approvals)."""
        return cast(_R, self.fn(*args, **kwargs))


def to_tool_output(value: Any) -> ToolOutput:
    """Convert what a tool function returned into a :class:`ToolOutput`: a str is text,
    JSON values are JSON, pydantic models, dataclasses (and dates, enums, sets...) their
    JSON form, content parts content. Any other object is refused: an error result saying
    so, and a warning on the ``agentkit.tools`` logger (its ``repr`` would tell the model
    nothing)."""
    return _tool_output(value, "a tool")


def _tool_output(value: Any, who: str) -> ToolOutput:
    """:func:`to_tool_output`, with ``who`` (``"tool 'connect'"``) named in a refusal."""
    if isinstance(value, ToolOutput):
        return value
    if isinstance(value, str):
        return ToolOutput(kind="text", value=value)
    if isinstance(value, (TextPart, ImagePart, FilePart)):
        return ToolOutput(kind="content", value=(value,))
    if isinstance(value, (list, tuple)) and value and all(
        isinstance(v, (TextPart, ImagePart, FilePart)) for v in value
    ):
        return ToolOutput(kind="content", value=tuple(value))
    if value is None:
        return ToolOutput(kind="json", value=None)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        from pydantic_core import PydanticSerializationError, to_jsonable_python

        try:  # pydantic models, dataclasses, datetimes, enums, sets, UUIDs, paths...
            return ToolOutput(kind="json", value=to_jsonable_python(value))
        except PydanticSerializationError:
            text = (
                f"{who} returned a {type(value).__name__} object, which cannot be sent to the "
                f"model (it is not text or JSON); a tool must return a str, a JSON value, a "
                f"dataclass or pydantic model, content parts or a ToolOutput"
            )
            logging.getLogger("agentkit.tools").warning("%s", text)
            return ToolOutput.error(text)
    return ToolOutput(kind="json", value=value)
