"""Subagents: a whole agent exposed as one tool of another.

``subagent_tool(agent_or_options, name=..., description=...)`` returns a :class:`Tool`
whose input is ``{"task": str}``. Each call runs an isolated child :class:`Session`
(its own events, its own context window) on the task and returns the child's final
text. The child's usage is reported to the parent's generation (its result's
``usage`` and its ``limits``), the parent's cancellation cancels the child, and the
child's agent events reach the parent's stream wrapped in ``subagent-*`` events.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from pydantic_core import to_jsonable_python

from ..agent import Agent
from ..cancel import CancelToken
from ..errors import CancelledError, ConfigurationError
from ..events import AssistantMessageEvent, Event, UserMessageEvent
from ..messages import ToolOutput, text_of
from ..session._session import Session
from ..stores.base import EventStore, validate_session_id
from ..streaming._events import AgentEvent, StepEndEvent
from ..usage import Usage
from .base import Tool, ToolContext

__all__ = ["SubagentEndEvent", "SubagentEvent", "SubagentStartEvent", "child_session_id", "subagent_tool"]

_RESERVED_KEYS = ("session_id", "store", "events")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_ID = 128


@dataclass(frozen=True, kw_only=True)
class SubagentStartEvent(AgentEvent):
    """A subagent tool call started its child session (after waiting for a free slot)."""

    type: ClassVar[str] = "subagent-start"
    tool_call_id: str
    name: str
    """The subagent tool's name."""
    task: str
    session_id: str | None = None
    """The child session's id (stored in the parent's store when the parent is durable)."""

    def _payload(self) -> dict[str, Any]:
        return {"tool_call_id": self.tool_call_id, "name": self.name, "task": self.task,
                "session_id": self.session_id}


@dataclass(frozen=True, kw_only=True)
class SubagentEvent(AgentEvent):
    """One agent event of a child session, forwarded to the parent's stream."""

    type: ClassVar[str] = "subagent-event"
    tool_call_id: str
    name: str
    event: AgentEvent
    """The child's event (``text-delta``, ``tool-start``, ``step-end``...)."""

    def _payload(self) -> dict[str, Any]:
        return {"tool_call_id": self.tool_call_id, "name": self.name, "event": self.event.to_dict()}


@dataclass(frozen=True, kw_only=True)
class SubagentEndEvent(AgentEvent):
    """A subagent tool call ended: with the child's final ``text``, or with ``error``."""

    type: ClassVar[str] = "subagent-end"
    tool_call_id: str
    name: str
    text: str | None = None
    usage: Usage = Usage()
    """What the child spent (reported to the parent's generation)."""
    error: str | None = None

    def _payload(self) -> dict[str, Any]:
        return {"tool_call_id": self.tool_call_id, "name": self.name, "text": self.text,
                "usage": self.usage.to_dict(), "error": self.error}


def child_session_id(parent_session_id: str, tool_call_id: str) -> str:
    """The id a subagent call's child session gets in a durable parent's store:
    ``<parent>.sub.<tool-call-id>`` (characters a session id may not hold become ``_``;
    an id that would be too long ends in a digest of both ids instead)."""
    return derived_session_id(parent_session_id, "sub", tool_call_id)


def derived_session_id(parent_session_id: str, kind: str, key: str) -> str:
    """``<parent>.<kind>.<key>``, made a valid session id of at most 128 characters
    (the child sessions of subagents and of planning steps)."""
    candidate = f"{parent_session_id}.{kind}.{_UNSAFE.sub('_', key)}"
    if len(candidate) <= _MAX_ID:
        return validate_session_id(candidate)
    digest = hashlib.sha256(f"{parent_session_id}\0{kind}\0{key}".encode()).hexdigest()[:40]
    prefix = parent_session_id[: _MAX_ID - len(digest) - len(kind) - 2].rstrip(".-")
    return validate_session_id(f"{prefix}.{kind}.{digest}")


class _Slots:
    """A counting semaphore whose waiters leave at once when their cancel token fires."""

    def __init__(self, size: int) -> None:
        self._free = size
        self._cond = threading.Condition()

    def acquire(self, cancel: CancelToken) -> None:
        """Take a slot, waiting for one; CancelledError when ``cancel`` is (or gets)
        cancelled first."""
        with self._cond:
            cancel.raise_if_cancelled()
            if self._free > 0:
                self._free -= 1
                return
        forget = cancel._on_cancel(self._wake)
        try:
            with self._cond:
                while True:
                    cancel.raise_if_cancelled()  # also when a slot came free with the cancel
                    if self._free > 0:
                        self._free -= 1
                        return
                    self._cond.wait()
        finally:
            forget()

    def release(self) -> None:
        with self._cond:
            self._free += 1
            self._cond.notify_all()

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


def _is_agent(obj: Any) -> bool:
    return isinstance(obj, Agent)


def _check_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The child's Session keyword arguments, checked once (a throwaway in-memory
    Session validates the model, tools and options) before any call."""
    if not all(isinstance(k, str) for k in options):
        raise ConfigurationError("subagent_tool options must be a mapping of Session keyword arguments (str keys)")
    taken = [k for k in _RESERVED_KEYS if k in options]
    if taken:
        raise ConfigurationError(
            f"subagent_tool options may not set {', '.join(taken)}: each call gets its own child "
            f"session (stored in the parent's store when the parent is durable)"
        )
    if options.get("model") is None:
        raise ConfigurationError(
            "subagent_tool needs a model: pass an Agent or a mapping with 'model' "
            "(e.g. {'model': 'openai:gpt-4.1-mini', 'tools': [...], 'system': '...'})"
        )
    Session(**options).close()
    return dict(options)


def subagent_tool(
    agent_or_options: Any,
    *,
    name: str,
    description: str,
    max_concurrent: int = 4,
    timeout: float | None = None,
) -> Tool:
    """A tool that hands a task to a child agent and returns its final answer.

    ``agent_or_options`` is an :class:`~agentkit.Agent` or a mapping of :class:`Session`
    keyword arguments (``model``, ``tools``, ``system``, ``limits``...). The tool's
    input is ``{"task": str}``. Each call runs a fresh child session: in memory, or,
    when the parent session is durable, in the parent's store under
    :func:`child_session_id` (``<parent>.sub.<tool-call-id>``), where it can be
    inspected later; a call whose child session already holds an answer returns it
    without running again.

    At most ``max_concurrent`` calls of this tool run at once (the others wait, and a
    waiting call still ends at once when the parent is cancelled). ``timeout`` seconds
    (from the child's start) cancel the child; the model then reads an error result.
    The parent's cancellation cancels the child. Every model call of the child reports
    its usage to the parent's generation: it is part of the parent result's ``usage``
    and counts against the parent's ``limits`` (a child that passes a parent token limit
    is stopped). The child's events reach the parent's stream as ``subagent-start``,
    ``subagent-event`` (wrapping each child event) and ``subagent-end``.
    """
    if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int) or max_concurrent < 1:
        raise ConfigurationError(f"max_concurrent must be an int >= 1, got {max_concurrent!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ConfigurationError(f"timeout must be a number of seconds > 0 or None, got {timeout!r}")
    if not isinstance(description, str) or not description.strip():
        raise ConfigurationError("subagent_tool needs a non-empty description: the parent model reads it")
    if _is_agent(agent_or_options):
        agent: Any = agent_or_options
        options: dict[str, Any] | None = None
    elif isinstance(agent_or_options, Mapping):
        agent, options = None, _check_options(agent_or_options)
    else:
        raise ConfigurationError(
            f"subagent_tool takes an Agent or a mapping of Session keyword arguments "
            f"(model, tools, system...), not {type(agent_or_options).__name__}"
        )
    runner = _Subagent(name, agent, options, _Slots(max_concurrent), timeout)
    return Tool(
        name=name,
        description=description,
        input_schema={
            "type": "object",
            "properties": {"task": {"type": "string", "description": "The task, stated completely: the "
                                    "subagent sees nothing else of this conversation."}},
            "required": ["task"],
            "additionalProperties": False,
        },
        fn=runner,
        context_param="ctx",
    )


class _Subagent:
    """One subagent tool's calls: its slots, and how a child session is made and run."""

    def __init__(self, name: str, agent: Any, options: dict[str, Any] | None, slots: _Slots,
                 timeout: float | None) -> None:
        self.name = name
        self.agent = agent
        self.options = options
        self.slots = slots
        self.timeout = timeout

    def _open(self, session_id: str | None, store: EventStore | None) -> Session:
        if self.agent is not None:
            session: Session = self.agent.session(session_id=session_id, store=store)
            return session
        assert self.options is not None
        if store is None:
            return Session(**self.options)
        return Session.open(session_id or "", store=store, **self.options)

    def _deps(self, ctx: ToolContext) -> Any:
        """The child's deps: the parent's (``ToolContext.deps``), unless the options give
        the child its own."""
        if self.options is not None and self.options.get("deps") is not None:
            return None  # the child session's own
        return ctx.deps

    def __call__(self, task: str, ctx: ToolContext) -> ToolOutput:
        token = ctx.cancel.child()
        self.slots.acquire(token)  # raises CancelledError when the parent is cancelled meanwhile
        timer: threading.Timer | None = None
        try:
            if self.timeout is not None:
                timer = threading.Timer(self.timeout, token.cancel, args=(_timeout_reason(self.timeout),))
                timer.daemon = True
                timer.start()
            return self._run(task, ctx, token)
        finally:
            if timer is not None:
                timer.cancel()
            self.slots.release()

    def _run(self, task: str, ctx: ToolContext, token: CancelToken) -> ToolOutput:
        durable = ctx.store is not None and ctx.session_id is not None
        sid = _child_id(ctx.store, ctx.session_id, ctx.tool_call_id, task) if durable else None  # type: ignore[arg-type]
        cid = ctx.tool_call_id
        ctx.emit(SubagentStartEvent(tool_call_id=cid, name=self.name, task=task, session_id=sid))
        tally = _Tally(ctx, token)
        text: str | None = None
        error: str | None = None
        try:
            with self._open(sid, ctx.store if durable else None) as session:
                text = _answer_of(session.events, task)
                if text is None:
                    if not _asked(session.events, task):
                        session.push_user_message(task)
                    forward = tally.forward if not ctx.streaming else _both(tally.forward, ctx, cid, self.name)
                    result = session._generate(cancel=token, emit=forward, deps=self._deps(ctx))
                    tally.settle(result.usage)
                    if result.output is not None:  # a child with an output_type: its output, as JSON
                        output = ToolOutput(kind="json", value=to_jsonable_python(result.output))
                        ctx.emit(SubagentEndEvent(tool_call_id=cid, name=self.name, text=result.text,
                                                  usage=tally.usage))
                        return output
                    text = result.text
                    if not text.strip():
                        error = (f"subagent {self.name!r} ended without an answer "
                                 f"(finish_reason={result.finish_reason!r})")
        except CancelledError as exc:
            if ctx.cancel.cancelled:
                ctx.emit(SubagentEndEvent(tool_call_id=cid, name=self.name, usage=tally.usage,
                                          error=f"cancelled: {ctx.cancel.reason}"))
                raise
            error = f"subagent {self.name!r} stopped: {exc.reason or exc}"
        except Exception as exc:  # noqa: BLE001 - the parent model reads what went wrong
            error = f"subagent {self.name!r} failed: {type(exc).__name__}: {exc}"
        ctx.emit(SubagentEndEvent(tool_call_id=cid, name=self.name, text=None if error else text,
                                  usage=tally.usage, error=error))
        if error is not None:
            return ToolOutput.error(error)
        assert text is not None
        return ToolOutput(kind="text", value=text)


def _timeout_reason(seconds: float) -> str:
    return f"timed out after {seconds:g}s"


class _Tally:
    """The child's usage as it reports it, step by step, to the parent's generation; a
    parent token limit reached stops the child."""

    def __init__(self, ctx: ToolContext, token: CancelToken) -> None:
        self.ctx = ctx
        self.token = token
        self.usage = Usage()

    def add(self, usage: Usage) -> None:
        self.usage = self.usage + usage
        if not self.ctx.report_usage(usage):
            self.token.cancel("the parent generation's token limit was reached")

    def forward(self, event: AgentEvent) -> None:
        if isinstance(event, StepEndEvent):
            self.add(event.step.usage)

    def settle(self, total: Usage) -> None:
        """Report what the child's result counts beyond its steps (its own subagents)."""
        rest = {f.name: getattr(total, f.name) - getattr(self.usage, f.name) for f in fields(Usage)}
        if any(v > 0 for v in rest.values()):
            self.add(Usage(**{k: max(0, v) for k, v in rest.items()}))


def _both(account: Any, ctx: ToolContext, cid: str, name: str) -> Any:
    def forward(event: AgentEvent) -> None:
        account(event)
        ctx.emit(SubagentEvent(tool_call_id=cid, name=name, event=event))

    return forward


_MAX_TWINS = 100


def _child_id(store: EventStore, parent: str, tool_call_id: str, task: str) -> str:
    """The child session of this call: :func:`child_session_id`, unless the store holds
    a child of another task there (a model that reuses call ids across generations);
    then the first of ``<id>-2``, ``<id>-3``... that is free or holds this task."""
    for n in range(1, _MAX_TWINS + 1):
        sid = child_session_id(parent, tool_call_id if n == 1 else f"{tool_call_id}-{n}")
        stored = store.load(sid)
        if stored is None or not stored.events or _first_task(stored.events) in (None, task):
            return sid
    raise ConfigurationError(  # pragma: no cover - a hundred children under one call id
        f"tool call id {tool_call_id!r} of session {parent!r} already names {_MAX_TWINS} child sessions"
    )


def _first_task(events: Sequence[Event]) -> str | None:
    for ev in events:
        if isinstance(ev, UserMessageEvent):
            return text_of(ev.content)
    return None


def _asked(events: tuple[Event, ...], task: str) -> bool:
    """True when the child session already holds the task as its last user message."""
    for ev in reversed(events):
        if isinstance(ev, UserMessageEvent):
            return text_of(ev.content) == task
    return False


def _answer_of(events: tuple[Event, ...], task: str) -> str | None:
    """The final answer a stored child session already gave to ``task`` (a replayed
    call), or None."""
    if not events or not _asked(events, task):
        return None
    last = events[-1]
    if isinstance(last, AssistantMessageEvent) and not last.tool_calls:
        text = text_of(last.content)
        return text if text.strip() else None
    return None
