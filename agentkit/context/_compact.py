"""Compaction, retention and view shaping at run time (private).

:func:`compact_log` summarises the head of a session's event log into one
:class:`~agentkit.events.CompactionEvent`; :func:`apply_retention` archives and prunes;
:func:`iter_history` reads archives then the active log; :class:`ContextShaper` is what
the step loop asks about compaction and the shape of each request.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from ..approvals._policy import APPROVAL_REMEMBERED, ApprovalState
from ..cancel import CancelToken
from ..errors import CancelledError, ConfigurationError, StoreError
from ..events import CompactionEvent, ContextReplacedEvent, ControlEvent, Event
from ..messages import Message
from ..session._config import carried_configuration
from ..stores.base import EventStore
from ..transactions._ledger import UncertainExecution
from ._compaction import (
    DEFAULT_KEEP_LAST,
    Retention,
    compaction_boundary,
    conversation_events_since_reset,
    estimate_tokens,
    summary_messages,
)
from ._held import carry, report
from ._invariants import check_messages
from ._view import cap_tool_outputs, clear_tool_results

__all__ = [
    "ContextShaper",
    "apply_retention",
    "compact_log",
    "finish_interrupted_retention",
    "finish_prune",
    "iter_history",
    "retain",
]


class CompactionHost(Protocol):
    """What compaction needs from the event log."""

    @property
    def events(self) -> tuple[Event, ...]: ...

    def decide(self, decide: Callable[[], Sequence[Event]]) -> list[Event]: ...

    def projection_of(self, events: Sequence[Event]) -> list[Message]: ...


def compact_log(
    log: CompactionHost, *, keep_last: int, compactor: Any, reason: str, cancel: CancelToken
) -> CompactionEvent | None:
    """Summarise the events before the kept tail with ``compactor`` and commit one
    compaction event; None when nothing can be covered (see
    :func:`~agentkit.context.compaction_boundary`). Uncertain tool calls among the
    covered events are carried, not summarised (:mod:`agentkit._held`)."""
    if not callable(compactor):
        raise ConfigurationError(f"compactor must be a callable(messages, *, reason, cancel), not {compactor!r}")
    events = log.events
    boundary = compaction_boundary(events, keep_last, pinned=getattr(log, "keep_visible", None),
                                   hidden=getattr(log, "is_hidden", None))
    if boundary is None:
        return None
    covered = events[:boundary]
    ledger = getattr(log, "ledger", None)
    carried = carry(covered, log.projection_of(covered), ledger)
    messages = carried.messages
    if not messages:
        return None
    cancel.raise_if_cancelled()
    summary = summary_messages(compactor(messages, reason=reason, cancel=cancel))
    cancel.raise_if_cancelled()
    event = CompactionEvent(summary=(*summary, *carried.shown), covered_through=covered[-1].id, covered=boundary,
                            reason=reason)
    rules = _carried_rules(covered, event.id)
    ids = [e.id for e in covered]
    held: list[UncertainExecution] = []

    def decide() -> list[Event]:
        # the summary holds while the log still begins with what it covers and every call
        # it carries is still unresolved; another process that compacted or reconciled
        # meanwhile made this compaction moot (the next one starts from the new state)
        now_events = log.events
        if [e.id for e in now_events[:boundary]] != ids:
            return []
        if any(isinstance(e, (CompactionEvent, ContextReplacedEvent)) for e in now_events[len(events):]):
            return []  # replaced since: a later compaction covering less would hide what that one summarised
        now = getattr(log, "ledger", None)
        configuration = carried_configuration(list(now_events), covered[-1].seq)  # what configure() recorded
        if now is None:
            return [event, *rules, *configuration]
        if any(now.unresolved(i.intent_id) is None for i in carried.intents):
            return []
        held[:] = carried.fresh(now)  # decided on the current ledger: reported once per call
        return [event, *rules, *configuration, *carried.records(event.id, now)]

    committed = log.decide(decide)
    if not committed:
        return None
    first = committed[0]
    assert isinstance(first, CompactionEvent)
    report(held, getattr(log, "session_id", None))
    return first


def _carried_rules(covered: Sequence[Event], compaction_id: str) -> list[Event]:
    """The remembered approval rules among ``covered``, as new events committed with the
    compaction: retention archives the covered events, and a session reopened later must
    still know them."""
    state = ApprovalState()
    state.catch_up(covered)
    return [
        ControlEvent(action=APPROVAL_REMEMBERED,
                     data={"tool_name": name, "action": action, "carried_by": compaction_id})
        for name, action in sorted(state.remembered.items())
    ]


def _last_compaction(log: Any) -> CompactionEvent | None:
    hidden = getattr(log, "is_hidden", None)
    for ev in reversed(log.events):
        if isinstance(ev, CompactionEvent) and (hidden is None or not hidden(ev)):
            return ev
    return None


def finish_prune(log: Any) -> int:
    """Archive and remove what the last compaction event the model sees covers, if it is
    still in the active log (an interrupted retention step); the number of events
    removed. A compaction of a rejected or interrupted transaction is never acted on."""
    last = _last_compaction(log)
    if last is None:
        return 0
    return int(log.prune_through(last.covered_through, last.id))


def apply_retention(log: Any, retention: Retention, compactor: Any, cancel: CancelToken) -> CompactionEvent | None:
    """Finish an interrupted prune; then, when the active log holds more than
    ``retention.max_events`` events, compact, archive and prune (in that order)."""
    finish_prune(log)
    if len(log.events) <= retention.max_events:
        return None
    event = compact_log(log, keep_last=retention.keep_last, compactor=compactor, reason="retention", cancel=cancel)
    if event is not None:
        log.prune_through(event.covered_through, event.id)
    return event


def finish_interrupted_retention(log: Any) -> None:
    """Archive and prune what a crash left covered in the active log, as a session opens.
    A store that cannot do it now does not stop the session from opening (a warning says
    why)."""
    try:
        finish_prune(log)
    except StoreError as exc:
        warnings.warn(
            f"session {log.session_id!r}: could not finish an interrupted retention step "
            f"({exc}); the events stay in the active log and it is tried again after the "
            f"next generation",
            RuntimeWarning,
            stacklevel=4,
        )


def retain(log: Any, retention: Retention, opts: Any, token: CancelToken) -> None:
    """Retention after a generation (``opts``: its loop options); a failure is a warning
    and a cancellation stops it quietly (the answer is committed either way); it runs
    again after the next generation."""
    try:
        apply_retention(log, retention, ContextShaper(opts).compactor(), token)
    except CancelledError:
        return  # the answer is committed; retention runs again after the next generation
    except Exception as exc:  # noqa: BLE001 - reported; the generation itself succeeded
        warnings.warn(
            f"retention of session {log.session_id!r} failed ({type(exc).__name__}: {exc}); "
            f"the active log keeps its events and retention runs again after the next generation",
            RuntimeWarning,
            stacklevel=3,
        )


def iter_history(store: EventStore | None, session_id: str | None, active: Sequence[Event]) -> Iterator[Event]:
    """Every event of the session in commit order: the archived ones (oldest archive
    first), then ``active``. Each archive is read twice (once to find the chain, once to
    yield it) so that only one is held in memory at a time."""
    chain: list[tuple[str, int]] = []  # (archive id, yield only seq below this)
    current: Sequence[Event] = active
    while store is not None and session_id is not None and current:
        first = _first_compaction(current)
        if first is None:
            break
        archived = store.load_archive(session_id, first.id)
        if not archived:
            break
        chain.append((first.id, current[0].seq))
        current = archived
    for archive_id, below in reversed(chain):
        assert store is not None and session_id is not None
        for ev in store.load_archive(session_id, archive_id) or ():
            if ev.seq < below:
                yield ev
    yield from active


def _first_compaction(events: Sequence[Event]) -> CompactionEvent | None:
    return next((e for e in events if isinstance(e, CompactionEvent)), None)


class ContextShaper:
    """A generation's context options, applied by the step loop."""

    def __init__(self, opts: Any) -> None:
        self.opts = opts
        self.builder = opts.context_builder
        self.clearing = opts.clear_tool_results
        self.max_chars = opts.max_tool_output_chars
        self.auto = opts.auto_compact

    def compactor(self) -> Any:
        """The configured compactor, or a summarizing one on the generation's model."""
        if self.opts.compactor is not None:
            return self.opts.compactor
        from ._summarize import summarizing_compactor

        return summarizing_compactor(self.opts.model)

    def view(self, host: Any, messages: list[Message]) -> list[Message]:
        """The messages of the next request: the context builder's (if any), with old
        tool results cleared and tool outputs capped."""
        if self.builder is not None:
            built = self.builder(host.events)
            if not isinstance(built, (list, tuple)) or not all(isinstance(m, Message) for m in built):
                raise ConfigurationError(
                    f"context_builder must return a list of Message objects, not {type(built).__name__}"
                )
            messages = list(built)
            check_messages(messages, what="the context_builder result")
        if self.clearing is not None:
            messages = clear_tool_results(messages, self.clearing)
        if self.max_chars is not None:
            messages = cap_tool_outputs(messages, self.max_chars)
        return messages

    def over_threshold(self, messages: Sequence[Message], extra: Any) -> bool:
        """True when auto-compaction should run before this request."""
        return self.auto is not None and estimate_tokens(
            messages, system=self.opts.system, extra=extra
        ) > self.auto.tokens

    def auto_compact(self, host: Any, cancel: CancelToken) -> bool:
        """Compact (reason ``auto``); True when a compaction event was committed."""
        keep = self.auto.keep_last if self.auto is not None else DEFAULT_KEEP_LAST
        return compact_log(host, keep_last=keep, compactor=self.compactor(), reason="auto", cancel=cancel) is not None

    def overflow_compact(self, host: Any, attempt: int, cancel: CancelToken) -> bool:
        """After a context overflow, compact (reason ``context-overflow``) keeping fewer
        events on each attempt; True when something was compacted."""
        if self.opts.compactor is None:
            return False
        keep = self.auto.keep_last if self.auto is not None else DEFAULT_KEEP_LAST
        # keep fewer on each attempt, and at most half of what the model sees now
        keep = min(keep >> attempt, conversation_events_since_reset(host.events) // 2)
        return compact_log(
            host, keep_last=keep, compactor=self.opts.compactor, reason="context-overflow", cancel=cancel
        ) is not None
