"""``Agent``: a reusable, immutable agent — a model, tools and generation options, run
as often as you like, from any thread.

``run_agent`` (in :mod:`agentkit.agent`) is the one-call shortcut over the same path.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import fields
from typing import Any

from .cancel import CancelToken
from .context._invariants import check_messages
from .context._projection import events_from_messages
from .errors import ConfigurationError
from .loop._loop import LoopOptions
from .messages import Message, Prompt
from .models.base import ChatModel
from .options import GenerationOptions, option_names
from .results import RunResult
from .session._foreign import history_from, model_from, tools_from
from .session._session import Session, check_deps, check_deps_type
from .streaming._stream import AgentStream, Emit
from .tools.base import Tool, ToolRegistry

_OWN = ("model", "tools", "deps_type", "execution_context")


class Agent:
    """A model, its tools and generation options, bundled once and reused.

    ``Agent(model, tools=..., system=..., hooks=..., output_type=..., deps_type=...,
    **options)`` takes every per-generation option
    (:class:`~agentkit.options.GenerationOptions`) as a keyword. The agent is immutable
    and holds no conversation: each :meth:`run` is a fresh conversation (pass
    ``messages=`` to continue one), :meth:`session` opens a durable one. Safe to share
    between threads.

    ``deps`` (per call) reach tools and hooks as ``ToolContext.deps``; with ``deps_type``
    (a class) a call whose deps are missing or of another type is a
    :class:`~agentkit.errors.ConfigurationError` before anything runs.
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
        deps_type: Any = None,
        execution_context: Any = None,
        **options: Any,
    ) -> None:
        self._init(model, tools, deps_type, execution_context, GenerationOptions.build(options))

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

    def __copy__(self) -> Agent:
        return self  # immutable: a copy is the same agent

    def __deepcopy__(self, memo: dict[int, Any]) -> Agent:
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
    def deps_type(self) -> Any:
        """The type ``deps`` must have, or None."""
        return self._deps_type

    @property
    def execution_context(self) -> Any:
        """The execution context tools act through, or None."""
        return self._execution_context

    @property
    def output_type(self) -> Any:
        """The structured output type, or None (the same as ``agent.options.output_type``)."""
        return self._options.output_type

    def __repr__(self) -> str:
        name = getattr(self._model, "model_name", None) or type(self._model).__name__
        tools = ", ".join(t.name for t in self._tools)
        return f"<Agent {name} tools=[{tools}]>"

    def with_options(self, **changes: Any) -> Agent:
        """A copy with ``changes``: ``model``, ``tools``, ``deps_type`` and
        ``execution_context`` replace this agent's; generation options apply by their
        merge rule, as a ``generate`` override does (``hooks`` are added after these)."""
        own = {name: changes.pop(name) if name in changes else getattr(self, name) for name in _OWN}
        copy = object.__new__(Agent)
        copy._init(own["model"], own["tools"], own["deps_type"], own["execution_context"],
                   self._options.merged(changes))
        return copy

    # -- running -----------------------------------------------------------------------

    def run(
        self,
        prompt: Prompt,
        *,
        deps: Any = None,
        messages: Sequence[Any] | None = None,
        cancel: CancelToken | None = None,
        _emit: Emit | None = None,
        **overrides: Any,
    ) -> RunResult:
        """Send ``prompt`` and run tool calls until the model answers; returns a
        :class:`~agentkit.RunResult` (``.output`` holds the structured output with an
        ``output_type``). ``messages`` continues an earlier conversation (a previous
        ``result.messages``, or a LangChain history); system messages in it are added to
        the system prompt. ``overrides`` are generation options for this run only."""
        return run_once(
            self._model, prompt, tools=self._tools, options=self._options.merged(overrides), messages=messages,
            execution_context=self._execution_context, deps=deps, deps_type=self._deps_type, cancel=cancel,
            emit=_emit, caller="Agent.run",
        )

    def stream(
        self,
        prompt: Prompt,
        *,
        deps: Any = None,
        messages: Sequence[Any] | None = None,
        max_buffer: int = 1000,
        cancel: CancelToken | None = None,
        **overrides: Any,
    ) -> AgentStream:
        """:meth:`run` on a worker thread, as an :class:`~agentkit.AgentStream` of its
        events: iterate it, then read ``.result`` (a RunResult, with ``.output``).
        Closing the stream early cancels the run."""
        if "_emit" in overrides:
            raise ConfigurationError("Agent.stream() does not take _emit=")
        self._options.merged(overrides)  # a bad option fails here, not on the worker thread
        if self._deps_type is not None:
            check_deps(deps, self._deps_type)

        def run(emit: Emit, token: CancelToken) -> RunResult:
            return self.run(prompt, deps=deps, messages=messages, cancel=token, _emit=emit, **overrides)

        return AgentStream(run, max_buffer=max_buffer, cancel=cancel)

    def session(self, session_id: str | None = None, store: Any = None, *, deps: Any = None,
                **kwargs: Any) -> Session:
        """A :class:`~agentkit.Session` with this agent's model, tools and options (its
        ``ask``/``generate`` take ``deps=`` and overrides per call). With a ``store`` it
        is durable: an existing ``session_id`` is restored. ``deps`` are the session's
        default deps; ``kwargs`` are further Session arguments (``retention``...) and
        generation options for this session."""
        names = set(option_names())
        options = self._options.merged({k: kwargs.pop(k) for k in list(kwargs) if k in names})
        return self._open(options, session_id=session_id, store=store, deps=deps, **kwargs)

    def _open(self, options: GenerationOptions, **session_kwargs: Any) -> Session:
        return Session(
            self._model,
            tools=self._tools,
            execution_context=self._execution_context,
            deps_type=self._deps_type,
            _options=options,
            **session_kwargs,
        )


def run_once(
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
) -> RunResult:
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
    with Session(model, tools=tools, events=events_from_messages(history), execution_context=execution_context,
                 deps_type=deps_type, _options=options, **(session_kwargs or {})) as session:
        session.push_user_message(prompt)
        result = session.generate(cancel=cancel, deps=deps, _emit=emit)
        if result.finish_reason == "approval-required":
            _warn_waiting(caller, session)
    return RunResult(**{f.name: getattr(result, f.name) for f in fields(RunResult)})


def _warn_waiting(caller: str, session: Session) -> None:
    """Say why a one-shot run ended with no answer: its tool calls wait for approval."""
    calls = ", ".join(repr(r.tool_name) for r in session.pending_approvals())
    logging.getLogger("agentkit.session").warning(
        "%s() stopped with finish_reason 'approval-required': tool call(s) %s wait for a "
        "person's decision and no approver= answered them, so there is no answer. Pass "
        "approver= to decide in-process, or run the conversation in a Session and answer "
        "session.pending_approvals() with approve()/deny(), then generate() again.",
        caller, calls or "(none)",
    )
