"""The handoffs a log records (agentkit/context/_handoffs.py): the last confirmed handoff
event, read whole (``last_handoff``) or folded as the log grows (``HandoffFold``), and the
copy a compaction carries."""

from __future__ import annotations

from agentkit.context._handoffs import HandoffFold, carried_handoff, last_handoff
from agentkit.events import ControlEvent, Event, ToolResultEvent, UserMessageEvent
from agentkit.messages import TextPart, ToolOutput


def made(call_id: str, target: str) -> ControlEvent:
    return ControlEvent(action="handoff", data={"tool_call_id": call_id, "target": target,
                                                "path": [[f"transfer_to_{target}", call_id]]})


def result(call_id: str, *, error: bool = False) -> ToolResultEvent:
    output = ToolOutput.error("denied") if error else ToolOutput.text(f"Transferred ({call_id}).")
    return ToolResultEvent(tool_call_id=call_id, tool_name="transfer", output=output)


def user(text: str = "hi") -> UserMessageEvent:
    return UserMessageEvent(content=(TextPart(text=text),))


def both(events: list[Event], fold: HandoffFold) -> ControlEvent | None:
    """``last_handoff`` and the fold agree; returns what they say."""
    whole = last_handoff(events)
    assert fold.catch_up(events).last() is whole
    return whole


def test_a_handoff_counts_once_a_result_that_is_not_an_error_confirms_it():
    fold = HandoffFold()
    log: list[Event] = [user(), made("c1", "billing")]
    assert both(log, fold) is None  # made, not confirmed yet
    assert fold.made("c1") and not fold.made("c2")
    log.append(result("c1"))
    first = both(log, fold)
    assert first is not None and first.data["target"] == "billing"
    log += [made("c2", "sales"), result("c2", error=True)]  # its result is an error: it does not count
    assert both(log, fold) is first
    log += [user(), made("c3", "refunds"), result("c3")]
    last = both(log, fold)
    assert last is not None and last.data["target"] == "refunds"
    assert fold.last(hidden=lambda ev: ev is last) is first  # hidden events do not count
    assert fold.last(before=last) is first and fold.last(before=first) is None


def test_the_fold_reads_a_log_that_lost_its_head_or_was_replaced_from_its_start():
    fold = HandoffFold()
    log: list[Event] = [user(), made("c1", "billing"), result("c1"), user(), user()]
    assert both(log, fold) is not None
    pruned = log[3:]  # retention archived the handoff: nothing confirms one now
    assert both(pruned, fold) is None
    assert not fold.made("c1")
    other: list[Event] = [user(), user(), made("c9", "sales"), result("c9"), user()]  # as long, other events
    found = both(other, fold)
    assert found is not None and found.data["target"] == "sales"
    assert both([], fold) is None


def test_a_compaction_carries_the_last_confirmed_handoff_it_covers_unless_the_kept_events_hold_one():
    log: list[Event] = [user(), made("c1", "billing"), result("c1"), user(), user()]
    (carried,) = carried_handoff(log, 3, "compaction-1")
    assert carried.data == {**log[1].data, "carried_by": "compaction-1"}
    assert last_handoff([*log[3:], carried]) is carried  # carried, it needs no result
    assert HandoffFold().catch_up([*log[3:], carried]).last() is carried
    later = [*log, made("c2", "sales"), result("c2")]
    assert carried_handoff(later, 3, "compaction-2") == []  # the kept events hold a later one
    assert carried_handoff([user(), made("c2", "x"), result("c2", error=True), user()], 3, "c") == []
