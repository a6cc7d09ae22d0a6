"""Retention: compact, archive, prune; history; crash safety with a real SIGKILL."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _procs import killed_after_first_line

from agentkit import (
    ConfigurationError,
    FileEventStore,
    FunctionModel,
    InMemoryEventStore,
    Retention,
    Session,
    ToolCall,
    tool,
)
from agentkit.events import CompactionEvent, ControlEvent, Event
from agentkit.messages import ToolCallPart, ToolResultPart

CHILD = Path(__file__).resolve().parent / "_retention_child.py"


def summary(messages, *, reason, cancel):
    return f"summary of {len(messages)} messages ({reason})"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def reply(request):
    last = request.messages[-1]
    if last.role == "user" and "tool" in last.content[0].text:
        return ToolCall(name="lookup", input={"key": "k"})
    if any(isinstance(p, ToolResultPart) for p in last.content):
        return "looked it up"
    return "plain answer"


def archived_events(store, session_id: str, events) -> list[Event]:
    """Every event of every archive reachable from ``events`` (each archive once)."""
    out: list[Event] = []
    todo = [e for e in events if isinstance(e, CompactionEvent)]
    seen: set[str] = set()
    while todo:
        c = todo.pop()
        if c.id in seen:
            continue
        seen.add(c.id)
        archived = store.load_archive(session_id, c.id) or ()
        out.extend(archived)
        todo.extend(e for e in archived if isinstance(e, CompactionEvent))
    return out


@pytest.mark.parametrize("store_kind", ["file", "memory", "postgres"])
def test_retention_bounds_the_active_log_over_300_turns_and_loses_nothing(tmp_path, store_kind, request):
    if store_kind == "postgres":  # a throwaway server (tests/_pg.py)
        store = request.getfixturevalue("pg_store")
    else:
        store = FileEventStore(tmp_path, fsync=False) if store_kind == "file" else InMemoryEventStore()
    retention = Retention(max_events=30, keep_last=4)
    committed: list[Event] = []
    with Session(FunctionModel(reply), tools=[lookup], store=store, session_id="long",
                 compactor=summary, retention=retention) as s:
        s.subscribe(committed.append)
        largest = 0
        for turn in range(300):
            before = s.events[-1].seq if s.events else 0
            s.push_user_message(f"turn {turn}" + (" use the tool" if turn % 3 == 0 else ""))
            s.generate()
            this_generation = s.events[-1].seq - before  # including its compaction event
            assert len(s.events) <= retention.max_events + this_generation
            largest = max(largest, len(s.events))
        view = s.model_messages()
        active = s.events
        history = list(s.history())
    assert largest <= retention.max_events + 6
    total = len(committed)
    assert total > 800 and active[-1].seq == total
    # the archives plus the active log hold every committed event exactly once
    archived = archived_events(store, "long", active)
    ids = [e.id for e in archived] + [e.id for e in active]
    assert len(ids) == len(set(ids)) == total
    assert set(ids) == {e.id for e in committed}
    # history() is the whole session in commit order
    assert [e.seq for e in history] == list(range(1, total + 1))
    assert [e.id for e in history] == [e.id for e in committed]
    # opening reads the active log only, and shows the same view
    with Session.open("long", store=store, model=FunctionModel(reply), retention=retention) as again:
        assert again.events == active
        assert again.model_messages() == view
    compactions = [e for e in history if isinstance(e, CompactionEvent)]
    assert compactions and all(c.reason == "retention" for c in compactions)


@pytest.mark.parametrize("die_in", ["archive", "compact"])
def test_a_sigkill_inside_a_retention_step_loses_nothing_on_reopen(tmp_path, die_in):
    proc = subprocess.run([sys.executable, str(CHILD), str(tmp_path), "crashy", die_in],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    turns = [line.split() for line in proc.stdout.splitlines() if line.startswith("turn ")]
    store = FileEventStore(tmp_path)
    stored = store.load("crashy")
    # the compaction event is durable, the covered events are still in the active log
    last = stored.events[-1]
    assert isinstance(last, CompactionEvent)
    assert any(e.id == last.covered_through for e in stored.events)
    before_ids = [e.id for e in stored.events]
    archive = store.load_archive("crashy", last.id)
    assert (archive is None) == (die_in == "archive")
    with Session.open("crashy", store=store, model=FunctionModel(reply), compactor=summary,
                      retention=Retention(max_events=12, keep_last=4)) as s:
        # opening finished the interrupted step: archived, then pruned
        assert not any(e.id == last.covered_through for e in s.events)
        history = list(s.history())
        assert [e.id for e in history] == before_ids  # nothing lost, nothing twice
        assert "summary of" in s.model_messages()[0].content[0].text
        s.push_user_message("after the crash")
        s.generate()
    assert len(turns) >= 1
    reopened = store.load("crashy")
    archived = archived_events(store, "crashy", reopened.events)
    ids = [e.id for e in archived] + [e.id for e in reopened.events]
    assert len(ids) == len(set(ids)) == reopened.events[-1].seq


def test_retention_needs_a_store_and_sane_numbers():
    with pytest.raises(ConfigurationError, match="pass store="):
        Session(FunctionModel(reply), retention=Retention(max_events=10))
    with pytest.raises(ConfigurationError, match="smaller than max_events"):
        Retention(max_events=5, keep_last=5)
    with pytest.raises(ConfigurationError, match="must be a Retention"):
        Session(FunctionModel(reply), store=InMemoryEventStore(), retention=10)


def test_a_failing_compactor_warns_and_retention_runs_again_later():
    calls = []

    def flaky(messages, *, reason, cancel):
        calls.append(reason)
        if len(calls) == 1:
            raise RuntimeError("summariser down")
        return "ok summary"

    store = InMemoryEventStore()
    with Session(FunctionModel(reply), store=store, session_id="f", compactor=flaky,
                 retention=Retention(max_events=4, keep_last=2)) as s:
        for i in range(2):
            s.push_user_message(f"q{i}")
            s.generate()
        s.push_user_message("q2")
        with pytest.warns(RuntimeWarning, match="summariser down"):
            result = s.generate()
        assert result.text == "plain answer"
        assert len(s.events) == 6  # nothing pruned yet
        s.push_user_message("q3")
        s.generate()
        assert calls == ["retention", "retention"] and len(s.events) <= 4


def test_manual_compaction_on_a_retention_session_archives_too():
    store = InMemoryEventStore()
    with Session(FunctionModel(reply), store=store, session_id="m", compactor=summary,
                 retention=Retention(max_events=100, keep_last=2)) as s:
        for i in range(4):
            s.push_user_message(f"q{i}")
            s.generate()
        event = s.compact(keep_last=2)
        assert [e.seq for e in s.events] == [7, 8, 9]
        assert len(store.load_archive("m", event.id)) == 6
        assert [e.seq for e in s.history()] == list(range(1, 10))


def test_two_session_objects_on_one_store_prune_without_losing_or_duplicating(tmp_path):
    import warnings

    store = FileEventStore(tmp_path, fsync=False)
    # keep_last=4: the other object's last event survives a prune, so what refresh()
    # loads continues its copy, which still holds the pruned head
    kwargs = dict(store=store, compactor=summary, retention=Retention(max_events=8, keep_last=4))
    a = Session.open("shared", model=FunctionModel(reply), **kwargs)
    b = Session.open("shared", model=FunctionModel(reply), **kwargs)
    with a, b, warnings.catch_warnings():
        warnings.simplefilter("error")  # no retention step may fail
        for turn in range(12):
            first, second = (a, b) if turn % 2 == 0 else (b, a)
            first.refresh()
            first.push_user_message(f"turn {turn}")
            first.generate()
        a.refresh()
        b.refresh()
        history = list(a.history())
        assert [e.seq for e in history] == list(range(1, history[-1].seq + 1))
        assert [e.id for e in b.history()] == [e.id for e in history]
        assert len(a.events) <= 8 + 4 and len(b.events) <= 8 + 4
    stored = store.load("shared")
    ids = [e.id for e in archived_events(store, "shared", stored.events)] + [e.id for e in stored.events]
    assert len(ids) == len(set(ids)) == stored.events[-1].seq


CRASH_CHILD = Path(__file__).resolve().parent / "_crash_child.py"


def _calls_in(messages) -> list[str]:
    return [p.tool_call_id for m in messages for p in m.content if isinstance(p, ToolCallPart)]


def test_an_uncertain_call_never_pins_retention_it_is_carried_and_reported_once(tmp_path, caplog):
    from agentkit.context import INTERRUPTED_RESULT

    root, marker = tmp_path / "store", tmp_path / "refunds.txt"
    proc = subprocess.run([sys.executable, str(CRASH_CHILD), "run-and-die", str(root), "held", str(marker)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    call_id, key = marker.read_text().split()  # the refund happened; its result never came
    store = FileEventStore(root, fsync=False)
    committed = list(store.load("held").events)
    retention = Retention(max_events=20)

    def refund_warnings() -> int:
        return sum(r.name == "agentkit" and r.levelname == "WARNING" and call_id in r.getMessage()
                   for r in caplog.records)

    with caplog.at_level("WARNING", logger="agentkit"), Session.open(
            "held", store=store, model=FunctionModel(reply), tools=[lookup], compactor=summary,
            retention=retention) as s:
        s.subscribe(committed.append)
        largest = 0
        for turn in range(300):
            s.push_user_message(f"turn {turn}" + (" use the tool" if turn % 3 == 0 else ""))
            s.generate()
            largest = max(largest, len(s.events))
            # the model keeps seeing the call and that its outcome is unknown
            view = s.model_messages()
            assert _calls_in(view).count(call_id) == 1
        assert largest <= 3 * retention.max_events  # bounded: it was 604 and growing
        results = [p for m in view if m.role == "tool" for p in m.content if p.tool_call_id == call_id]
        assert [p.output.value for p in results] == [INTERRUPTED_RESULT]
        assert [u.intent_id for u in s.uncertain_tool_executions()] == [key]
        assert s.compact(keep_last=2, compactor=summary) is not None  # compaction works too
        assert refund_warnings() == 1
    # history() holds every event, in commit order; the report is in it once
    with Session.open("held", store=store, model=FunctionModel(reply), compactor=summary,
                      retention=retention) as again:
        history = list(again.history())
        assert [e.seq for e in history] == list(range(1, len(history) + 1))
        assert [e.id for e in history] == [e.id for e in committed]
        held = [e for e in history if isinstance(e, ControlEvent) and e.action == "retention-held"]
        assert [e.data for e in held] == [{"tool_call_id": call_id, "intent_id": key}]
        # opened from the active log alone, it still lists the call and reconciles it
        assert [u.intent_id for u in again.uncertain_tool_executions()] == [key]
        assert _calls_in(again.model_messages()).count(call_id) == 1
        for turn in range(40):
            again.push_user_message(f"later {turn}")
            again.generate()
        assert sum(isinstance(e, ControlEvent) and e.action == "retention-held" for e in again.history()) == 1
        assert refund_warnings() == 1  # once per call, whichever session object compacts
        again.reconcile_tool_execution(key, "executed", output="refunded o-1")
        assert again.uncertain_tool_executions() == []
        for turn in range(40):
            again.push_user_message(f"after {turn}")
            again.generate()
        # reconciled, it is covered like any other call
        assert call_id not in _calls_in(again.model_messages())
        assert not any(isinstance(e, ControlEvent) and e.data.get("intent_id") == key for e in again.events)
        assert len(again.events) <= 3 * retention.max_events


def test_a_sigkilled_transactional_call_does_not_pin_retention_either(tmp_path):
    """Its transaction is interrupted on reopen, so the call is hidden and never gets a
    result: it used to hold every later event in the active log."""
    root = tmp_path / "store"
    word, key = killed_after_first_line([sys.executable, str(Path(__file__).resolve().parent / "_txn_child.py"),
                                         "txn-charge", str(root), "txn", str(tmp_path / "charges")])
    assert word == "tool-running"
    retention = Retention(max_events=20)
    kwargs = dict(store=FileEventStore(root, fsync=False), model=FunctionModel(reply), compactor=summary,
                  retention=retention)
    with Session.open("txn", **kwargs) as s:
        (gid,) = s.transactions()
        for turn in range(100):
            s.push_user_message(f"turn {turn}")
            s.generate()
            assert len(s.events) <= 3 * retention.max_events
    with Session.open("txn", **kwargs) as again:  # the original intent is archived by now
        (unknown,) = again.uncertain_tool_executions()
        assert (unknown.intent_id, unknown.generation_id) == (key, gid)
        assert sum(isinstance(e, ControlEvent) and e.action == "retention-held" for e in again.history()) == 1
        again.reconcile_tool_execution(key, "executed", output="charged")
        assert again.uncertain_tool_executions() == []
