"""Decide again, never re-append: two SessionPools (or two Sessions) over one store stand
for two web workers. A worker whose session is stale catches up and decides its command
again on the new state, so a decision another worker made first is refused with the
documented error (or is a no-op where the same decision is idempotent)."""

from __future__ import annotations

import pytest
from _tools import calls_then_answers

from agentkit import (
    ApprovalError,
    ApprovalPolicy,
    FileEventStore,
    FunctionModel,
    InMemoryEventStore,
    Session,
    SessionPool,
    TransactionError,
    tool,
)
from agentkit.events import AssistantMessageEvent, ControlEvent, UserMessageEvent
from agentkit.messages import TextPart, ToolCallPart

RAN: list[str] = []


@tool
def write_note(text: str) -> str:
    """Write a note."""
    RAN.append(text)
    return f"wrote {text!r}"


reply = calls_then_answers("write_note")


@pytest.fixture(autouse=True)
def _clear():
    RAN.clear()


@pytest.fixture(params=["file", "memory"])
def store(request, tmp_path):
    return FileEventStore(tmp_path) if request.param == "file" else InMemoryEventStore()


def pools(store):
    kwargs = {"model": FunctionModel(reply), "tools": [write_note], "approval": ApprovalPolicy(mode="ask-writes"),
              "idle_timeout": None}
    return SessionPool(store, **kwargs), SessionPool(store, **kwargs)


def decisions(session):
    return [e.data["decision"] for e in session.events
            if isinstance(e, ControlEvent) and e.action == "approval-decided"]


def test_a_stale_approve_after_another_worker_denied_is_refused_and_the_tool_never_runs(store):
    a, b = pools(store)
    with a, b:
        assert a.get("c").ask("x").finish_reason == "approval-required"
        (pending,) = b.get("c").pending_approvals()  # B is open and current here
        a.get("c").deny(pending.id, reason="no")
        with pytest.raises(ApprovalError, match="already denied"):
            b.get("c").approve(pending.id)  # stale: decided again on the caught-up log
        assert b.get("c").generate().text == "the tool said: denied: no"
        assert RAN == []
        assert decisions(Session.open("c", store=store)) == ["denied"]


def test_a_stale_deny_after_another_worker_approved_is_refused_and_the_tool_runs_once(store):
    a, b = pools(store)
    with a, b:
        a.get("c").ask("x")
        (pending,) = b.get("c").pending_approvals()
        a.get("c").approve(pending.id)
        with pytest.raises(ApprovalError, match="already approved"):
            b.get("c").deny(pending.id, reason="no")
        assert b.get("c").generate().text == "the tool said: wrote 'x'"
        assert RAN == ["x"]


def test_approving_twice_is_an_error_the_second_time(store):
    a, b = pools(store)
    with a, b:
        a.get("c").ask("x")
        (pending,) = b.get("c").pending_approvals()
        a.get("c").approve(pending.id)
        with pytest.raises(ApprovalError, match="already approved"):
            b.get("c").approve(pending.id)
        with pytest.raises(ApprovalError, match="already approved"):
            a.get("c").approve(pending.id)
        assert decisions(Session.open("c", store=store)) == ["approved"]


def test_a_remembered_deny_is_not_overturned_by_a_stale_remembered_approve(store):
    a, b = pools(store)
    with a, b:
        a.get("c").ask("x")
        (pending,) = b.get("c").pending_approvals()
        a.get("c").deny(pending.id, reason="never", remember=True)
        with pytest.raises(ApprovalError, match="already denied"):
            b.get("c").approve(pending.id, remember=True)
        b.get("c").generate()
        later = b.get("c").ask("y")  # denied by the remembered rule, without asking
        assert later.finish_reason == "stop" and b.get("c").pending_approvals() == []
        assert later.tool_calls[0].output.is_error
        assert RAN == []


def _uncertain_store(store) -> str:
    """What a process killed mid-tool leaves: a call and its intent, no result."""
    call = ToolCallPart(tool_call_id="call_k", tool_name="charge", input={"amount": 42})
    store.append("c", [
        UserMessageEvent(content=(TextPart(text="Charge 42."),), seq=1),
        AssistantMessageEvent(content=(call,), seq=2),
        ControlEvent(action="tool-execution-intent", seq=3,
                     data={"tool_call_id": "call_k", "tool_name": "charge", "input": {"amount": 42}}),
    ], expected_revision=0)
    return store.load("c").events[2].id


def test_a_stale_reconciliation_that_differs_is_refused_and_the_same_one_is_a_no_op(store):
    intent_id = _uncertain_store(store)
    with Session.open("c", store=store) as a, Session.open("c", store=store) as b:
        assert [u.intent_id for u in b.uncertain_tool_executions()] == [intent_id]
        a.reconcile_tool_execution(intent_id, "executed", output={"charge_id": "ch_1"})
        with pytest.raises(TransactionError, match="already reconciled"):
            b.reconcile_tool_execution(intent_id, "not-executed")  # stale: decided again, refused
        b.reconcile_tool_execution(intent_id, "executed", output={"charge_id": "ch_1"})  # the same: no-op
        reconciled = [e for e in Session.open("c", store=store).events
                      if isinstance(e, ControlEvent) and e.action == "tool-execution-reconciled"]
        assert len(reconciled) == 1 and reconciled[0].data["resolution"] == "executed"
        assert b.uncertain_tool_executions() == []


def test_a_stale_finalize_is_decided_again(store):
    model = FunctionModel(lambda r: "candidate")
    with Session.open("c", store=store, model=model) as a, Session.open("c", store=store, model=model) as b:
        txn = a.begin_generation("draft it")
        a.generate(transaction=txn)
        b.refresh()
        a.finalize_generation(txn, "accepted")
        b.finalize_generation(txn, "accepted")  # the same outcome: a no-op
        with pytest.raises(TransactionError):
            b.finalize_generation(txn, "rejected")
        outcomes = [e for e in Session.open("c", store=store).events
                    if isinstance(e, ControlEvent) and e.action == "generation-accepted"]
        assert len(outcomes) == 1


def test_plain_commits_of_stale_sessions_follow_the_other_writers(store):
    with Session.open("c", store=store) as a, Session.open("c", store=store) as b:
        a.push_user_message("one")
        b.push_runtime_event("tick", {"n": 1})  # stale: caught up, appended after "one"
        a.push_user_message("two")
        seqs = [e.seq for e in Session.open("c", store=store).events]
        assert seqs == [1, 2, 3]
        assert [e.type for e in a.events] == ["user-message", "runtime", "user-message"]


def test_a_planning_run_holds_the_turn_so_another_sessions_ask_waits_for_it(tmp_path):
    import threading

    from _plan_child import GOAL, executor, planner, work_tool

    from agentkit import PlanningAgent

    store = FileEventStore(tmp_path / "store")
    entered, release = threading.Event(), threading.Event()

    def synthesize(request):
        entered.set()
        assert release.wait(60)
        return "the report"

    agent = PlanningAgent(executor(), tools=[work_tool(tmp_path / "m")], planner=planner(["collect alpha"]),
                          synthesizer=FunctionModel(synthesize))
    box = {}
    with Session.open("c", store=store) as run_in, Session.open("c", store=FileEventStore(tmp_path / "store"),
                                                                model=FunctionModel(lambda r: "answer")) as other:
        runner = threading.Thread(target=lambda: box.setdefault("run", agent.run(GOAL, session=run_in)))
        runner.start()
        assert entered.wait(60)  # the run is in its last stage, holding the turn
        asker = threading.Thread(target=lambda: box.setdefault("ask", other.ask("meanwhile")))
        asker.start()
        asker.join(0.2)
        assert asker.is_alive()  # it waits for the turn ...
        assert "meanwhile" not in [e.content[0].text for e in other.events if isinstance(e, UserMessageEvent)]
        release.set()  # ... and goes on once the run ends
        runner.join(60)
        asker.join(60)
        assert box["run"].text == "the report" and box["ask"].text == "answer"
        kinds = [e.action if isinstance(e, ControlEvent) else e.type for e in Session.open("c", store=store).events]
        assert kinds.index("plan-synthesized") < kinds.index("user-message", 1)  # the ask came after the run


def test_an_append_under_a_lost_turn_lock_is_not_retried_and_leaves_the_session_usable(store):
    from agentkit import TurnLockLostError

    with Session.open("c", store=store) as session:
        with store.turn_lock("c") as lease:
            pass  # released: another turn may be granted now
        with session._log.holding(lease), pytest.raises(TurnLockLostError):
            session.push_user_message("from a turn that lost its lock")
        assert session.events == () and store.load("c") is None  # nothing written, no retry
        session.push_user_message("outside any turn")
        assert [e.content[0].text for e in session.events] == ["outside any turn"]


def test_opening_and_closing_a_session_elsewhere_does_not_interrupt_a_running_transaction(store):
    import threading

    entered, release = threading.Event(), threading.Event()

    def slow(request):
        entered.set()
        assert release.wait(60)
        return "candidate"

    box = {}
    with Session.open("c", store=store, model=FunctionModel(slow)) as a:
        txn = a.begin_generation("draft it")
        runner = threading.Thread(target=lambda: box.setdefault("run", a.generate(transaction=txn)))
        runner.start()
        assert entered.wait(60)  # A's transactional generation runs, holding the turn
        with Session.open("c", store=store) as b:  # another worker opens (and closes) the session
            assert b.transactions()[txn.generation_id] == "execution-started"
        release.set()
        runner.join(60)
        assert box["run"].text == "candidate"
        a.finalize_generation(txn, "accepted")
        assert a.transactions()[txn.generation_id] == "accepted"


def test_a_persons_decision_made_elsewhere_wins_over_the_in_process_approvers_later_answer(store):
    import threading

    asked, answer = threading.Event(), threading.Event()

    def approver(request):
        asked.set()
        assert answer.wait(60)
        return True  # too late: a person denied it in another worker meanwhile

    policy = ApprovalPolicy(mode="ask-writes")
    box = {}
    with Session.open("c", store=store, model=FunctionModel(reply), tools=[write_note], approval=policy,
                      approver=approver) as a, Session.open("c", store=store) as b:
        runner = threading.Thread(target=lambda: box.setdefault("run", a.ask("x")))
        runner.start()
        assert asked.wait(60)
        b.refresh()  # (reads catch up by themselves; explicit here to isolate the approver's answer)
        (pending,) = b.pending_approvals()  # the request is in the store while the approver thinks
        b.deny(pending.id, reason="a person said no")
        answer.set()
        runner.join(60)
        assert box["run"].text == "the tool said: denied: a person said no"
        assert RAN == [] and decisions(Session.open("c", store=store)) == ["denied"]


def test_stale_sessions_compact_and_prune_in_turns_without_refresh_and_lose_nothing(tmp_path):
    import warnings

    from agentkit import Retention

    def summary(messages, *, reason, cancel):
        return f"summary of {len(messages)} messages"

    store = FileEventStore(tmp_path, fsync=False)
    kwargs = dict(store=store, model=FunctionModel(lambda r: "ok"), compactor=summary,
                  retention=Retention(max_events=6, keep_last=2))
    with Session.open("c", **kwargs) as a, Session.open("c", **kwargs) as b, warnings.catch_warnings():
        warnings.simplefilter("error")  # no retention step may fail
        for turn in range(10):
            first, second = (a, b) if turn % 2 == 0 else (b, a)
            first.ask(f"turn {turn}")  # the other object is stale: it catches up and decides again
            second.compact(keep_last=2, reason="manual")
        history = list(Session.open("c", store=store).history())
        assert [e.seq for e in history] == list(range(1, len(history) + 1))  # each event once, in order
        asked = [e.content[0].text for e in history if isinstance(e, UserMessageEvent)]
        assert asked == [f"turn {t}" for t in range(10)]
        active = store.load("c").events
        assert len(active) <= 6 + 4 < len(history)  # compacted and pruned along the way
        assert sum(e.type == "compaction" for e in history) >= 5
