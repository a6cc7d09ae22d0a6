"""Handoffs, the data: one agent handing its conversation over to another (private module;
:func:`handoff` is listed at the top level, :class:`Handoff` in :mod:`agentkit.tools`).

``Agent(model, handoffs=[billing, handoff(refunds, input_filter=...)])``: each entry is
offered to the model as a tool without input (``transfer_to_<name>``); calling it hands
the conversation over, and the target agent answers from then on. A plain agent in
``handoffs=`` means ``handoff(agent)``. What the loop does with them is
:mod:`agentkit.loop._handoffs`; this module holds the public data and how a
``handoffs=`` list is normalised: each entry checked, its tool name derived when not
given (its description when the tool is first offered), the names distinct.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeGuard, Union, cast

from ..errors import ConfigurationError
from ..messages import Message

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["Handoff", "InputFilter", "check_handoff_tools", "check_output_type", "handoff", "handoffs_of"]

InputFilter = Callable[[list[Message]], Sequence[Message]]
"""``input_filter(messages) -> messages``: what the target sees of the conversation up to
and including the handoff call and its result."""

AgentOrFactory = Union["Agent[Any, Any]", Callable[[], "Agent[Any, Any]"]]
"""A handoff's target: an agent, or a function returning it (made when first used)."""

_PREFIX = "transfer_to_"
_MAX_NAME = 64  # the shortest provider limit on tool names (OpenAI, Anthropic)
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_SHOWN_INSTRUCTIONS = 200


@dataclass(frozen=True, kw_only=True)
class Handoff:
    """One handoff an agent offers its model: the target ``agent``, the tool the model
    calls for it and what the target sees of the conversation. Made by :func:`handoff`
    (a plain agent in ``handoffs=`` is ``handoff(agent)``)."""

    agent: AgentOrFactory
    """The agent that answers after the handoff (its model, tools, system prompt, options),
    or a function returning it, called when the handoff is first used: a handoff back
    to an agent made later (``handoff(lambda: triage, tool_name="back_to_triage")``)."""
    tool_name: str | None = None
    """The handoff tool's name; None: derived (``transfer_to_<agent name>``, or
    ``transfer_to_agent`` for an agent without a name), as the handoffs list is built."""
    description: str | None = None
    """What the model reads about the tool; None: derived from the target's name and the
    start of its system prompt (:meth:`describe`)."""
    input_filter: InputFilter | None = None
    """``input_filter(messages) -> messages``: what the target sees of the conversation
    before it (up to and including the handoff's tool result); None: all of it. Later
    messages are shown as they are. It runs for every request of the target, on the
    session's projection: the log keeps everything."""

    def target_agent(self) -> Agent[Any, Any]:
        """The target agent (made by the function given for it, if one was)."""
        agent = self.agent
        if _is_agent(agent):
            return agent
        made = cast("Callable[[], object]", agent)()  # not an Agent: the function handoff() accepted
        if not _is_agent(made):
            raise ConfigurationError(
                f"the function behind handoff {self.tool_name!r} must return an Agent, not {type(made).__name__}"
            )
        return made

    @property
    def target(self) -> str:
        """The target's name in events and results: the agent's name, else the tool name."""
        name = _agent_name(self.target_agent())
        return name if name else (self.tool_name or "agent")

    def describe(self) -> str:
        """What the model reads about the handoff tool: the description given, or one made
        of the target's name and the start of its system prompt."""
        if self.description is not None:
            return self.description
        text = (f"Hand the conversation over to {self.target}: it answers the user from then on. "
                f"Call this when the request is for {self.target}.")
        system = getattr(self.target_agent().options, "system", None)
        if system:
            line = " ".join(system.split())
            if len(line) > _SHOWN_INSTRUCTIONS:
                line = line[: _SHOWN_INSTRUCTIONS - 1] + "…"
            text += f" Its instructions begin: {line}"
        return text


def handoff(agent: AgentOrFactory, *, tool_name: str | None = None, description: str | None = None,
            input_filter: InputFilter | None = None) -> Handoff:
    """A handoff to ``agent`` for ``Agent(..., handoffs=[...])``, with its tool's name and
    description when the derived ones do not suit, and an ``input_filter`` over what the
    target sees: ``input_filter(messages) -> messages`` (the conversation up to and
    including the handoff call's result). ``agent`` may be a function returning the
    agent, for a handoff back to one made later; it then needs ``tool_name``. Bad
    arguments raise ConfigurationError."""
    if not _is_agent(agent):
        if not callable(agent):
            raise ConfigurationError(
                f"a handoff's target must be an Agent (Agent(model, tools=..., ...)) or a function returning "
                f"one, not {type(agent).__name__}"
            )
        if tool_name is None:
            raise ConfigurationError(
                "a handoff to a function that returns an agent needs tool_name= (the name cannot be derived "
                "before the agent exists): handoff(lambda: agent, tool_name='transfer_to_...')"
            )
    if tool_name is not None and (not isinstance(tool_name, str) or not _NAME_RE.match(tool_name)):
        raise ConfigurationError(
            f"handoff tool_name must be 1-64 characters from A-Z a-z 0-9 _ -, got {tool_name!r}"
        )
    if description is not None and not isinstance(description, str):
        raise ConfigurationError(f"handoff description must be a str or None, not {type(description).__name__}")
    if input_filter is not None and not callable(input_filter):
        raise ConfigurationError(
            f"handoff input_filter must be a callable (messages) -> messages, not {type(input_filter).__name__}"
        )
    return Handoff(agent=agent, tool_name=tool_name, description=description, input_filter=input_filter)


def handoffs_of(value: Any) -> tuple[Handoff, ...]:
    """A ``handoffs=`` value as handoffs with their tool names filled in (None: no
    handoffs); ConfigurationError for anything but a list of agents and :func:`handoff`
    results, or for two handoffs with one tool name."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ConfigurationError(
            f"handoffs must be a list of Agents (or handoff(agent, ...) results), not {type(value).__name__}"
        )
    given = [item if isinstance(item, Handoff) else handoff(item) for item in value]
    unnamed = [h for h in given if h.tool_name is None and not _agent_name(h.agent)]
    out = [replace(h, tool_name=h.tool_name or _derived_name(h, unnamed)) for h in given]
    names = [h.tool_name for h in out]
    twice = sorted({n for n in names if names.count(n) > 1 and n is not None})
    if twice:
        raise ConfigurationError(
            f"two handoffs have the tool name {twice[0]!r}: give each a distinct "
            f"handoff(agent, tool_name=...) or a distinct Agent(name=...)"
        )
    return tuple(out)


def check_handoff_tools(handoffs: Sequence[Handoff], names: Sequence[str], output_type: Any) -> tuple[str, ...]:
    """The handoff tools' names; ConfigurationError when one is also the name of a tool
    the agent has (``names``), or when a target (made already) has another
    ``output_type`` than the generation's."""
    offered = tuple(h.tool_name for h in handoffs if h.tool_name is not None)
    clash = [n for n in offered if n in names]
    if clash:
        raise ConfigurationError(
            f"a tool is named {clash[0]!r}, the name of a handoff tool; rename the tool or give the "
            f"handoff another name (handoff(agent, tool_name=...))"
        )
    for h in handoffs:
        if _is_agent(h.agent):
            check_output_type(h, output_type)
    return offered


def check_output_type(h: Handoff, output_type: Any) -> None:
    """ConfigurationError when the target of ``h`` has an ``output_type`` other than the
    generation's (``output_type``): the result's type is the caller's, whoever answers."""
    own = h.target_agent().options.output_type
    if own is not None and own != output_type:
        raise ConfigurationError(
            f"the target of handoff {h.tool_name!r} has output_type {getattr(own, '__name__', own)!r}, but the "
            f"generation's is {getattr(output_type, '__name__', output_type)!r}: a result has one type whoever "
            f"answers; give the agents the same output_type (a target without one answers with the generation's)"
        )


def _is_agent(agent: object) -> TypeGuard[Agent[Any, Any]]:
    return all(hasattr(agent, a) for a in ("model", "tools", "options", "execution_context"))


def _agent_name(agent: Any) -> str | None:
    """The name of ``agent`` (None for a function that makes it, or an agent without one)."""
    name = getattr(getattr(agent, "options", None), "name", None)
    return name if isinstance(name, str) and name else None


def _derived_name(h: Handoff, unnamed: list[Handoff]) -> str:
    name = _agent_name(h.agent)
    if name is None:
        suffix = "agent" if len(unnamed) == 1 else f"agent_{unnamed.index(h) + 1}"
    else:
        suffix = _UNSAFE.sub("_", name).strip("_") or "agent"
    return (_PREFIX + suffix)[:_MAX_NAME]
