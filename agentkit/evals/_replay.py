"""Replay: a stored conversation's user turns run again against a model, tool results
served from the record, and a comparison per turn (private module: the names are
:func:`agentkit.replay` and those :mod:`agentkit.evals` lists).

Each user message of the original is one turn. The turns are pushed, in order, to one
new Session (in memory, or in ``store=`` as a new session) and each is generated; a turn
the original did not answer before its next user message is pushed without a
generation, as it was. A tool call the replayed model makes is answered by the replay's
``before_tool_call`` hook, which runs first: a call with the same tool name and the same
input (equal as JSON) as a call the original made in that turn gets that call's
recorded result (repeated identical calls take the recorded results in order), in every
mode; ``tools=`` decides only the others. Only user messages are replayed (runtime
events are not pushed again); a rejected transactional generation's events are no turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from threading import Lock
from typing import Any, Literal

from typing_extensions import Unpack

from ..errors import ConfigurationError
from ..events import AssistantMessageEvent, Event, ToolResultEvent, UserMessageEvent, new_id
from ..hooks import HookChain, Hooks
from ..messages import ToolCallPart, ToolOutput, text_of
from ..models.base import ChatModel
from ..options import GenerationKwargs, GenerationOptions
from ..results import ToolCallRecord
from ..session._foreign import tools_from
from ..session._session import Session
from ..stores.base import EventStore, StoredSession, validate_session_id
from ..tools.base import Tool, ToolContext, ToolDecision, ToolRegistry
from ..transactions._ledger import TransactionLedger
from ..usage import Usage

__all__ = ["ReplayResult", "ReplaySide", "ReplayTurn", "ToolMode", "replay"]

ToolMode = Literal["recorded", "live", "error"]
"""What a replay does with a tool call no recorded result matches: ``"recorded"`` runs
no tool (the model reads an error saying no recorded result matches), ``"live"`` runs
the real tool, ``"error"`` answers with an error the model reads."""

_MODES: tuple[str, ...] = ("recorded", "live", "error")

_NO_RESULT = ToolOutput.error("the record holds no result for this call")
"""The output of an original call whose result is not in the record (never served)."""


def _key(value: Any) -> str:
    """``value`` as canonical JSON: inputs are the same when their keys are equal."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass(frozen=True, kw_only=True)
class ReplaySide:
    """One side of a turn (the original's, or the replay's): what the model answered."""

    text: str
    """The turn's final answer: the text of its last assistant message."""
    tool_calls: tuple[ToolCallRecord, ...]
    """The turn's tool calls in the order the model wrote them, with their results."""
    usage: Usage
    """Tokens of the turn's model calls, summed."""
    finish_reason: str | None
    """The provider's finish reason of the turn's last answer (None: no answer)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (each tool call's output as text)."""
        return {
            "text": self.text,
            "tool_calls": [_call_dict(c) for c in self.tool_calls],
            "usage": self.usage.to_dict(),
            "finish_reason": self.finish_reason,
        }


def _call_dict(call: ToolCallRecord) -> dict[str, Any]:
    return {"tool_name": call.tool_name, "input": call.input, "output": call.output.as_text(),
            "is_error": call.output.is_error}


def _calls_key(side: ReplaySide) -> list[tuple[str, str]]:
    return [(c.tool_name, _key(c.input)) for c in side.tool_calls]


@dataclass(frozen=True, kw_only=True)
class ReplayTurn:
    """One user message of the original and what each side answered to it."""

    index: int
    """The turn's position, 0 for the first user message."""
    prompt: str
    """The user message's text."""
    original: ReplaySide
    replayed: ReplaySide
    unmatched: tuple[ToolCallRecord, ...] = ()
    """The replayed calls no recorded result matched: answered as ``tools=`` says."""

    @property
    def same(self) -> bool:
        """True when the answer text and the tool calls (names and inputs, in order)
        equal the original's."""
        return (self.original.text == self.replayed.text
                and _calls_key(self.original) == _calls_key(self.replayed))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"index": self.index, "prompt": self.prompt, "same": self.same,
                "original": self.original.to_dict(), "replayed": self.replayed.to_dict(),
                "unmatched": [_call_dict(c) for c in self.unmatched]}


@dataclass(frozen=True, kw_only=True)
class ReplayResult:
    """What :func:`replay` returns: one :class:`ReplayTurn` per user message."""

    turns: tuple[ReplayTurn, ...]
    tools: ToolMode
    """The mode the unmatched calls were answered in."""
    session_id: str | None = None
    """The id of the session the replay was written to (``store=``), else None."""
    events: tuple[Event, ...] = field(default=(), repr=False)
    """The replay's own events."""

    @property
    def same(self) -> bool:
        """True when every turn is the same."""
        return all(t.same for t in self.turns)

    @property
    def differing(self) -> tuple[ReplayTurn, ...]:
        """The turns that are not the same."""
        return tuple(t for t in self.turns if not t.same)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``agentkit replay --json`` prints)."""
        return {"same": self.same, "tools": self.tools, "session_id": self.session_id,
                "turns": [t.to_dict() for t in self.turns]}


def _side(events: Iterable[Event]) -> ReplaySide:
    """What the model answered in ``events`` (one turn's, after its user message)."""
    calls: list[ToolCallPart] = []
    results: dict[str, ToolOutput] = {}
    text, usage, finish = "", Usage(), None
    for event in events:
        if isinstance(event, AssistantMessageEvent):
            calls.extend(event.tool_calls)
            text, finish = text_of(event.content), event.finish_reason
            usage = usage + (event.usage or Usage())
        elif isinstance(event, ToolResultEvent):
            results[event.tool_call_id] = event.output
    records = tuple(ToolCallRecord(tool_call_id=c.tool_call_id, tool_name=c.tool_name, input=c.input,
                                   output=results.get(c.tool_call_id, _NO_RESULT)) for c in calls)
    return ReplaySide(text=text, tool_calls=records, usage=usage, finish_reason=finish)


def _turns(events: Sequence[Event]) -> list[tuple[UserMessageEvent, list[Event]]]:
    """Each visible user message with the events after it, up to the next one."""
    ledger = TransactionLedger(events)
    turns: list[tuple[UserMessageEvent, list[Event]]] = []
    for event in events:
        if event.generation_id is not None and ledger.hidden(event.generation_id):
            continue  # a rejected or interrupted transaction's: the model never saw it
        if isinstance(event, UserMessageEvent):
            turns.append((event, []))
        elif turns:
            turns[-1][1].append(event)
    return turns


class _Record:
    """The replay's tool layer: the current turn's recorded results, served to the calls
    that match them (its :meth:`decide` is the replay's first ``before_tool_call``)."""

    def __init__(self, mode: ToolMode) -> None:
        self.mode = mode
        self._lock = Lock()  # calls may be decided on the tool threads at once
        self._left: list[ToolCallRecord] = []
        self.served: set[str] = set()

    def start(self, original: ReplaySide) -> None:
        """Serve ``original``'s recorded results from now on (the next turn's)."""
        with self._lock:
            self._left = [c for c in original.tool_calls if c.output is not _NO_RESULT]

    def decide(self, call: ToolCallPart, ctx: ToolContext) -> ToolDecision | None:
        key = _key(call.input)
        with self._lock:
            for i, recorded in enumerate(self._left):
                if recorded.tool_name == call.tool_name and _key(recorded.input) == key:
                    del self._left[i]
                    self.served.add(call.tool_call_id)
                    return ToolDecision.respond(recorded.output)
        if self.mode == "live":
            return None
        if self.mode == "recorded":
            return ToolDecision.respond(ToolOutput.error(
                f"no recorded result matches this call: the original turn made no call to {call.tool_name!r} "
                f"with this input, and this replay (tools='recorded') runs no tool"))
        return ToolDecision.respond(ToolOutput.error(
            f"tool {call.tool_name!r} was not called with this input in the original turn; this replay "
            f"(tools='error') answers such calls with this error instead of running the tool"))


def _stand_in(name: str) -> Tool:
    """A tool the record names but the replay was given no definition of: the model is
    shown it (any object input); only the record answers it."""

    def missing(**_: Any) -> ToolOutput:
        return ToolOutput.error(f"the replay has no live tool {name!r} to run (pass it in live_tools=), and no "
                                f"recorded result matches this call")

    return Tool(name=name, description=f"{name} (a tool of the recorded session; its results come from the record)",
                input_schema={"type": "object"}, fn=missing)


def _source(source: Any) -> tuple[tuple[Event, ...], Session[Any, Any] | None]:
    """The original's events (every one, a Session's archived events included) and the
    Session they came from, if any."""
    if isinstance(source, Session):
        return tuple(source.history()), source
    if isinstance(source, StoredSession):
        return source.events, None
    if source is None:
        raise ConfigurationError("replay() got None: store.load(session_id) returns None for a session the store "
                                 "does not hold; `agentkit sessions --store DIR` lists them")
    if isinstance(source, (str, bytes)) or not isinstance(source, Iterable):
        raise ConfigurationError(f"replay() takes a Session, a StoredSession (store.load(id)) or a list of events, "
                                 f"not {type(source).__name__}")
    events = tuple(source)
    wrong = [type(e).__name__ for e in events if not isinstance(e, Event)]
    if wrong:
        raise ConfigurationError(f"replay() takes a list of agentkit events; it holds {wrong[0]} objects")
    return events, None


def _target(store: EventStore | None, session_id: str | None) -> str | None:
    """The id the replay is written under (checked: new in ``store``), or None."""
    if store is None:
        if session_id is not None:
            raise ConfigurationError(f"replay(session_id={session_id!r}) needs store=: the replay is written as "
                                     f"that session in that store")
        return None
    if not isinstance(store, EventStore):
        raise ConfigurationError(f"store must be an EventStore (e.g. FileEventStore(dir)), not {type(store).__name__}")
    session_id = validate_session_id(session_id) if session_id is not None else f"replay-{new_id()}"
    if store.load(session_id) is not None:
        raise ConfigurationError(f"the store already holds a session {session_id!r}; a replay is written as a new "
                                 f"session: give another session_id (or none, for a new id)")
    return session_id


def _tools(given: Iterable[Any] | None, origin: Session[Any, Any] | None, names: Iterable[str]) -> list[Tool]:
    """The real tools (given, or the original Session's), plus a stand-in for each
    recorded tool name none of them has."""
    if given is not None:
        registry = ToolRegistry(tools_from(given))  # as Session(tools=...) takes them: LangChain tools too
    else:
        registry = ToolRegistry(origin._registry.values() if origin is not None else ())
    return [*registry.values(), *(_stand_in(n) for n in dict.fromkeys(names) if n not in registry)]


def _base_options(origin: Session[Any, Any] | None, record: _Record) -> GenerationOptions:
    """The replay session's options: the original Session's (or the defaults) without
    approvals (a recorded call is answered, not asked about again), tool calls one at a
    time (repeated identical calls take their recorded results in order), and the
    record's hook before any other."""
    base = origin._options if origin is not None else GenerationOptions()
    mine = HookChain.of(Hooks(before_tool_call=record.decide))
    return replace(base, hooks=mine + base.hooks, approval=None, approver=None, tool_execution="sequential")


def replay(
    session_or_events: Session[Any, Any] | StoredSession | Iterable[Event], *, model: ChatModel | str,
    tools: ToolMode = "recorded", live_tools: Iterable[Any] | None = None, store: EventStore | None = None,
    session_id: str | None = None, on_progress: Callable[[int, int], Any] | None = None,
    **options: Unpack[GenerationKwargs],
) -> ReplayResult:
    """Run the user turns of a stored conversation again against ``model`` and compare
    each turn with the original.

    ``session_or_events`` is a :class:`~agentkit.Session` (its whole history; its tools
    and options are the replay's defaults), a stored session (``store.load(id)``) or a
    list of events (``store.load(id).events``, ``session.events``). The turns go, in
    order, to one new Session: in memory, or written as session ``session_id`` (a new id
    when None) in ``store``, which must not hold it yet.

    A tool call with the same name and input as a call the original made in that turn
    gets the recorded result (the tool does not run), whatever ``tools`` says;
    ``tools`` decides the other calls: ``"recorded"`` runs no tool (the model reads an
    error saying no recorded result matches), ``"live"`` runs the real tool from
    ``live_tools`` (default: the Session's tools), ``"error"`` answers with an error the
    model reads. ``live_tools`` are also what the model is shown (a recorded tool name
    none of them has is shown with any object as input). The replay asks for no
    approvals and runs one call at a time. ``on_progress(done, total)`` is called after
    each turn; ``options`` are generation options (``system``, ``max_steps``...) over
    the Session's.
    """
    if tools not in _MODES:
        raise ConfigurationError(f"tools must be 'recorded', 'live' or 'error', not {tools!r}")
    events, origin = _source(session_or_events)
    turns = _turns(events)
    originals = [_side(after) for _, after in turns]
    target = _target(store, session_id)
    record = _Record(tools)
    registry = _tools(live_tools, origin, (c.tool_name for side in originals for c in side.tool_calls))
    extra: dict[str, Any] = {"deps": origin._deps} if origin is not None and origin._deps is not None else {}
    replayed = Session._create(model, base_options=_base_options(record=record, origin=origin), tools=registry,
                               store=store, session_id=target, **extra, **options)
    out: list[ReplayTurn] = []
    with replayed:
        for index, ((user, after), original) in enumerate(zip(turns, originals, strict=True)):
            record.start(original)
            start = len(replayed.events)
            replayed.push_user_message(list(user.content))
            if any(isinstance(e, AssistantMessageEvent) for e in after):
                replayed.generate()
            side = _side(replayed.events[start + 1:])
            unmatched = tuple(c for c in side.tool_calls if c.tool_call_id not in record.served)
            out.append(ReplayTurn(index=index, prompt=text_of(user.content), original=original, replayed=side,
                                  unmatched=unmatched))
            if on_progress is not None:
                on_progress(index + 1, len(turns))
        return ReplayResult(turns=tuple(out), tools=record.mode, session_id=target, events=replayed.events)
