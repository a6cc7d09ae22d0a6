"""The structural rules every conversation sent to a model must keep.

Providers reject a conversation that breaks these, so a history given from outside
(``run_agent(messages=...)``, ``Session(events=...)``, a replacement returned by
``on_context_overflow``) is checked before any model call:

1. the first message is a user message (system text goes in ``system=``);
2. a tool message follows an assistant message with tool calls, and carries results for
   those calls only, at most one per call;
3. an assistant message is not empty, and its tool call ids are unique.

Tool calls left without results (an interrupted run) are allowed: the projection closes
them with an "interrupted" error result, as it does for a crashed generation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..errors import ConfigurationError
from ..events import (
    AssistantMessageEvent,
    CompactionEvent,
    ContextReplacedEvent,
    Event,
    RuntimeEvent,
    ToolResultEvent,
    UserMessageEvent,
)
from ..messages import ContentPart, Message, ToolCallPart, ToolResultPart

__all__ = ["check_events", "check_messages"]


class _Checker:
    def __init__(self, what: str) -> None:
        self.what = what
        self.started = False
        self.open: set[str] | None = None  # call ids of the last assistant message, if it had any
        self.answered: set[str] = set()
        self.after_tool_message = False

    def fail(self, index: int, rule: str) -> None:
        raise ConfigurationError(f"{self.what}[{index}] breaks a conversation rule: {rule}")

    def user(self, index: int, *, closes: bool = True) -> None:
        self.started = True
        if closes:
            self.open = None

    def assistant(self, index: int, content: tuple[ContentPart, ...]) -> None:
        if not self.started:
            self.fail(index, "the first message must be a user message (put system text in system=)")
        if not content:
            self.fail(index, "an assistant message must not be empty")
        ids = [p.tool_call_id for p in content if isinstance(p, ToolCallPart)]
        if len(set(ids)) != len(ids):
            self.fail(index, "the tool call ids of one assistant message must be unique")
        self.open = set(ids) or None
        self.answered = set()

    def result(self, index: int, call_id: str) -> None:
        if not self.started:
            self.fail(index, "the first message must be a user message, not a tool result")
        if self.open is None:
            self.fail(index, f"tool result {call_id!r} does not follow an assistant message with tool calls")
            return
        if call_id not in self.open:
            self.fail(index, f"tool result {call_id!r} answers no tool call of the assistant message before it")
        if call_id in self.answered:
            self.fail(index, f"tool call {call_id!r} has more than one result")
        self.answered.add(call_id)

    def messages(self, messages: Iterable[Message], offset: int = 0) -> None:
        for i, m in enumerate(messages, offset):
            if not isinstance(m, Message):
                raise ConfigurationError(f"{self.what}[{i}] must be an agentkit Message, not {type(m).__name__}")
            if m.role == "system":
                self.fail(i, "a system message cannot be part of the history; pass it as system=")
            elif m.role == "user":
                self.user(i)
            elif m.role == "assistant":
                self.assistant(i, m.content)
            else:
                for part in m.content:
                    if isinstance(part, ToolResultPart):
                        self.result(i, part.tool_call_id)
                self.open = None  # a later tool message is not "right after" the calls


def check_messages(messages: Sequence[Message], *, what: str = "messages") -> None:
    """Raise :class:`ConfigurationError` naming the index and the rule a message breaks."""
    _Checker(what).messages(messages)


def check_events(events: Sequence[Event], *, what: str = "events") -> None:
    """The same rules for seed events. Results of one assistant message may come as
    several tool-result events, and a user message or runtime event between a call and
    its result is allowed (the projection shows it after the results)."""
    checker = _Checker(what)
    for i, ev in enumerate(events):
        if isinstance(ev, (UserMessageEvent, RuntimeEvent)):
            checker.user(i, closes=False)
        elif isinstance(ev, AssistantMessageEvent):
            checker.assistant(i, ev.content)
        elif isinstance(ev, ToolResultEvent):
            checker.result(i, ev.tool_call_id)
        elif isinstance(ev, ContextReplacedEvent):
            checker = _Checker(f"{what}[{i}].messages")
            checker.messages(ev.messages)
            checker.what = what
        elif isinstance(ev, CompactionEvent):  # the summary; the kept tail came before it
            _Checker(f"{what}[{i}].summary").messages(ev.summary)

