"""The front doors that run an agent: :class:`Agent` (a reusable, immutable model + tools +
options bundle, run as often as you like, from any thread), :func:`run_agent` (one call,
a complete tool-using agent loop) and :func:`run_agent_stream` (the same as a stream of
events).

All three are typed for a type checker: ``Agent(model, deps_type=Deps, output_type=City)``
is an ``Agent[Deps, City]``, whose ``run`` returns a ``RunResult[City]`` and takes
``deps`` of type ``Deps``; without ``output_type`` the result's ``output`` is None. The
generation options are keyword arguments checked against
:class:`~agentkit.options.GenerationKwargs`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any, Generic, cast, overload

from typing_extensions import TypeVar, Unpack

from .cancel import CancelToken
from .context._compaction import Retention
from .context._invariants import check_messages
from .context._projection import events_from_messages
from .errors import ConfigurationError
from .messages import Message, Prompt
from .models.base import ChatModel
from .options import (
    NOT_GIVEN,
    GenerationKwargs,
    GenerationOptions,
    LoopOptions,
    check_deps,
    check_deps_type,
    option_names,
    with_output_type,
)
from .results import RunResult
from .session._foreign import history_from, model_from, tools_from
from .session._human import warn_waiting
from .session._runs import AgentRuns
from .session._session import Session
from .stores.base import EventStore
from .streaming._events import Emit
from .streaming._stream import AgentStream
from .tools.base import Tool, ToolRegistry

DepsT = TypeVar("DepsT", default=Any)
"""An agent's ``deps_type`` (``Any`` without one)."""
OutputT = TypeVar("OutputT", default=None, covariant=True)
"""An agent's ``output_type`` (None without one: its results' ``output`` is None)."""
T = TypeVar("T")
D = TypeVar("D")

# -- run_agent -------------------------------------------------------------------------


@overload
def run_agent(
    model: ChatModel | str, prompt: Prompt, *, output_type: type[T], tools: Iterable[Any] = (),
    messages: Sequence[Message] | None = None, execution_context: Any = None, cancel: CancelToken | None = None,
    deps: Any = None, deps_type: type[Any] | None = None, store: EventStore | None = None,
    session_id: str | None = None, retention: Retention | None = None, **options: Unpack[GenerationKwargs],
) -> RunResult[T]: ...
@overload
def run_agent(
    model: ChatModel | str, prompt: Prompt, *, output_type: None = None, tools: Iterable[Any] = (),
    messages: Sequence[Message] | None = None, execution_context: Any = None, cancel: CancelToken | None = None,
    deps: Any = None, deps_type: type[Any] | None = None, store: EventStore | None = None,
    session_id: str | None = None, retention: Retention | None = None, **options: Unpack[GenerationKwargs],
) -> RunResult[None]: ...
def run_agent(
    model: ChatModel | str,
    prompt: Prompt,
    *,
    output_type: Any = None,
    tools: Iterable[Any] = (),
    messages: Sequence[Message] | None = None,
    execution_context: Any = None,
    cancel: CancelToken | None = None,
    deps: Any = None,
    deps_type: type[Any] | None = None,
    store: EventStore | None = None,
    session_id: str | None = None,
    retention: Retention | None = None,
    **options: Unpack[GenerationKwargs],
) -> RunResult[Any]:
    """Send ``prompt`` to ``model`` and run tool calls until the model answers.

    ``model`` is a :class:`~agentkit.models.ChatModel` or a spec such as
    ``"openai:gpt-4.1-mini"``. ``messages`` continues an earlier conversation (pass a
    previous ``result.messages``); system messages in it become the system prompt.
    ``options`` are the per-generation options (:class:`~agentkit.options.GenerationOptions`:
    ``system``, ``max_steps``, ``hooks``, callbacks...); with ``output_type`` the result's
    ``output`` is a validated instance of it (a ``RunResult[output_type]``). ``deps`` reach
    tools and hooks as ``ToolContext.deps``. ``store``, ``session_id`` and ``retention``
    go to the run's :class:`~agentkit.Session` (a stored run). Returns a
    :class:`RunResult`. The one-call form of :class:`Agent`:
    ``Agent(model, tools=..., **options).run(prompt)``.
    """
    given = _given(options, output_type, store=store, session_id=session_id, retention=retention)
    return _run_agent(model, prompt, given, tools=tools, messages=messages, execution_context=execution_context,
                      cancel=cancel, deps=deps, deps_type=deps_type)


def _given(options: Mapping[str, Any], output_type: Any, **session: Any) -> dict[str, Any]:
    """run_agent's options and output_type, plus the Session arguments that were given."""
    return {**options, "output_type": output_type, **{k: v for k, v in session.items() if v is not None}}


def _run_agent(model: ChatModel | str, prompt: Prompt, options: Mapping[str, Any], *, tools: Iterable[Any],
               messages: Sequence[Message] | None, execution_context: Any, cancel: CancelToken | None, deps: Any,
               deps_type: Any, emit: Emit | None = None) -> RunResult[Any]:
    _check_model(model, "run_agent")
    names = option_names()
    generation = {k: v for k, v in options.items() if k in names}
    session_kwargs = {k: v for k, v in options.items() if k not in names}  # store=, retention=...
    return _run_once(model, prompt, tools=tools, options=GenerationOptions.build(generation), messages=messages,
                     execution_context=execution_context, deps=deps, deps_type=deps_type, cancel=cancel, emit=emit,
                     session_kwargs=session_kwargs)


@overload
def run_agent_stream(
    model: ChatModel | str, prompt: Prompt, *, output_type: type[T], max_buffer: int = 1000,
    cancel: CancelToken | None = None, tools: Iterable[Any] = (), messages: Sequence[Message] | None = None,
    execution_context: Any = None, deps: Any = None, deps_type: type[Any] | None = None,
    store: EventStore | None = None, session_id: str | None = None, retention: Retention | None = None,
    **options: Unpack[GenerationKwargs],
) -> AgentStream[T]: ...
@overload
def run_agent_stream(
    model: ChatModel | str, prompt: Prompt, *, output_type: None = None, max_buffer: int = 1000,
    cancel: CancelToken | None = None, tools: Iterable[Any] = (), messages: Sequence[Message] | None = None,
    execution_context: Any = None, deps: Any = None, deps_type: type[Any] | None = None,
    store: EventStore | None = None, session_id: str | None = None, retention: Retention | None = None,
    **options: Unpack[GenerationKwargs],
) -> AgentStream[None]: ...
def run_agent_stream(
    model: ChatModel | str,
    prompt: Prompt,
    *,
    output_type: Any = None,
    max_buffer: int = 1000,
    cancel: CancelToken | None = None,
    tools: Iterable[Any] = (),
    messages: Sequence[Message] | None = None,
    execution_context: Any = None,
    deps: Any = None,
    deps_type: type[Any] | None = None,
    store: EventStore | None = None,
    session_id: str | None = None,
    retention: Retention | None = None,
    **options: Unpack[GenerationKwargs],
) -> AgentStream[Any]:
    """:func:`run_agent` on a worker thread, as an :class:`~agentkit.AgentStream` of its
    events: iterate it, then read ``.result`` (a :class:`RunResult`). Closing the stream
    early cancels the run. Takes the same keyword arguments as :func:`run_agent`."""
    _check_model(model, "run_agent_stream")
    given = _given(options, output_type, store=store, session_id=session_id, retention=retention)

    def run(emit: Emit, token: CancelToken) -> RunResult[Any]:
        return _run_agent(model, prompt, given, tools=tools, messages=messages, execution_context=execution_context,
                          cancel=token, deps=deps, deps_type=deps_type, emit=emit)

    return AgentStream(run, max_buffer=max_buffer, cancel=cancel)


def _check_model(model: Any, function: str) -> None:
    if model is None:
        raise ConfigurationError(
            f"{function}() needs a model as its first argument: a ChatModel or a spec such as "
            f"'openai:gpt-4.1-mini' (got None)"
        )


# -- Agent -----------------------------------------------------------------------------


class Agent(AgentRuns, Generic[DepsT, OutputT]):
    """A model, its tools and generation options, bundled once and reused.

    ``Agent(model, tools=..., system=..., hooks=..., output_type=..., deps_type=...,
    **options)`` takes every per-generation option
    (:class:`~agentkit.options.GenerationOptions`) as a keyword. The agent is immutable
    and holds no conversation: each :meth:`run` is a fresh conversation (pass
    ``messages=`` to continue one), :meth:`session` opens a durable one. Safe to share
    between threads.

    ``deps`` (per call) reach tools and hooks as ``ToolContext.deps``; with ``deps_type``
    (a class) a call whose deps are missing or of another type is a
    :class:`~agentkit.errors.ConfigurationError` before anything runs. For a type
    checker the agent is an ``Agent[deps_type, output_type]``.

    ``max_concurrent_runs`` caps the runs active at once, ``queue_timeout`` bounds the
    wait for a slot: see :class:`~agentkit.session._runs.AgentRuns`.
    """

    __slots__ = ("_model", "_tools", "_options", "_deps_type", "_execution_context")

    _model: ChatModel
    _tools: tuple[Tool, ...]
    _options: GenerationOptions
    _deps_type: Any
    _execution_context: Any

    def __init__(
        self,
        model: ChatModel | str,
        *,
        tools: Iterable[Any] = (),
        deps_type: type[DepsT] | None = None,
        output_type: type[OutputT] | None = None,
        execution_context: Any = None,
        max_concurrent_runs: int | None = None,
        queue_timeout: float | None = None,
        **options: Unpack[GenerationKwargs],
    ) -> None:
        runs = AgentRuns.limiter(max_concurrent_runs, queue_timeout)
        self._init(model, tools, deps_type, execution_context,
                   GenerationOptions.build(dict(options, output_type=output_type)))
        object.__setattr__(self, "_runs", runs)

    def _init(self, model: ChatModel | str, tools: Iterable[Any], deps_type: Any, execution_context: Any,
              options: GenerationOptions) -> None:
        resolved = model_from(model)
        if resolved is None:
            raise ConfigurationError("Agent needs a model: a ChatModel or a spec such as 'openai:gpt-4.1-mini'")
        converted = tuple(tools_from(tools))
        registry = ToolRegistry(converted)  # duplicate names fail here
        LoopOptions.of(options, model=resolved, tools=registry, execution_context=execution_context).check()
        check_deps_type(deps_type)
        object.__setattr__(self, "_model", resolved)
        object.__setattr__(self, "_tools", converted)
        object.__setattr__(self, "_options", options)
        object.__setattr__(self, "_deps_type", deps_type)
        object.__setattr__(self, "_execution_context", execution_context)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Agent is immutable; use agent.with_options({name}=...) for a changed copy")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Agent is immutable")

    def __copy__(self) -> Agent[DepsT, OutputT]:
        return self  # immutable: a copy is the same agent

    def __deepcopy__(self, memo: dict[int, Any]) -> Agent[DepsT, OutputT]:
        return self

    # -- what it holds -----------------------------------------------------------------

    @property
    def model(self) -> ChatModel:
        """The model every run uses."""
        return self._model

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The tools (converted: LangChain tools and toolkits are agentkit Tools here)."""
        return self._tools

    @property
    def options(self) -> GenerationOptions:
        """The generation options every run starts from."""
        return self._options

    @property
    def deps_type(self) -> type[DepsT] | None:
        """The type ``deps`` must have, or None."""
        return cast("type[DepsT] | None", self._deps_type)

    @property
    def execution_context(self) -> Any:
        """The execution context tools act through, or None."""
        return self._execution_context

    @property
    def output_type(self) -> type[OutputT] | None:
        """The structured output type, or None (the same as ``agent.options.output_type``)."""
        return cast("type[OutputT] | None", self._options.output_type)

    def __repr__(self) -> str:
        name = getattr(self._model, "model_name", None) or type(self._model).__name__
        tools = ", ".join(t.name for t in self._tools)
        return f"<Agent {name} tools=[{tools}]>"

    @overload
    def with_options(
        self, *, output_type: type[T], deps_type: type[D], model: ChatModel | str = NOT_GIVEN,
        tools: Iterable[Any] = NOT_GIVEN, execution_context: Any = NOT_GIVEN, **changes: Unpack[GenerationKwargs],
    ) -> Agent[D, T]: ...
    @overload
    def with_options(
        self, *, output_type: type[T], model: ChatModel | str = NOT_GIVEN,
        tools: Iterable[Any] = NOT_GIVEN, execution_context: Any = NOT_GIVEN, **changes: Unpack[GenerationKwargs],
    ) -> Agent[DepsT, T]: ...
    @overload
    def with_options(
        self, *, output_type: None, deps_type: type[D], model: ChatModel | str = NOT_GIVEN,
        tools: Iterable[Any] = NOT_GIVEN, execution_context: Any = NOT_GIVEN, **changes: Unpack[GenerationKwargs],
    ) -> Agent[D, None]: ...
    @overload
    def with_options(
        self, *, output_type: None, model: ChatModel | str = NOT_GIVEN,
        tools: Iterable[Any] = NOT_GIVEN, execution_context: Any = NOT_GIVEN, **changes: Unpack[GenerationKwargs],
    ) -> Agent[DepsT, None]: ...
    @overload
    def with_options(
        self, *, deps_type: type[D], model: ChatModel | str = NOT_GIVEN,
        tools: Iterable[Any] = NOT_GIVEN, execution_context: Any = NOT_GIVEN, **changes: Unpack[GenerationKwargs],
    ) -> Agent[D, OutputT]: ...
    @overload
    def with_options(
        self, *, model: ChatModel | str = NOT_GIVEN,
        tools: Iterable[Any] = NOT_GIVEN, execution_context: Any = NOT_GIVEN, **changes: Unpack[GenerationKwargs],
    ) -> Agent[DepsT, OutputT]: ...
    def with_options(
        self,
        *,
        output_type: Any = NOT_GIVEN,
        deps_type: Any = NOT_GIVEN,
        model: ChatModel | str = NOT_GIVEN,
        tools: Iterable[Any] = NOT_GIVEN,
        execution_context: Any = NOT_GIVEN,
        **changes: Unpack[GenerationKwargs],
    ) -> Agent[Any, Any]:
        """A copy with changes: ``model``, ``tools``, ``deps_type`` and
        ``execution_context`` replace this agent's; generation options apply by their
        merge rule, as a ``generate`` override does (``hooks`` are added after these)."""
        given = {"model": model, "tools": tools, "deps_type": deps_type, "execution_context": execution_context}
        own = {name: getattr(self, name) if value is NOT_GIVEN else value for name, value in given.items()}
        copy: Agent[Any, Any] = object.__new__(Agent)
        copy._init(own["model"], own["tools"], own["deps_type"], own["execution_context"],
                   self._options.merged(with_output_type(changes, output_type)))
        object.__setattr__(copy, "_runs", self._runs)  # copies share the cap, the count and close()
        return copy

    # -- running -----------------------------------------------------------------------

    @overload
    def run(
        self, prompt: Prompt, *, output_type: type[T], deps: DepsT | None = None,
        messages: Sequence[Any] | None = None, cancel: CancelToken | None = None,
        **overrides: Unpack[GenerationKwargs],
    ) -> RunResult[T]: ...
    @overload
    def run(
        self, prompt: Prompt, *, deps: DepsT | None = None, messages: Sequence[Any] | None = None,
        cancel: CancelToken | None = None, **overrides: Unpack[GenerationKwargs],
    ) -> RunResult[OutputT]: ...
    def run(
        self,
        prompt: Prompt,
        *,
        output_type: Any = NOT_GIVEN,
        deps: DepsT | None = None,
        messages: Sequence[Any] | None = None,
        cancel: CancelToken | None = None,
        **overrides: Unpack[GenerationKwargs],
    ) -> RunResult[Any]:
        """Send ``prompt`` and run tool calls until the model answers; returns a
        :class:`~agentkit.RunResult` (``.output`` holds the structured output with an
        ``output_type``). ``messages`` continues an earlier conversation (a previous
        ``result.messages``, or a LangChain history); system messages in it are added to
        the system prompt. ``overrides`` are generation options for this run only."""
        return self._run(prompt, with_output_type(overrides, output_type), deps=deps, messages=messages,
                         cancel=cancel)

    def _run(self, prompt: Prompt, overrides: Mapping[str, Any], *, deps: Any, messages: Sequence[Any] | None,
             cancel: CancelToken | None, emit: Emit | None = None) -> RunResult[Any]:
        with self._runs.slot(cancel) as token:
            return _run_once(
                self._model, prompt, tools=self._tools, options=self._options.merged(overrides), messages=messages,
                execution_context=self._execution_context, deps=deps, deps_type=self._deps_type, cancel=token,
                emit=emit, caller="Agent.run",
            )

    @overload
    def stream(
        self, prompt: Prompt, *, output_type: type[T], deps: DepsT | None = None,
        messages: Sequence[Any] | None = None, max_buffer: int = 1000, cancel: CancelToken | None = None,
        **overrides: Unpack[GenerationKwargs],
    ) -> AgentStream[T]: ...
    @overload
    def stream(
        self, prompt: Prompt, *, deps: DepsT | None = None, messages: Sequence[Any] | None = None,
        max_buffer: int = 1000, cancel: CancelToken | None = None, **overrides: Unpack[GenerationKwargs],
    ) -> AgentStream[OutputT]: ...
    def stream(
        self,
        prompt: Prompt,
        *,
        output_type: Any = NOT_GIVEN,
        deps: DepsT | None = None,
        messages: Sequence[Any] | None = None,
        max_buffer: int = 1000,
        cancel: CancelToken | None = None,
        **overrides: Unpack[GenerationKwargs],
    ) -> AgentStream[Any]:
        """:meth:`run` on a worker thread, as an :class:`~agentkit.AgentStream` of its
        events: iterate it, then read ``.result`` (a RunResult, with ``.output``).
        Closing the stream early cancels the run."""
        given = with_output_type(overrides, output_type)
        self._options.merged(given)  # a bad option fails here, not on the worker thread
        self._runs.check_open()
        if self._deps_type is not None:
            check_deps(deps, self._deps_type)

        def run(emit: Emit, token: CancelToken) -> RunResult[Any]:
            return self._run(prompt, given, deps=deps, messages=messages, cancel=token, emit=emit)

        return AgentStream(run, max_buffer=max_buffer, cancel=cancel)

    @overload
    def session(
        self, session_id: str | None = None, store: Any = None, *, output_type: type[T],
        deps: DepsT | None = None, **kwargs: Any,
    ) -> Session[DepsT, T]: ...
    @overload
    def session(
        self, session_id: str | None = None, store: Any = None, *, deps: DepsT | None = None, **kwargs: Any,
    ) -> Session[DepsT, OutputT]: ...
    def session(self, session_id: str | None = None, store: Any = None, *, output_type: Any = NOT_GIVEN,
                deps: DepsT | None = None, **kwargs: Any) -> Session[Any, Any]:
        """A :class:`~agentkit.Session` with this agent's model, tools and options (its
        ``ask``/``generate`` take ``deps=`` and overrides per call). With a ``store`` it
        is durable: an existing ``session_id`` is restored. ``deps`` are the session's
        default deps; ``kwargs`` are further Session arguments (``retention``...) and
        generation options for this session."""
        names = set(option_names())
        given = with_output_type({k: kwargs.pop(k) for k in list(kwargs) if k in names}, output_type)
        options = self._options.merged(given)
        return self._open(options, session_id=session_id, store=store, deps=deps, **kwargs)

    def _open(self, options: GenerationOptions, **session_kwargs: Any) -> Session[Any, Any]:
        return Session._create(
            self._model,
            tools=self._tools,
            execution_context=self._execution_context,
            deps_type=self._deps_type,
            base_options=options,
            **session_kwargs,
        )

    def as_mcp_server(self, name: str | None = None) -> Any:
        """This agent as an MCP server: the mcp SDK's ``MCPServer`` (``name`` is the
        server's name) with one tool whose input schema holds ``prompt``. A call runs the
        agent; its steps come back as progress notifications, the client's cancel
        cancels the run, and approvals are asked through MCP elicitation where the
        client supports it. Serve it with ``server.run()`` (stdio) or
        ``server.run("streamable-http", port=...)``, or ``agentkit serve-mcp
        module:agent``. Needs the ``mcp`` extra."""
        from .mcp._agent_server import agent_server

        return agent_server(self, name)


def _run_once(
    model: ChatModel | str,
    prompt: Prompt,
    *,
    tools: Iterable[Any],
    options: GenerationOptions,
    messages: Sequence[Any] | None,
    execution_context: Any,
    deps: Any,
    deps_type: Any,
    cancel: CancelToken | None,
    emit: Emit | None,
    session_kwargs: dict[str, Any] | None = None,
    caller: str = "run_agent",
) -> RunResult[Any]:
    """One conversation to its answer over a fresh Session: ``Agent.run`` and
    ``run_agent`` (which checks its arguments once, in the Session, not in an Agent).
    A run that stops for approvals is logged as a warning: its session is gone."""
    history = history_from(messages)
    system_texts = [m.text for m in history if m.role == "system"]
    if system_texts:
        given = options.system
        options = options.merged({"system": "\n\n".join(([given] if given else []) + system_texts)})
        history = [m for m in history if m.role != "system"]
    check_messages(history, what="messages")
    if not isinstance(prompt, str) and isinstance(prompt, Message):
        raise ConfigurationError("prompt must be text or content parts; pass Message history as messages=")
    if deps_type is not None:
        check_deps(deps, deps_type)
    with Session._create(model, tools=tools, events=events_from_messages(history),
                         execution_context=execution_context, deps_type=deps_type, base_options=options,
                         **(session_kwargs or {})) as session:
        session.push_user_message(prompt)
        result = session._generate(cancel=cancel, deps=deps, emit=emit)
        if result.finish_reason in ("approval-required", "input-required"):
            warn_waiting(caller, session, result.finish_reason)
    return RunResult(**{f.name: getattr(result, f.name) for f in fields(RunResult)})
