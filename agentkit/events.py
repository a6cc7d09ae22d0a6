"""Canonical session events.

A session's state is an append-only list of events. Every event has a stable ``id``, a
``type``, a ``timestamp`` (seconds since the epoch) and a ``seq`` assigned when the
Session commits it (``0`` means "not committed yet"). Events are frozen, JSON-ready data
and refer to other things by id only.
"""

from __future__ import annotations

import contextvars
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ._json import MAX_DEPTH, json_problem
from .errors import ConfigurationError
from .messages import (
    ContentPart,
    Message,
    ToolCallPart,
    ToolOutput,
    content_from_dict,
    content_to_dict,
)
from .usage import Usage

__all__ = [
    "AssistantMessageEvent",
    "CompactionEvent",
    "ContextReplacedEvent",
    "ControlEvent",
    "Event",
    "RuntimeEvent",
    "ToolResultEvent",
    "UserMessageEvent",
    "event_from_dict",
    "new_id",
]


# Event ids need uniqueness, not secrecy: 128 bits from a generator seeded by os.urandom
# (and reseeded in a forked child). An id a host may hand out as a capability (an
# approval request's) comes from the secrets module instead. uuid4() reads os.urandom for every id, a system call that
# also lets other threads take the interpreter lock: several thread switches per step
# for a streamed generation.
_ids = random.Random()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ids.seed)


def new_id() -> str:
    """A new random event id: 32 hex digits (128 random bits). Unique, not unguessable:
    never use one as a credential."""
    return f"{_ids.getrandbits(128):032x}"


@dataclass(frozen=True, kw_only=True)
class Event:
    """Base class of all events."""

    type: ClassVar[str] = "event"
    id: str = field(default_factory=new_id)
    """Stable, unique id."""
    timestamp: float = field(default_factory=time.time)
    """When the event was created (seconds since the epoch)."""
    seq: int = 0
    """Commit sequence number within the session, assigned by the Session (1, 2, ...)."""
    generation_id: str | None = None
    """The transactional generation (``Session.begin_generation``) this event belongs to;
    None for every other event. The model sees such an event only while its generation
    runs and after the host accepted it."""

    def with_seq(self, seq: int) -> Event:
        """A copy carrying commit number ``seq``."""
        # the fields were checked when this event was made; only seq changes, so copy
        # them as they are (dataclasses.replace would rebuild and re-check it: every
        # commit of every event pays this)
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        object.__setattr__(copy, "seq", seq)
        return copy

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``event_from_dict`` restores an equal event."""
        out: dict[str, Any] = {
            "type": self.type,
            "id": self.id,
            "timestamp": self.timestamp,
            "seq": self.seq,
        }
        if self.generation_id is not None:
            out["generation_id"] = self.generation_id
        out.update(self._payload())
        return out

    def _payload(self) -> dict[str, Any]:  # pragma: no cover - overridden
        return {}

    @classmethod
    def _from_payload(cls, d: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover
        return {}


@dataclass(frozen=True, kw_only=True)
class UserMessageEvent(Event):
    """The user said something (text, images, files)."""

    type: ClassVar[str] = "user-message"
    content: tuple[ContentPart, ...]
    follow_up: bool = False
    """Pushed with ``Session.follow_up``: a running generation answers it before it ends."""

    def _payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {"content": content_to_dict(self.content)}
        if self.follow_up:
            out["follow_up"] = True
        return out

    @classmethod
    def _from_payload(cls, d: dict[str, Any]) -> dict[str, Any]:
        return {"content": content_from_dict(d["content"]), "follow_up": bool(d.get("follow_up", False))}


@dataclass(frozen=True, kw_only=True)
class AssistantMessageEvent(Event):
    """The model answered: text, reasoning and tool-call parts."""

    type: ClassVar[str] = "assistant-message"
    content: tuple[ContentPart, ...]
    usage: Usage | None = None
    finish_reason: str | None = None
    model: str | None = None
    request_seq: int | None = None
    """The ``seq`` of the last event the model's request was built from. Messages committed
    after it (pushed while the model was answering) are shown after this answer."""

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool calls in this message, in the order the model wrote them."""
        return tuple(p for p in self.content if isinstance(p, ToolCallPart))

    def _payload(self) -> dict[str, Any]:
        return {
            "content": content_to_dict(self.content),
            "usage": None if self.usage is None else self.usage.to_dict(),
            "finish_reason": self.finish_reason,
            "model": self.model,
            **({} if self.request_seq is None else {"request_seq": self.request_seq}),
        }

    @classmethod
    def _from_payload(cls, d: dict[str, Any]) -> dict[str, Any]:
        usage = d.get("usage")
        return {
            "content": content_from_dict(d["content"]),
            "usage": None if usage is None else Usage.from_dict(usage),
            "finish_reason": d.get("finish_reason"),
            "model": d.get("model"),
            "request_seq": d.get("request_seq"),
        }


@dataclass(frozen=True, kw_only=True)
class ToolResultEvent(Event):
    """A tool call finished (successfully or with an error result)."""

    type: ClassVar[str] = "tool-result"
    tool_call_id: str
    tool_name: str
    output: ToolOutput
    intent_id: str | None = None
    """The ``tool-execution-intent`` event committed before the call ran (durable
    sessions), or that a host reconciliation answered."""
    cache: dict[str, Any] | None = None
    """Set when the output came from the tool's cache, not a run: ``{"hit": True,
    "key": ..., "stored_at": ...}`` (the entry's key and when it was stored)."""

    def _payload(self) -> dict[str, Any]:
        from .messages import _output_to_dict

        out: dict[str, Any] = {
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "output": _output_to_dict(self.output),
        }
        if self.intent_id is not None:
            out["intent_id"] = self.intent_id
        if self.cache is not None:
            out["cache"] = self.cache
        return out

    @classmethod
    def _from_payload(cls, d: dict[str, Any]) -> dict[str, Any]:
        from .messages import _output_from_dict

        return {
            "tool_call_id": d["tool_call_id"],
            "tool_name": d["tool_name"],
            "output": _output_from_dict(d["output"]),
            "intent_id": d.get("intent_id"),
            "cache": d.get("cache"),
        }


# True while event_from_dict restores an event: stored data is taken as it was stored
# (an older agentkit may have written NaN or deeper nesting than is accepted today).
_RESTORING: contextvars.ContextVar[bool] = contextvars.ContextVar("agentkit_restoring_event", default=False)

_ENVELOPE_DEPTH = 8
"""Levels an event's own dict adds around the data it carries (event, content, part...)."""


def _check_json_object(data: Any, what: str) -> None:
    if not isinstance(data, dict):
        raise ConfigurationError(f"{what} data must be a dict, not {type(data).__name__}")
    if _RESTORING.get():
        return
    problem = json_problem(data)
    if problem is not None:
        raise ConfigurationError(
            f"{what} data is not JSON-serialisable: {problem}. Use plain JSON: "
            f"dicts with string keys, lists, strings, finite numbers, true, false and null, "
            f"nested at most {MAX_DEPTH} levels."
        )


def _storable_problem(event: Event) -> str | None:
    """None when ``event`` is strict JSON that a store gives back unchanged (see
    :func:`agentkit._json.json_problem`), else what is wrong. Internal.

    The events of a generation's hot path name the values in them that may hold arbitrary
    JSON (tool inputs, tool outputs, event data): only those are walked, since the rest of
    their dict is built by agentkit from typed fields. Any other event is checked whole."""
    stamp = event.timestamp
    if type(stamp) is not float and type(stamp) is not int or stamp - stamp != 0:
        return f"$.timestamp is {stamp!r}, not a finite number of seconds"
    values = _JSON_VALUES.get(type(event))
    if values is None:
        return json_problem(event.to_dict(), envelope=_ENVELOPE_DEPTH)
    for where, value in values(event):
        problem = json_problem(value)
        if problem is not None:
            return where + problem[1:]  # its path is relative to the value ("$...")
    return None


@dataclass(frozen=True, kw_only=True)
class RuntimeEvent(Event):
    """Something happened outside the conversation: a job finished, a timer fired, an MCP
    server sent a notification. ``runtime_type`` names it (``job-finished``,
    ``timer-fired``, ``mcp-notification``...), ``data`` is any JSON object.

    The model sees runtime events as context in a user turn, never as tool results.
    """

    type: ClassVar[str] = "runtime"
    runtime_type: str
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.runtime_type, str) or not self.runtime_type:
            raise ConfigurationError("a runtime event needs a non-empty string type")
        _check_json_object(self.data, f"runtime event {self.runtime_type!r}")

    def _payload(self) -> dict[str, Any]:
        return {"runtime_type": self.runtime_type, "data": self.data}

    @classmethod
    def _from_payload(cls, d: dict[str, Any]) -> dict[str, Any]:
        return {"runtime_type": d["runtime_type"], "data": d.get("data", {})}


@dataclass(frozen=True, kw_only=True)
class ContextReplacedEvent(Event):
    """The model context was replaced (context-overflow handling, compaction).

    The projection starts again from ``messages``; earlier events stay in the log.
    """

    type: ClassVar[str] = "context-replaced"
    messages: tuple[Message, ...]
    reason: str = ""

    def _payload(self) -> dict[str, Any]:
        return {"messages": [m.to_dict() for m in self.messages], "reason": self.reason}

    @classmethod
    def _from_payload(cls, d: dict[str, Any]) -> dict[str, Any]:
        return {
            "messages": tuple(Message.from_dict(m) for m in d["messages"]),
            "reason": d.get("reason", ""),
        }


@dataclass(frozen=True, kw_only=True)
class CompactionEvent(Event):
    """The events up to ``covered_through`` were summarised (``Session.compact``,
    overflow, auto-compaction, retention).

    The model then sees ``summary`` followed by the events after ``covered_through`` (the
    kept tail, which comes before this event in the log) and the events after this one.
    With retention the covered events are archived under this event's ``id`` and removed
    from the active log; nothing else changes.
    """

    type: ClassVar[str] = "compaction"
    summary: tuple[Message, ...]
    covered_through: str
    """The id of the last event the summary covers."""
    covered: int = 0
    """How many events of the log the summary covers."""
    reason: str = ""
    """``manual``, ``context-overflow``, ``auto`` or ``retention`` (or the caller's)."""

    def _payload(self) -> dict[str, Any]:
        return {
            "summary": [m.to_dict() for m in self.summary],
            "covered_through": self.covered_through,
            "covered": self.covered,
            "reason": self.reason,
        }

    @classmethod
    def _from_payload(cls, d: dict[str, Any]) -> dict[str, Any]:
        return {
            "summary": tuple(Message.from_dict(m) for m in d["summary"]),
            "covered_through": d["covered_through"],
            "covered": int(d.get("covered", 0)),
            "reason": d.get("reason", ""),
        }


@dataclass(frozen=True, kw_only=True)
class ControlEvent(Event):
    """A runtime control record (generation aborted, session aborted...). Not shown to
    the model."""

    type: ClassVar[str] = "control"
    action: str
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.action, str) or not self.action:
            raise ConfigurationError("a control event needs a non-empty string action")
        _check_json_object(self.data, f"control event {self.action!r}")

    def _payload(self) -> dict[str, Any]:
        return {"action": self.action, "data": self.data}

    @classmethod
    def _from_payload(cls, d: dict[str, Any]) -> dict[str, Any]:
        return {"action": d["action"], "data": d.get("data", {})}


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        UserMessageEvent,
        AssistantMessageEvent,
        ToolResultEvent,
        RuntimeEvent,
        ContextReplacedEvent,
        CompactionEvent,
        ControlEvent,
    )
}


def event_from_dict(data: dict[str, Any]) -> Event:
    """Restore an event from :meth:`Event.to_dict` output. Its data is taken as it is:
    it is checked when the event is committed to a session or stored."""
    etype = data.get("type")
    cls = EVENT_TYPES.get(etype)  # type: ignore[arg-type]
    if cls is None:
        raise ConfigurationError(
            f"unknown event type {etype!r}; known: {', '.join(sorted(EVENT_TYPES))}"
        )
    restoring = _RESTORING.set(True)
    try:
        return cls(
            id=data["id"],
            timestamp=data["timestamp"],
            seq=data.get("seq", 0),
            generation_id=data.get("generation_id"),
            **cls._from_payload(data),
        )
    except KeyError as exc:
        raise ConfigurationError(f"{etype} event is missing field {exc.args[0]!r}") from None
    finally:
        _RESTORING.reset(restoring)


def _call_inputs(event: Any) -> list[tuple[str, Any]]:
    return [(f"$.content[{i}].input", p.input) for i, p in enumerate(event.content) if isinstance(p, ToolCallPart)]


def _output_values(event: Any) -> list[tuple[str, Any]]:
    out = event.output
    values = [("$.output.metadata", out.metadata)] if out.metadata is not None else []
    if out.kind in ("json", "error-json"):
        values.append(("$.output.value", out.value))
    return values


# Per event class: where its arbitrary JSON values sit, and the values (see _storable_problem).
_JSON_VALUES: dict[type, Callable[[Any], list[tuple[str, Any]]]] = {
    UserMessageEvent: lambda event: [],
    AssistantMessageEvent: _call_inputs,
    ToolResultEvent: _output_values,
    RuntimeEvent: lambda event: [("$.data", event.data)],
    ControlEvent: lambda event: [("$.data", event.data)],
}
