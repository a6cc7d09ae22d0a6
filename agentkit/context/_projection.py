"""Events -> model messages: the default projection.

A pure function of the events (:func:`build_model_messages`), computed incrementally by
a :class:`Projector` so that one step costs O(new events), not O(history).

Rules:

* user and assistant events become user and assistant messages; tool results of one
  assistant message are gathered into one ``tool`` message, in the order the model wrote
  the calls (a call answered later, e.g. after an approval, still takes its place).
* runtime events become user-visible context (a user message with a tagged text part),
  never fake tool results.
* a user message or runtime event that arrives while tool calls are still open (another
  thread pushed it while tools ran) is held back until their results are in, so a tool
  call is always followed by its results. When the results never came (an aborted or
  crashed generation), the view shows the open calls closed with an "interrupted" error
  result before the held-back messages; a new assistant message closes them for good.
  Either way providers always see a valid conversation.
* a user message or runtime event committed while the model was answering (after the
  last event its request was built from: ``AssistantMessageEvent.request_seq``) is shown
  after that answer, not before it: the model did not see it. A follow-up
  (``Session.follow_up``) placed after the last answer is "waiting": the loop answers
  it before the generation ends.
* a ``guardrail-tripped`` control event of an input guardrail takes the user messages
  since the last answer out of the view: the model never sees refused input again.
* a ``context-replaced`` event restarts the projection from the messages it carries.
* a ``compaction`` event restarts it from its summary followed by the kept tail: the
  events after the one it covers through (they come before it in the log; when the
  covered events were archived, the active log starts with the kept tail).
* events of a transactional generation (``Event.generation_id``) are skipped while the
  ``hidden`` predicate says so: a candidate the host has not accepted, or one it rejected
  or that was interrupted (:mod:`agentkit.transactions`). When what is hidden changes, the
  owner starts a new Projector (a transaction changes state a few times per generation).
* background jobs: ``job-output`` chunks are not shown one by one. While jobs run, the
  view an inference gets ends with one status message per request summarising each
  running job and the tail of its output (:mod:`agentkit.jobs`); a job's
  ``job-finished`` / ``job-failed`` / ``job-aborted`` event reports its end.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from ..errors import ConfigurationError
from ..events import (
    AssistantMessageEvent,
    CompactionEvent,
    ContextReplacedEvent,
    ControlEvent,
    Event,
    RuntimeEvent,
    ToolResultEvent,
    UserMessageEvent,
)
from ..jobs._status import RunningJobs
from ..messages import ContentPart, Message, TextPart, ToolOutput, ToolResultPart

__all__ = [
    "INTERRUPTED_RESULT",
    "Projector",
    "RuntimeRenderer",
    "build_model_messages",
    "events_from_messages",
    "render_runtime_event",
]

RuntimeRenderer = Callable[[RuntimeEvent], "Message | None"]
"""Turns a runtime event into a message for the model, or None to hide it."""

INTERRUPTED_RESULT = (
    "error: this tool call was interrupted before it returned a result; "
    "it may or may not have taken effect"
)


def render_runtime_event(event: RuntimeEvent) -> Message | None:
    """The default rendering: a user message holding a tagged JSON payload.

    Background jobs are shown as one summary each, not every chunk: ``job-output`` is
    hidden (``job-finished``/``job-failed``/``job-aborted`` carry the output tail and
    the jobs still running), and ``job-started`` is hidden for jobs a tool call started
    (its result already said so)."""
    kind = event.runtime_type
    if kind == "job-output" or (kind == "job-started" and event.data.get("tool_call_id")):
        return None
    payload = json.dumps(event.data, ensure_ascii=False, sort_keys=True)
    text = f'<runtime-event type="{kind}">{payload}</runtime-event>'
    return Message(role="user", content=(TextPart(text=text),))


class Projector:
    """Incremental projection state. Feed events in commit order with :meth:`extend`;
    read :attr:`messages`."""

    __slots__ = (
        "_messages", "_pending", "_pending_names", "_deferred", "_count", "_render", "_jobs", "_recent",
        "_waiting", "_last_seq", "_order", "_hidden", "_since", "_inputs",
    )

    def __init__(
        self, render_runtime: RuntimeRenderer | None = None, *, hidden: Callable[[str], bool] | None = None
    ) -> None:
        """``hidden(generation_id)`` says whether events tagged with that transactional
        generation are left out (None: every event is shown)."""
        self._messages: list[Message] = []
        self._pending: Counter[str] = Counter()
        self._pending_names: dict[str, str] = {}
        self._order: dict[str, int] = {}  # call id -> its place in the last assistant message
        self._deferred: list[tuple[int, Message, bool]] = []  # (seq, message, follow-up)
        # user/runtime messages shown since the last assistant message, in order
        self._recent: list[tuple[int, Message, bool]] = []
        self._waiting = 0  # follow-ups shown after the last assistant message
        self._last_seq = 0
        self._count = 0
        self._hidden = hidden
        # the events applied since the last context reset: a compaction event replays
        # the ones after the event it covers through
        self._since: list[Event] = []
        # the ids of the user messages shown (or held back) since the last assistant
        # message: what an input guardrail's trip takes out of the view
        self._inputs: set[int] = set()
        self._render = render_runtime or render_runtime_event
        # the default rendering hides job output; a status message stands in for it
        self._jobs = RunningJobs() if render_runtime is None else None

    def copy(self) -> Projector:
        """An independent copy of this state (the messages, immutable, are shared)."""
        new = Projector.__new__(Projector)
        new._messages = list(self._messages)
        new._pending = Counter(self._pending)
        new._pending_names = dict(self._pending_names)
        new._order = dict(self._order)
        new._deferred = list(self._deferred)
        new._recent = list(self._recent)
        new._waiting = self._waiting
        new._last_seq = self._last_seq
        new._count = self._count
        new._hidden = self._hidden
        new._since = list(self._since)
        new._inputs = set(self._inputs)
        new._render = self._render
        new._jobs = None if self._jobs is None else self._jobs.copy()
        return new

    @property
    def count(self) -> int:
        """How many events have been applied."""
        return self._count

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the last event applied (0 before any committed event)."""
        return self._last_seq

    @property
    def follow_up_waiting(self) -> bool:
        """True when a follow-up message comes after the last assistant message."""
        return self._waiting > 0

    @property
    def messages(self) -> list[Message]:
        """A copy of the projected history: without the tails :meth:`model_view` adds
        (``RunResult.messages`` is ``model_view(job_status=False)``)."""
        return list(self._messages)

    def model_view(self, *, job_status: bool = True) -> list[Message]:
        """What the next inference sees: :attr:`messages`, then -- when messages are held
        back behind tool calls without results -- those calls closed as interrupted and
        the held-back messages; or, while background jobs run and no tool call is open,
        one status message summarising them (``job_status=False`` leaves it out). These
        tails are recomputed each time and never become history."""
        if self._pending:
            if not self._deferred:
                return list(self._messages)
            head = self._messages
            last = head[-1] if head and head[-1].role == "tool" else None
            closing = tuple(self._interrupted_parts())
            deferred = [m for _, m, _ in self._deferred]
            if last is not None:
                tool_msg = Message(role="tool", content=self._in_order(last.content + closing))
                return [*head[:-1], tool_msg, *deferred]
            return [*head, Message(role="tool", content=self._in_order(closing)), *deferred]
        if job_status and self._jobs:
            return [*self._messages, self._jobs.status_message()]
        return list(self._messages)

    @property
    def pending_tool_calls(self) -> dict[str, str]:
        """Tool calls (id -> tool name) of the last assistant message still without a
        result."""
        return {k: self._pending_names[k] for k, n in self._pending.items() if n > 0}

    def extend(self, events: Iterable[Event]) -> None:
        """Apply new events, in commit order."""
        hidden = self._hidden
        for ev in events:
            gid = ev.generation_id
            if gid is None or hidden is None or not hidden(gid):
                self._apply(ev)
                self._since.append(ev)
            self._count += 1
            if ev.seq:
                self._last_seq = ev.seq

    def catch_up(self, events: Sequence[Event]) -> None:
        """Apply ``events[self.count:]`` (the events not yet seen)."""
        if len(events) > self._count:
            self.extend(events[self._count :])

    # -- rules -------------------------------------------------------------------------

    def _apply(self, ev: Event, *, replay: bool = False) -> None:
        if isinstance(ev, ToolResultEvent):
            self._tool_result(ev)
        elif isinstance(ev, AssistantMessageEvent):
            self._close_pending()
            late = self._take_late(ev.request_seq)
            self._recent.clear()
            self._inputs = {id(item[1]) for item in late if id(item[1]) in self._inputs}  # the next turn's
            self._waiting = 0
            if ev.content:
                self._messages.append(Message(role="assistant", content=ev.content))
                self._order = {c.tool_call_id: i for i, c in reversed(list(enumerate(ev.tool_calls)))}
                for call in ev.tool_calls:
                    self._pending[call.tool_call_id] += 1
                    self._pending_names[call.tool_call_id] = call.tool_name
            for item in late:
                self._show(item)
        elif isinstance(ev, UserMessageEvent):
            message = Message(role="user", content=ev.content)
            self._inputs.add(id(message))
            self._show((ev.seq, message, ev.follow_up))
        elif isinstance(ev, RuntimeEvent):
            if self._jobs is not None and not replay:
                self._jobs.observe(ev)
            rendered = self._render(ev)
            if rendered is not None:
                self._show((ev.seq, rendered, False))
        elif isinstance(ev, ContextReplacedEvent):
            self._reset(ev.messages)
        elif isinstance(ev, CompactionEvent):
            kept = self._kept_after(ev.covered_through)
            self._reset(ev.summary)
            for old in kept:
                self._apply(old, replay=True)
        elif isinstance(ev, ControlEvent) and ev.action == "guardrail-tripped" and ev.data.get("kind") == "input":
            self._withdraw_input()
        # control events and unknown kinds are not shown to the model

    def _withdraw_input(self) -> None:
        """An input guardrail tripped: the user messages since the last answer (what it
        refused) are not shown again."""
        refused = self._inputs
        if not refused:
            return
        self._deferred = [item for item in self._deferred if id(item[1]) not in refused]  # behind open calls
        tail = len(self._recent)
        if tail:
            self._messages = self._messages[:-tail] + [m for m in self._messages[-tail:] if id(m) not in refused]
        self._recent = [item for item in self._recent if id(item[1]) not in refused]
        self._waiting = sum(item[2] for item in self._recent)
        self._inputs = set()

    def _kept_after(self, covered_through: str) -> list[Event]:
        since = self._since
        for i in range(len(since) - 1, -1, -1):
            if since[i].id == covered_through:
                return since[i + 1 :]
        return list(since)  # the covered events were archived: all of these are kept

    def _reset(self, messages: Sequence[Message]) -> None:
        self._since = []
        self._inputs = set()
        self._messages = list(messages)
        self._pending.clear()
        self._pending_names.clear()
        self._deferred.clear()
        self._recent.clear()
        self._waiting = 0
        if self._messages and self._messages[-1].role == "assistant":
            calls = self._messages[-1].tool_calls
            self._order = {c.tool_call_id: i for i, c in reversed(list(enumerate(calls)))}
            for call in calls:
                self._pending[call.tool_call_id] += 1
                self._pending_names[call.tool_call_id] = call.tool_name

    def _show(self, item: tuple[int, Message, bool]) -> None:
        if self._pending:
            self._deferred.append(item)  # after the open calls' results
        else:
            self._messages.append(item[1])
            self._recent.append(item)
            self._waiting += item[2]

    def _take_late(self, request_seq: int | None) -> list[tuple[int, Message, bool]]:
        """Remove the messages committed after ``request_seq`` (a trailing run of
        :attr:`_recent`) from the history, to be shown after the answer."""
        late: list[tuple[int, Message, bool]] = []
        if request_seq is None:
            return late
        recent, messages = self._recent, self._messages
        while recent and recent[-1][0] > request_seq and messages and messages[-1] is recent[-1][1]:
            late.append(recent.pop())
            messages.pop()
        late.reverse()
        return late

    def _in_order(self, parts: tuple[ContentPart, ...]) -> tuple[ContentPart, ...]:
        """``parts`` (tool results) sorted by the place of their calls (stable)."""
        order = self._order
        return tuple(sorted(parts, key=lambda p: order.get(getattr(p, "tool_call_id", ""), len(order))))

    def _add_result(self, part: ToolResultPart) -> None:
        last = self._messages[-1] if self._messages else None
        if last is not None and last.role == "tool":
            content = last.content + (part,)
            if len(content) > 1 and self._order.get(part.tool_call_id, 0) < self._order.get(
                    getattr(last.content[-1], "tool_call_id", ""), 0):
                content = self._in_order(content)  # answered after a later call
            self._messages[-1] = Message(role="tool", content=content)
        else:
            self._messages.append(Message(role="tool", content=(part,)))

    def _tool_result(self, ev: ToolResultEvent) -> None:
        if self._pending.get(ev.tool_call_id, 0) <= 0:
            return  # a result for no open call would make the conversation invalid
        self._pending[ev.tool_call_id] -= 1
        if self._pending[ev.tool_call_id] == 0:
            del self._pending[ev.tool_call_id]
        self._add_result(
            ToolResultPart(tool_call_id=ev.tool_call_id, tool_name=ev.tool_name, output=ev.output)
        )
        if not self._pending:
            self._flush_deferred()

    def _interrupted_parts(self) -> Iterable[ToolResultPart]:
        for call_id, n in self._pending.items():
            for _ in range(n):
                yield ToolResultPart(
                    tool_call_id=call_id,
                    tool_name=self._pending_names[call_id],
                    output=ToolOutput.error(INTERRUPTED_RESULT),
                )

    def _close_pending(self) -> None:
        if self._pending:
            for part in list(self._interrupted_parts()):
                self._add_result(part)
            self._pending.clear()
        self._flush_deferred()

    def _flush_deferred(self) -> None:
        if self._deferred:
            items = list(self._deferred)
            self._deferred.clear()
            for item in items:
                self._messages.append(item[1])
                self._recent.append(item)
                self._waiting += item[2]
        if not self._pending:
            self._pending_names.clear()


def build_model_messages(
    events: Iterable[Event], *, render_runtime: RuntimeRenderer | None = None
) -> list[Message]:
    """Project events to the messages a model sees (see the module docstring)."""
    projector = Projector(render_runtime)
    projector.extend(events)
    return projector.model_view()


def events_from_messages(messages: Iterable[Message]) -> list[Event]:
    """Seed events from a message history (``run_agent(messages=...)``).

    System messages are not events; take them out first (``run_agent`` turns them
    into the system prompt).
    """
    out: list[Event] = []
    for m in messages:
        if not isinstance(m, Message):
            raise ConfigurationError(
                f"messages must be agentkit Message objects, not {type(m).__name__}"
            )
        if m.role == "user":
            out.append(UserMessageEvent(content=m.content))
        elif m.role == "assistant":
            out.append(AssistantMessageEvent(content=m.content))
        elif m.role == "tool":
            for p in m.content:
                assert isinstance(p, ToolResultPart)
                out.append(
                    ToolResultEvent(tool_call_id=p.tool_call_id, tool_name=p.tool_name, output=p.output)
                )
        else:
            raise ConfigurationError(
                "a system message cannot be an event; pass it as system= instead"
            )
    return out
