"""Handoffs in the step loop (private): which agent answers, its handoff tools, and what
its requests show.

One :class:`Handoffs` per generation. The agent that answers is the session's own
(the generation's options), unless the log says the conversation was handed over: the
last ``handoff`` control event whose call has a result that is not an error (folded as
the log grows: :class:`~agentkit.context._handoffs.HandoffFold`, one per event log)
names the path from the session's agent on (each hop a handoff tool name and its call
id), and the agent at its end answers. So a session reopened in another process goes on with the agent it was handed
to, and a handoff call that was denied or blocked by a hook hands nothing over.

Each handoff of the answering agent is offered as a tool without input (built once per
handoff, acting on the current generation through a context variable). Its call passes
that agent's approval policy and hooks like any call; when it runs it commits the
``handoff`` event (before its own result: the result confirms it) and answers
``Transferred to <target>.``. Only the first handoff call of an answer is made; the
others get an error result. Its reconcile probe answers ``executed`` when the call's
handoff event is in the log (a crash came between the event and the result), else
``not-executed`` (the call runs again). After the step, the loop asks
:meth:`Handoffs.followed` for the target's options and goes on with them: the target's
model, tools, system prompt and options, with what belongs to the caller carried over
(the event sink, deps, the generation's ``output_type``, and where the target sets none,
the approver and ``redact=``).

The target's requests show the conversation through the ``input_filter`` of each hop
on the path, in order: each one gets the messages up to and including its handoff's
tool result and returns what the target sees of them.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..context._handoffs import HANDOFF, HandoffFold
from ..context._invariants import check_messages
from ..errors import ConfigurationError, HookError
from ..events import AssistantMessageEvent, ControlEvent, Event
from ..messages import Message, ToolCallPart, ToolOutput, ToolResultPart
from ..models.base import ToolSpec
from ..options import LoopOptions, check_deps
from ..tools._handoffs import Handoff, check_output_type
from ..tools.base import Tool, ToolContext, ToolRegistry
from ._generation_tools import bound
from ._host import LoopHost

__all__ = ["Handoffs", "Hop"]

_NO_INPUT = {"type": "object", "properties": {}, "additionalProperties": False}


@dataclass(frozen=True)
class Hop:
    """One handoff on the path from the session's agent to the one answering."""

    handoff: Handoff
    tool_call_id: str


def _follow(root: Sequence[Handoff], root_name: str | None, event: ControlEvent) -> tuple[Hop, ...]:
    """The hops ``event``'s path names, from the handoffs ``root`` on."""
    path = event.data.get("path")
    if not isinstance(path, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in path
    ):
        raise ConfigurationError(
            f"handoff event {event.id!r} has no valid path (a list of [tool name, tool call id] pairs): "
            f"the log was not written by agentkit"
        )
    hops: list[Hop] = []
    current, name = tuple(root), root_name
    for tool_name, call_id in path:
        found = next((h for h in current if h.tool_name == tool_name), None)
        if found is None:
            route = " -> ".join(p[0] for p in path)
            raise ConfigurationError(
                f"this session's log says the conversation was handed over through {route}, but "
                f"{'agent ' + repr(name) if name else 'the agent at that point'} offers no handoff "
                f"{tool_name!r}: open the session with the agent it started with (the one whose "
                f"handoffs lead there)"
            )
        hops.append(Hop(found, call_id))
        current, name = found.target_agent().options.handoffs, found.target
    return tuple(hops)


class Handoffs:
    """One generation's handoffs (the module docstring)."""

    def __init__(self, host: LoopHost, base: LoopOptions) -> None:
        self.host = host
        self.base = base
        self.event: ControlEvent | None = None  # the handoff that made the answering agent answer
        self.hops = self._resolve()
        self._handed = False  # a handoff tool committed a handoff event in this generation

    def _hidden(self, ev: Event) -> bool:
        gid = ev.generation_id
        return gid is not None and self.host.ledger.hidden(gid)

    def _resolve(self) -> tuple[Hop, ...]:
        if not self.base.handoffs:  # a session without handoffs answers itself, whatever its log says
            return ()
        fold = _fold(self.host)
        event = fold.last(self._hidden)
        if event is not None and self._answer_open(event):
            # other calls of the answer that handed over wait (for an approval): its source
            # settles them with its own tools and gate, then the target answers
            event = fold.last(self._hidden, before=event)
        self.event = event
        return () if event is None else _follow(self.base.handoffs, self.base.name, event)

    def _answer_open(self, event: ControlEvent) -> bool:
        """True when the answer that made handoff ``event`` still has calls without results."""
        pending = self.host.project(for_model=False)[1]
        if not pending:
            return False
        call_id = event.data.get("tool_call_id")
        for ev in reversed(self.host.events):
            if isinstance(ev, AssistantMessageEvent):
                ids = {p.tool_call_id for p in ev.content if isinstance(p, ToolCallPart)}
                if call_id in ids:
                    return not ids.isdisjoint(pending)
        return False

    def options(self) -> LoopOptions:
        """The answering agent's loop options."""
        if not self.hops:
            return self.base
        agent, base = self.hops[-1].handoff.target_agent(), self.base
        own = replace(agent.options, output_type=base.output_type)  # the result's type is the caller's
        if own.approver is None and base.approver is not None:
            own = replace(own, approver=base.approver)
        if own.redact is None and base.redact is not None:
            own = replace(own, redact=base.redact)
        if agent.deps_type is not None:
            check_deps(base.deps, agent.deps_type)
        context = agent.execution_context if agent.execution_context is not None else base.execution_context
        return LoopOptions.of(own, model=agent.model, tools=ToolRegistry(agent.tools), execution_context=context,
                              emit=base.event_sink(), deps=base.deps)

    def offer(self, opts: LoopOptions) -> tuple[LoopOptions, tuple[ToolSpec, ...]]:
        """``opts`` with the answering agent's handoff tools added (to a copy of its
        registry), and their specs (always shown, also under tool search)."""
        if not opts.handoffs:
            return opts, ()
        for h in opts.handoffs:  # a target's deps and output type, before its source's first request
            target = h.target_agent()
            if target.deps_type is not None:
                check_deps(self.base.deps, target.deps_type)
            check_output_type(h, self.base.output_type)
        registry = ToolRegistry(opts.tools.values())
        tools = [_handoff_tool(h) for h in opts.handoffs]
        for t in tools:
            registry.add(t)
        return replace(opts, tools=registry), tuple(t.spec for t in tools)

    def followed(self, *, settled: bool = False) -> LoopOptions | None:
        """The target's options after a handoff of this generation was confirmed (its
        result committed), else None. ``settled``: calls left open were just settled (a
        handoff approved since, or one a crash interrupted that the probe found made)."""
        if not (self._handed or settled):
            return None
        self._handed = False
        before = None if self.event is None else self.event.id
        hops = self._resolve()
        if (None if self.event is None else self.event.id) == before:
            return None  # its result was an error (an after_tool_call hook): nothing handed over
        self.hops = hops
        return self.options()

    def last(self) -> dict[str, Any]:
        """The data of the handoff that made the answering agent answer."""
        assert self.event is not None
        return self.event.data

    def view(self, messages: list[Message]) -> list[Message]:
        """What the answering agent's request shows: each hop's ``input_filter`` over the
        messages up to and including its handoff's result, in path order."""
        filtered = False
        for hop in self.hops:
            fn = hop.handoff.input_filter
            end = None if fn is None else _after_result(messages, hop.tool_call_id)
            if fn is None or end is None:
                continue  # no filter, or its handoff is no longer shown (compacted)
            try:
                kept = fn(list(messages[:end]))
            except Exception as exc:  # a user's bug, named (as a raising hook is)
                raise HookError(f"the input_filter of handoff {hop.handoff.tool_name!r} raised "
                                f"{type(exc).__name__}: {exc}", hook="input_filter") from exc
            if not isinstance(kept, (list, tuple)) or not all(isinstance(m, Message) for m in kept):
                raise ConfigurationError(
                    f"the input_filter of handoff {hop.handoff.tool_name!r} must return a list of Message "
                    f"objects, not {type(kept).__name__}"
                )
            messages, filtered = [*kept, *messages[end:]], True
        if filtered:
            check_messages(messages, what=f"the messages the input_filter of {self.hops[-1].handoff.tool_name!r} left")
        return messages

    # -- the handoff tools -----------------------------------------------------------------

    def current(self) -> contextlib.AbstractContextManager[None]:
        """Make this the generation the handoff tools act on (see ``bound``)."""
        return bound(_CURRENT, self)

    def probe(self, call_id: str) -> Literal["executed", "not-executed"]:
        """The handoff tools' reconcile probe: after a crash between a handoff's event and
        its result, the event says it was made."""
        return "executed" if _fold(self.host).made(call_id) else "not-executed"

    def transfer(self, h: Handoff, call_id: str) -> ToolOutput | str:
        """A handoff call that passed the gate: commit its event, unless another handoff
        call comes before it in the same answer."""
        events, hops = self.host.events, self.hops  # the path to the agent that made the call
        source = hops[-1].handoff.target_agent().options if hops else self.base
        first = _first_handoff_call(events, call_id, {x.tool_name for x in source.handoffs})
        if first is not None and first.tool_call_id != call_id:
            return ToolOutput.error(
                f"only one handoff at a time: {first.tool_name} comes first in this answer; this call was not made"
            )
        target = h.target_agent()
        back = next((i for i, hop in enumerate(hops) if hop.handoff.target_agent() is target), None)
        # back at an agent already on the path: the path is the one that first led there,
        # so a conversation going back and forth keeps a short path
        route = list(hops) if back is None else list(hops[: back + 1])
        path = [[hop.handoff.tool_name, hop.tool_call_id] for hop in route]
        if back is None:
            path.append([h.tool_name, call_id])
        event = ControlEvent(action=HANDOFF, data={
            "source": hops[-1].handoff.target if hops else self.base.name, "target": h.target,
            "tool_name": h.tool_name, "tool_call_id": call_id, "path": path,
        })
        self.host.decide_in_turn(lambda: [] if _fold(self.host).made(call_id) else [event])
        self._handed = True
        return f"Transferred to {h.target}."


_CURRENT: contextvars.ContextVar[Handoffs | None] = contextvars.ContextVar("agentkit_handoffs", default=None)


def _current(h: Handoff) -> Handoffs:
    handoffs = _CURRENT.get()
    if handoffs is None:
        raise RuntimeError(f"the handoff tool {h.tool_name!r} runs only inside a generation that offers it")
    return handoffs


@functools.lru_cache(maxsize=256)
def _handoff_tool(h: Handoff) -> Tool:
    """The tool a handoff is offered as: built once per handoff (validating a schema costs
    about a millisecond), acting on the generation that runs it."""
    def transfer(ctx: ToolContext) -> ToolOutput | str:
        return _current(h).transfer(h, ctx.tool_call_id)

    def probe(input: dict[str, Any], ctx: ToolContext) -> Literal["executed", "not-executed"]:
        return _current(h).probe(ctx.tool_call_id)

    assert h.tool_name is not None  # filled in by handoffs_of
    return Tool(name=h.tool_name, description=h.describe(), input_schema=_NO_INPUT, fn=transfer,
                read_only=True, context_param="ctx", reconcile=probe)


def _first_handoff_call(events: Sequence[Event], call_id: str, names: set[str | None]) -> ToolCallPart | None:
    """The first handoff call of the answer that holds call ``call_id``."""
    for ev in reversed(events):
        if isinstance(ev, AssistantMessageEvent):
            calls = [p for p in ev.content if isinstance(p, ToolCallPart)]
            if any(c.tool_call_id == call_id for c in calls):
                return next((c for c in calls if c.tool_name in names), None)
    return None


_FOLDS: weakref.WeakKeyDictionary[LoopHost, HandoffFold] = weakref.WeakKeyDictionary()
_FOLDS_LOCK = threading.Lock()


def _fold(host: LoopHost) -> HandoffFold:
    """The handoff fold of ``host``'s log, caught up (one per event log, kept while it lives)."""
    with _FOLDS_LOCK:
        fold = _FOLDS.get(host)
        if fold is None:
            fold = _FOLDS[host] = HandoffFold()
    return fold.catch_up(host.events)


def _after_result(messages: Sequence[Message], call_id: str) -> int | None:
    """The index after the tool message holding call ``call_id``'s result, or None."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role == "tool" and any(isinstance(p, ToolResultPart) and p.tool_call_id == call_id for p in m.content):
            return i + 1
    return None
