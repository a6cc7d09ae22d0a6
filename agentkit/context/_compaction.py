"""Compaction, pure logic: where a summary may end, what it becomes, when to compact.

No I/O. :func:`compaction_boundary` picks the events a summary covers so that a tool
call is never separated from its results and an open tool call is never covered;
:func:`summary_messages` turns what a compactor returned into the messages the model
sees; :class:`Threshold` and :class:`Retention` are the settings that trigger it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..cancel import CancelToken
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
from ..messages import Message, TextPart

__all__ = [
    "CONVERSATION_EVENTS",
    "DEFAULT_KEEP_LAST",
    "Compactor",
    "Retention",
    "Threshold",
    "compaction_boundary",
    "conversation_events_since_reset",
    "estimate_tokens",
    "summary_messages",
]

DEFAULT_KEEP_LAST = 8
"""Conversation events kept verbatim after a summary when nothing else says how many."""

CONVERSATION_EVENTS = (UserMessageEvent, AssistantMessageEvent, ToolResultEvent, RuntimeEvent)
"""The event types ``keep_last`` counts."""
_RESETS = (CompactionEvent, ContextReplacedEvent)


class Compactor(Protocol):
    """Summarises the messages a compaction covers: returns the summary text, or the
    messages (user/assistant/tool, no system) that stand in for them."""

    def __call__(self, messages: list[Message], *, reason: str, cancel: CancelToken) -> str | Sequence[Message]:
        ...


def _non_negative_int(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigurationError(f"{what} must be an int >= 0, got {value!r}")
    return value


@dataclass(frozen=True, kw_only=True)
class Threshold:
    """``auto_compact=Threshold(tokens=...)``: before a model request whose estimated
    input passes ``tokens``, compact, keeping the last ``keep_last`` conversation events."""

    tokens: int
    keep_last: int = DEFAULT_KEEP_LAST

    def __post_init__(self) -> None:
        if _non_negative_int(self.tokens, "Threshold tokens") < 1:
            raise ConfigurationError(f"Threshold tokens must be >= 1, got {self.tokens!r}")
        _non_negative_int(self.keep_last, "Threshold keep_last")


@dataclass(frozen=True, kw_only=True)
class Retention:
    """``Session(store=..., retention=Retention(max_events=..., keep_last=...))``: after a
    generation, when the active log holds more than ``max_events`` events, compact
    (keeping the last ``keep_last`` conversation events), archive the covered events
    under the compaction event's id and remove them from the active log."""

    max_events: int
    keep_last: int = DEFAULT_KEEP_LAST

    def __post_init__(self) -> None:
        if _non_negative_int(self.max_events, "Retention max_events") < 2:
            raise ConfigurationError(f"Retention max_events must be >= 2, got {self.max_events!r}")
        if _non_negative_int(self.keep_last, "Retention keep_last") >= self.max_events:
            raise ConfigurationError(
                f"Retention keep_last ({self.keep_last}) must be smaller than max_events "
                f"({self.max_events}): otherwise a compaction would keep everything"
            )


def compaction_boundary(
    events: Sequence[Event], keep_last: int, *, pinned: Callable[[Event], bool] | None = None,
    hidden: Callable[[Event], bool] | None = None,
) -> int | None:
    """How many leading ``events`` a summary may cover so that at least the last
    ``keep_last`` conversation events (user, assistant, tool-result, runtime) stay, or
    None when nothing can be covered.

    The kept tail starts after the last ``context-replaced``/``compaction`` event (when
    fewer than ``keep_last`` came after it, those are kept and the earlier summary is
    covered: a summary of the summary), never
    between a tool call and its results (the boundary moves back to the assistant message
    that made the call), never after a call still without a result, and never after an
    event ``pinned`` says must stay visible (e.g. an event of an unfinished transaction).
    A call in an event ``hidden`` says the model does not see (a rejected or interrupted
    transaction's) holds nothing back: it never gets a result, and nobody sees it open.
    """
    _non_negative_int(keep_last, "keep_last")
    n = len(events)
    floor = 0  # the first index the kept tail may start at
    for i in range(n - 1, -1, -1):
        if isinstance(events[i], _RESETS):
            floor = i + 1
            break
    # the candidate: keep the last keep_last conversation events
    b, seen = n, 0
    while b > floor and seen < keep_last:
        b -= 1
        if isinstance(events[b], CONVERSATION_EVENTS):
            seen += 1
    # move back over calls whose results are not all in the covered part
    made_at: dict[str, int] = {}
    limit = n
    for i, ev in enumerate(events):
        if isinstance(ev, AssistantMessageEvent) and (hidden is None or not hidden(ev)):
            for call in ev.tool_calls:
                made_at[call.tool_call_id] = i
        if pinned is not None and pinned(ev):
            limit = min(limit, i)
    answered_at: dict[str, int] = {}
    for i, ev in enumerate(events):
        if isinstance(ev, ToolResultEvent) and ev.tool_call_id in made_at and i > made_at[ev.tool_call_id]:
            answered_at.setdefault(ev.tool_call_id, i)
    changed = True
    b = min(b, limit)
    while changed:
        changed = False
        for call_id, at in made_at.items():
            if at < b and answered_at.get(call_id, n) >= b:
                b, changed = at, True
    if b <= 0 or b < floor:
        return None
    if not any(isinstance(ev, CONVERSATION_EVENTS) for ev in events[:b]) and not any(
        isinstance(ev, _RESETS) for ev in events[:b]
    ):
        return None  # only control records: nothing the model sees would shrink
    return b


_SUMMARY_OPEN = "<conversation-summary>"
_SUMMARY_CLOSE = "</conversation-summary>"


def summary_messages(result: Any, *, what: str = "the compactor") -> tuple[Message, ...]:
    """The messages a summary becomes: a str is one user message holding the tagged
    summary; a sequence of messages is taken as it is (checked)."""
    from ._invariants import check_messages

    if isinstance(result, str):
        if not result.strip():
            raise ConfigurationError(f"{what} returned an empty summary; return the summary text")
        text = f"{_SUMMARY_OPEN}\n{result.strip()}\n{_SUMMARY_CLOSE}"
        return (Message(role="user", content=(TextPart(text=text),)),)
    if isinstance(result, (list, tuple)) and result and all(isinstance(m, Message) for m in result):
        msgs = tuple(result)
        check_messages(msgs, what=f"the messages {what} returned")
        if msgs[-1].tool_calls:
            raise ConfigurationError(
                f"the messages {what} returned end with tool calls that have no results; "
                f"a summary must be a finished conversation (end with their results or text)"
            )
        return msgs
    raise ConfigurationError(
        f"{what} must return the summary as a str or a non-empty list of user/assistant/tool "
        f"Message objects, not {type(result).__name__}"
    )


def conversation_events_since_reset(events: Sequence[Event]) -> int:
    """How many conversation events came after the last compaction or context reset."""
    count = 0
    for ev in reversed(events):
        if isinstance(ev, _RESETS):
            break
        count += isinstance(ev, CONVERSATION_EVENTS)
    return count


def estimate_tokens(messages: Sequence[Message], *, system: str | None = None, extra: Any = None) -> int:
    """A rough input-token estimate (about four characters a token) of ``messages``, the
    ``system`` prompt and ``extra`` (e.g. tool specs, as JSON)."""
    chars = len(system or "")
    for m in messages:
        chars += len(json.dumps(m.to_dict(), ensure_ascii=False, default=str))
    if extra is not None:
        chars += len(json.dumps(extra, ensure_ascii=False, default=str))
    return chars // 4 + 1
